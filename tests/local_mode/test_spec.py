"""Bad input is refused when the JobSpec is built (or when the CLI parses it), naming the value and the fix, and
nothing is started or written."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode import ConfigurationError, Distribution, HyperparameterError, JobSpec, run
from smddp_compat.commands.local_cli import main as cli_main



@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A source folder with a script, a data folder, a plain file and an output location."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "src" / "notes.txt").write_text("not a script\n")
    (tmp_path / "other.py").write_text("print('elsewhere')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "a_file").write_text("x")
    return tmp_path


def _base(project: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "entry_point": "train.py",
        "source_dir": str(project / "src"),
        "output_path": str(project / "out"),
    }
    values.update(overrides)
    return values


# (test id, overrides given project path, field named in the error, text that must appear in the message)
BAD_INPUTS = [
    ("unknown-distribution", lambda p: {"distribution": "horovod"}, "distribution", "'horovod'"),
    ("distribution-not-str", lambda p: {"distribution": 3}, "distribution", "3"),
    ("missing-entry-point", lambda p: {"entry_point": "nope.py"}, "entry_point", "'nope.py'"),
    ("missing-entry-point-no-source", lambda p: {"entry_point": str(p / "nope.py"), "source_dir": None}, "entry_point", "nope.py"),
    ("entry-point-not-script", lambda p: {"entry_point": "notes.txt"}, "entry_point", "notes.txt"),
    ("entry-point-outside-source", lambda p: {"entry_point": str(p / "other.py")}, "entry_point", "outside source_dir"),
    ("missing-source-dir", lambda p: {"source_dir": str(p / "nosrc")}, "source_dir", "nosrc"),
    ("channel-path-missing", lambda p: {"channels": {"train": str(p / "nodata")}}, "channels['train']", "nodata"),
    ("channel-bad-name", lambda p: {"channels": {"my train": str(p / "data")}}, "channels", "'my train'"),
    ("channel-s3-no-bucket", lambda p: {"channels": {"train": "s3:///data"}}, "channels['train']", "s3:///data"),
    ("instance-count-zero", lambda p: {"instance_count": 0}, "instance_count", "0"),
    ("instance-count-negative", lambda p: {"instance_count": -2}, "instance_count", "-2"),
    ("instance-count-string", lambda p: {"instance_count": "2"}, "instance_count", "'2'"),
    ("instance-count-bool", lambda p: {"instance_count": True}, "instance_count", "True"),
    ("processes-per-host-zero", lambda p: {"processes_per_host": 0, "distribution": "smddp"}, "processes_per_host", "0"),
    ("none-with-two-processes", lambda p: {"processes_per_host": 2}, "processes_per_host", "distribution 'none'"),
    (
        "dtensor-mesh-cannot-be-split",
        lambda p: {"distribution": "dtensor", "instance_count": 2, "dtensor_mesh": {"batch": 3}},
        "dtensor_mesh",
        "cannot be split evenly over 2 clients",
    ),
    (
        "dtensor-mesh-devices-mismatch",
        lambda p: {"distribution": "dtensor", "instance_count": 2, "dtensor_mesh": {"batch": 4, "model": 2},
                   "devices_per_process": 2},
        "dtensor_mesh",
        "has 8 devices but the job has 4",
    ),
    ("dtensor-mesh-zero-dim", lambda p: {"distribution": "dtensor", "dtensor_mesh": {"batch": 0}}, "dtensor_mesh", "dimension 'batch' has size 0"),
    ("mesh-without-dtensor", lambda p: {"distribution": "smddp", "dtensor_mesh": {"batch": 2}}, "dtensor_mesh", "only used"),
    ("hyperparameter-object", lambda p: {"hyperparameters": {"model": object()}}, "hyperparameters['model']", "JSON-serialisable"),
    ("hyperparameter-set", lambda p: {"hyperparameters": {"layers": {1, 2}}}, "hyperparameters['layers']", "JSON-serialisable"),
    ("hyperparameter-nan", lambda p: {"hyperparameters": {"lr": math.nan}}, "hyperparameters['lr']", "nan"),
    ("hyperparameter-bad-name", lambda p: {"hyperparameters": {"learning rate": 0.1}}, "hyperparameters", "'learning rate'"),
    ("hyperparameter-reserved", lambda p: {"hyperparameters": {"sagemaker_program": "x.py"}}, "hyperparameters", "reserved"),
    ("hyperparameter-too-long", lambda p: {"hyperparameters": {"blob": "x" * 3000}}, "hyperparameters['blob']", "2500"),
    ("max-run-zero", lambda p: {"max_run": 0}, "max_run", "0"),
    ("max-run-infinite", lambda p: {"max_run": math.inf}, "max_run", "inf"),
    ("job-name-invalid", lambda p: {"job_name": "my_job!"}, "job_name", "'my_job!'"),
    ("output-is-a-file", lambda p: {"output_path": str(p / "a_file")}, "output_path", "not a directory"),
    ("output-unwritable", lambda p: {"output_path": str(p / "a_file" / "out")}, "output_path", "cannot be written"),
    ("output-bad-bucket", lambda p: {"output_path": "s3://Not_A_Bucket/x"}, "output_path", "Not_A_Bucket"),
    ("checkpoint-on-s3", lambda p: {"checkpoint_path": "s3://bucket/ckpt"}, "checkpoint_path", "local folder"),
    ("environment-reserved", lambda p: {"environment": {"SM_HOSTS": "[]"}}, "environment['SM_HOSTS']", "set by local_mode"),
    ("environment-nccl-interface", lambda p: {"environment": {"NCCL_SOCKET_IFNAME": "eth1"}},
     "environment['NCCL_SOCKET_IFNAME']", "set by local_mode"),
    ("environment-gloo-timeout", lambda p: {"environment": {"HOROVOD_GLOO_TIMEOUT_SECONDS": "600"}},
     "environment['HOROVOD_GLOO_TIMEOUT_SECONDS']", "set by local_mode"),
    ("environment-not-string", lambda p: {"environment": {"OMP_NUM_THREADS": 2}}, "environment['OMP_NUM_THREADS']", "string"),
    ("environment-bad-name", lambda p: {"environment": {"A-B": "1"}}, "environment", "'A-B'"),
]


@pytest.mark.parametrize(("overrides", "field", "text"), [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_refused_when_the_spec_is_built(
    project: Path, no_leftover_job_dirs: None, overrides, field: str, text: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        JobSpec(**_base(project, **overrides(project)))
    message = str(caught.value)
    assert caught.value.field == field
    assert text in message
    assert "Fix: " in message and caught.value.fix
    assert not (project / "out").exists()


def test_hyperparameter_errors_have_their_own_class(project: Path) -> None:
    with pytest.raises(HyperparameterError):
        JobSpec(**_base(project, hyperparameters={"x": object()}))


def test_good_spec_is_normalised(project: Path) -> None:
    spec = JobSpec(
        **_base(project, distribution="SMDDP", instance_count=2, processes_per_host=2,
                hyperparameters={"epochs": 3, "optimizer": "adam"}, channels={"train": str(project / "data")})
    )
    assert spec.distribution is Distribution.SMDDP
    assert spec.entry_point == "train.py" and spec.entry_point_path == str(project / "src" / "train.py")
    assert spec.hosts == ["algo-1", "algo-2"] and spec.processes_per_host == 2
    assert spec.channels["train"] == str(project / "data")
    assert spec.output_path == str(project / "out")
    assert spec.job_name is not None and spec.job_name.startswith("train-")
    with pytest.raises(TypeError):
        spec.hyperparameters["epochs"] = 4  # type: ignore[index]


def test_dtensor_devices_per_client_is_derived_from_the_mesh(project: Path) -> None:
    spec = JobSpec(**_base(project, distribution="dtensor", instance_count=2, processes_per_host=2,
                           dtensor_mesh={"batch": 4, "model": 2}))
    assert spec.devices_per_client == 2


def test_run_refuses_a_job_name_already_used_before_starting(project: Path) -> None:
    (project / "out" / "job-1").mkdir(parents=True)
    spec = JobSpec(**_base(project, job_name="job-1"))
    stream = io.StringIO()
    with pytest.raises(ConfigurationError, match="already exist"):
        run(spec, stream=stream)
    assert stream.getvalue() == ""


CLI_BAD_INPUTS = [
    ("hyperparameter-without-value", ["--hyperparameters", "epochs"], "--hyperparameters='epochs': is not NAME=VALUE"),
    ("entry-point-after-option", ["--hyperparameters", "epochs=1", "train.py"], "--hyperparameters='train.py': is not NAME=VALUE"),
    ("channel-without-source", ["train.py", "--channel", "train"], "--channel='train'"),
    ("unknown-distribution", ["train.py", "--distribution", "ps"], "distribution='ps'"),
    ("zero-hosts", ["train.py", "--instance-count", "0"], "instance_count=0"),
    ("mesh-not-integer", ["train.py", "--distribution", "dtensor", "--mesh", "batch=four"], "'four'"),
    ("hyperparameter-reserved", ["train.py", "--hp", "sagemaker_program=x.py"], "reserved"),
    ("source-dir-without-entry-point", ["--source-dir", "."], "without ENTRY_POINT"),
    ("env-nccl-interface", ["train.py", "--env", "NCCL_SOCKET_IFNAME=x"], "environment['NCCL_SOCKET_IFNAME']='x'"),
    ("env-gloo-timeout", ["train.py", "--env", "HOROVOD_GLOO_TIMEOUT_SECONDS=9"],
     "environment['HOROVOD_GLOO_TIMEOUT_SECONDS']='9'"),
    ("env-empty-name", ["train.py", "--env", "=x"], "--env='=x': is not NAME=VALUE: the name before '=' is empty"),
    ("env-twice", ["train.py", "--env", "A=1", "A=2"], "--env='A=2': 'A' is given twice"),
    ("channel-empty-name", ["train.py", "--channel", "=data"], "--channel='=data': is not NAME=VALUE"),
    ("hyperparameter-empty-name", ["train.py", "--hp", "=3"], "--hyperparameters='=3': is not NAME=VALUE"),
    ("mesh-empty-name", ["train.py", "--distribution", "dtensor", "--mesh", "batch=2,=2"], "dimension name '' is not an ASCII identifier"),
]


@pytest.mark.parametrize(("argv", "text"), [b[1:] for b in CLI_BAD_INPUTS], ids=[b[0] for b in CLI_BAD_INPUTS])
def test_cli_refuses_bad_input_with_exit_code_2(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_leftover_job_dirs: None,
    argv: list[str],
    text: str,
) -> None:
    monkeypatch.chdir(project / "src")
    assert cli_main([*argv, "--output", str(project / "out")]) == 2
    err = capsys.readouterr().err
    assert text in err and "Fix: " in err
    assert not (project / "out").exists()


def test_model_dir_is_the_estimators_in_every_command(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--model-dir is the TensorFlow estimator's model_dir: /opt/ml/model by default (the host's model folder, in
    both backends), none for no --model_dir, and only a folder of the container's tree (TensorFlow here writes no
    S3, and a folder of this machine would be outside the job)."""
    from smddp_compat.commands.local_cli import build_parser, spec_from_args

    monkeypatch.chdir(project / "src")
    parse = build_parser().parse_args
    assert spec_from_args(parse(["train.py", "--model-dir", "none"])).hyperparameters == {}
    assert spec_from_args(parse(["train.py", "--model-dir", "/opt/ml/model/export"])).hyperparameters == {
        "model_dir": "/opt/ml/model/export"}
    with pytest.raises(ConfigurationError, match=r"model_dir=/x.*Fix: pass --model-dir /x"):
        spec_from_args(parse(["train.py", "--hp", "model_dir=/x"]))
    for bad in ("s3://bucket/model", "/tmp/model", "/opt/ml/../etc"):
        with pytest.raises(SystemExit) as exit_:
            parse(["train.py", "--model-dir", bad])
        assert exit_.value.code == 2 and repr(bad) in capsys.readouterr().err


def test_an_s3_checkpoint_dir_is_the_jobs_checkpoint_s3_uri(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smddp_compat.commands.local_cli import build_parser, spec_from_args

    monkeypatch.chdir(project / "src")
    spec = spec_from_args(build_parser().parse_args(["train.py", "--checkpoint-dir", "s3://bkt/run-1"]))
    assert (spec.checkpoint_s3_uri, spec.checkpoint_path) == ("s3://bkt/run-1", None)
    assert spec.request_params("local")["CheckpointConfig"] == {"S3Uri": "s3://bkt/run-1",
                                                                "LocalPath": "/opt/ml/checkpoints"}
    with pytest.raises(ConfigurationError, match="give one of the two"):
        JobSpec(entry_point="train.py", checkpoint_path=str(project / "c"), checkpoint_s3_uri="s3://bkt/run-1")


def test_cli_values_are_everything_after_the_first_equals_sign(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smddp_compat.commands.local_cli import build_parser, spec_from_args

    monkeypatch.chdir(project / "src")
    args = build_parser().parse_args([
        "train.py", "--hp", "note=a=b  c", "epochs=3", "--env", "MY_FLAGS=--x=1 --y", "EMPTY=",
        "--channel", f"train={project / 'data'}", "--distribution", "dtensor", "--instance-count", "2",
        "--mesh", "batch=4", "--output", str(project / "out"),
    ])
    spec = spec_from_args(args)
    assert dict(spec.hyperparameters) == {"note": "a=b  c", "epochs": 3, "model_dir": "/opt/ml/model"}
    assert dict(spec.environment) == {"MY_FLAGS": "--x=1 --y", "EMPTY": ""}
    assert dict(spec.channels) == {"train": str(project / "data")}
    assert dict(spec.dtensor_mesh) == {"batch": 4}
