"""A table of bad inputs across the command lines (smddprun, smddp local, smddp submit) and the Python APIs
(smddp_compat.tensorflow, local_mode.JobSpec, estimators.TensorFlow).

Each must give an error that names the bad value and the fix, end with a non-zero exit (or raise), and leave no
half-written artifact behind (no model.tar.gz, no temporary file, no checkpoint). ``smddp submit`` runs against an
AWS endpoint that refuses connections: an error other than the expected one would show that an AWS call was tried
before the input was checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.reliability.conftest import PROGRAMS, REPO, quiet_env, smddp, smddprun

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
SUBMIT = ("submit", "train.py", "--role", ROLE, "--image-uri", IMAGE)


@dataclass(frozen=True)
class Bad:
    """One bad input: how to run it, the words its error must contain, the exit code expected."""

    case: str
    tool: str  # smddprun | smddp | submit (in-process smddp submit)
    args: tuple[str, ...]
    words: tuple[str, ...]
    exit_code: int = 2
    files: dict[str, str] = field(default_factory=dict)  # extra files to create in the working folder


CLI_CASES = [
    # smddprun
    Bad("smddprun-np-0", "smddprun", ("-np", "0", "python3", "train.py"),
        ("-np must be at least 1, got 0", "give the number of ranks")),
    Bad("smddprun-malformed-hosts", "smddprun", ("-np", "2", "-H", "localhost:x", "python3", "train.py"),
        ("malformed host list 'localhost:x'", "expected host:slots")),
    Bad("smddprun-duplicate-host", "smddprun", ("-np", "2", "-H", "localhost:1,localhost:1", "python3", "train.py"),
        ("'localhost' appears more than once", "list each host once")),
    Bad("smddprun-foreign-host", "smddprun", ("-np", "2", "-H", "trainer.invalid:2", "python3", "train.py"),
        ("'trainer.invalid'", "Use localhost")),
    Bad("smddprun-more-ranks-than-slots", "smddprun", ("-np", "3", "-H", "localhost:2", "python3", "train.py"),
        ("-np 3 asks for more ranks than the 2 slots", "add slots or lower -np")),
    Bad("smddprun-negative-timeout", "smddprun", ("-np", "1", "--timeout", "-5", "python3", "train.py"),
        ("--timeout", "got '-5'", "expected a positive number of seconds")),
    Bad("smddprun-stall-shutdown-before-check", "smddprun",
        ("-np", "1", "--stall-check-seconds", "10", "--stall-shutdown-seconds", "5", "python3", "train.py"),
        ("--stall-shutdown-seconds 5 is shorter than --stall-check-seconds 10", "raise --stall-shutdown-seconds")),
    Bad("smddprun-missing-program", "smddprun", ("-np", "1", "/nonexistent/python9", "train.py"),
        ("/nonexistent/python9", "Check that the program exists")),
    Bad("smddprun-no-command", "smddprun", ("-np", "2"), ("needs a command to run", "smddprun -np 2 python")),
    # smddp local
    Bad("local-instance-count-0", "smddp", ("local", "train.py", "--instance-count", "0"),
        ("instance_count=0", "give instance_count >= 1")),
    Bad("local-unknown-distribution", "smddp", ("local", "train.py", "--distribution", "horovod"),
        ("distribution='horovod'", "use one of: none, smddp, mpi, mwms, dtensor")),
    Bad("local-missing-entry-point", "smddp", ("local", "trian.py"),
        ("entry_point='trian.py'", "check the path to the training script")),
    Bad("local-missing-channel", "smddp", ("local", "train.py", "--channel", "train=/nonexistent/mnist"),
        ("channels['train']='/nonexistent/mnist'", "give an existing folder")),
    Bad("local-hyperparameter-not-name-value", "smddp", ("local", "train.py", "--hyperparameters", "lr"),
        ("'lr'", "NAME=VALUE")),
    Bad("local-dtensor-mesh-does-not-divide", "smddp",
        ("local", "train.py", "--distribution", "dtensor", "--instance-count", "2", "--mesh", "batch=3"),
        ("batch=3", "cannot be split evenly over 2 clients", "multiple of 2")),
    Bad("local-reserved-environment", "smddp", ("local", "train.py", "--env", "SM_HOSTS=[\"algo-9\"]"),
        ("environment['SM_HOSTS']", "leave it out")),
    Bad("local-output-under-a-file", "smddp", ("local", "train.py", "--output", "train.py/out"),
        ("train.py/out': cannot be written", "choose a writable directory")),
    Bad("local-max-run-0", "smddp", ("local", "train.py", "--max-run", "0"), ("max_run=0", "e.g. max_run=3600")),
    # smddp submit (estimators)
    Bad("submit-unknown-instance-type", "submit", (*SUBMIT, "--instance-type", "ml.zz9.huge"),
        ("instance_type='ml.zz9.huge'", "estimators.known_instance_types()")),
    Bad("submit-instance-count-0", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--instance-count", "0"),
        ("instance_count=0", "instance_count=1")),
    Bad("submit-bad-role-arn", "submit",
        ("submit", "train.py", "--role", "SageMakerRole", "--image-uri", IMAGE, "--instance-type", "ml.c5.xlarge"),
        ("role='SageMakerRole'", "arn:aws:iam::")),
    Bad("submit-unknown-distribution", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--distribution", "ps"),
        ("--distribution='ps'", "use one of none, smddp, mpi, mwms, dtensor")),
    Bad("submit-mpi-options-with-shell-metacharacters-on-no-mpi", "submit",
        (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--custom-mpi-options", "; touch pwned"),
        ("--custom-mpi-options='; touch pwned'", "drop the option")),
    Bad("submit-dtensor-mesh-does-not-fill", "submit",
        (*SUBMIT, "--instance-type", "ml.p4d.24xlarge", "--instance-count", "2", "--distribution", "dtensor",
         "--mesh", "batch=6"), ("{'batch': 6}", "make the product of the mesh sizes 16")),
    Bad("submit-missing-channel", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--channel", "train=data"),
        ("--channel train='data'", "give an existing path or an s3:// URI")),
]


def assert_no_half_written_artifacts(root: Path) -> None:
    """No model.tar.gz, no temporary file, no checkpoint anywhere under ``root``."""
    for path in root.rglob("*"):
        assert path.name != "model.tar.gz", path
        assert not path.name.endswith(".tmp"), path
        assert "checkpoint" not in path.name, path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding a TF-free train.py, made the current directory."""
    (tmp_path / "train.py").write_text("print('training')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def dead_aws(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS settings whose endpoint refuses every connection (and no telemetry, no user config)."""
    tmp_path = tmp_path_factory.mktemp("aws-config")
    config = tmp_path / "sagemaker-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    for name, value in {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "not-a-real-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_MAX_ATTEMPTS": "1",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
        "SAGEMAKER_VALIDATE_ROLE": "false",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("bad", CLI_CASES, ids=[b.case for b in CLI_CASES])
def test_bad_command_line_input(bad: Bad, workdir: Path, dead_aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    if bad.tool == "submit":
        pytest.importorskip("sagemaker.tensorflow", reason="smddp submit needs the SageMaker SDK v2")
        from smddp_compat.cli import main

        code = main(list(bad.args))
        error = capsys.readouterr().err
    else:
        argv = smddprun(*bad.args) if bad.tool == "smddprun" else smddp(*bad.args)
        proc = subprocess.run(argv, env=quiet_env(), cwd=workdir, capture_output=True, text=True, timeout=120)
        code, error = proc.returncode, proc.stderr
    assert code == bad.exit_code, error
    for words in bad.words:
        assert words in error, f"{words!r} not in: {error}"
    if bad.tool != "submit":  # in-process, the SDK's log handlers may still hold an earlier test's closed stderr
        assert "Traceback" not in error
    assert_no_half_written_artifacts(workdir)
    assert not (workdir / "smddp_local_output").exists()
    assert not (workdir / "pwned").exists()


# -- failures that need a job to start or a special file system -----------------------------------------------------

@contextlib.contextmanager
def tiny_filesystem(path: Path, size: str, *options: str) -> Iterator[bool]:
    """Mounts a tmpfs of ``size`` at ``path`` (yields True), or yields False when mounting is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)],
                           capture_output=True, text=True, timeout=30) if os.geteuid() == 0 else None
    mounted = mount is not None and mount.returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=True)


def _limit_file_size() -> None:
    # Fallback for a full disk where tmpfs cannot be mounted: files over 150 kB fail with EFBIG, not SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))


def test_full_disk_fails_the_job_without_a_partial_model_tarball(tmp_path: Path) -> None:
    out = tmp_path / "disk"
    with tiny_filesystem(out, "64k") as mounted:
        proc = subprocess.run(
            smddp("local", "write_model.py", "--source-dir", str(PROGRAMS), "--output", str(out / "jobs"),
                  "--job-name", "full-disk", "--hyperparameters", "files=4", "file-bytes=100000"),
            env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
            preexec_fn=None if mounted else _limit_file_size,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "model written" in proc.stdout  # the script succeeded; storing its model failed
        expected = "No space left on device" if mounted else "File too large"
        assert f"could not write {out / 'jobs' / 'full-disk' / 'output' / 'model.tar.gz'}" in proc.stderr
        assert expected in proc.stderr and "Fix: free disk space or choose another output path" in proc.stderr
        assert_no_half_written_artifacts(out)


def test_unwritable_output_folder_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    out = tmp_path / "read-only"
    with tiny_filesystem(out, "64k", "ro") as mounted:
        target = out / "jobs" if mounted else tmp_path / "train.py" / "jobs"
        (tmp_path / "train.py").write_text("print('training')\n")
        proc = subprocess.run(smddp("local", "train.py", "--output", str(target)), env=quiet_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert f"output_path='{target}': cannot be written" in proc.stderr
        assert "Fix: choose a writable directory" in proc.stderr
        assert "training" not in proc.stdout
        assert not target.exists()


def test_mismatched_tensor_shapes_across_ranks_fail_the_local_job(tmp_path: Path) -> None:
    proc = subprocess.run(
        smddp("local", "mismatched_shapes.py", "--source-dir", str(PROGRAMS), "--distribution", "smddp",
              "--instance-count", "2", "--output", str(tmp_path / "out"), "--job-name", "mismatch", "--max-run",
              "240"),
        env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "failure reason: " in output and "CollectiveError: allreduce failed across ranks" in output, output
    assert "Mismatched" in output and "make the tensor the same shape and dtype on every rank" in output
    assert_no_half_written_artifacts(tmp_path / "out")


def test_global_batch_not_divisible_by_the_replicas(tmp_path: Path) -> None:
    proc = subprocess.run(
        smddp("local", "keras_mwms.py", "--source-dir", str(REPO / "entry_points"), "--distribution", "mwms",
              "--instance-count", "2", "--hyperparameters", "global-batch-size=7", "epochs=1",
              "--output", str(tmp_path / "out"), "--job-name", "bad-batch", "--max-run", "240"),
        env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "--global-batch-size 7 is not divisible by the 2 replicas in sync" in output, output
    assert "use a multiple of 2" in output
    assert_no_half_written_artifacts(tmp_path / "out")


# -- Python APIs ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compat_api_errors() -> dict[str, list[str] | None]:
    """The errors of bad smddp_compat.tensorflow calls, made in one single-rank process."""
    proc = subprocess.run([sys.executable, str(PROGRAMS / "api_errors.py")], env=quiet_env(), capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULTS "))
    return json.loads(line[len("RESULTS "):])


COMPAT_CASES = [
    ("allreduce-unknown-op", "UsageError", ("unknown reduction op 'median'", "use one of ReduceOp.AVERAGE")),
    ("allreduce-unknown-compression", "UsageError", ("unknown compression 'zip'", "Compression.fp16")),
    ("broadcast-root-out-of-range", "UsageError", ("root_rank 5 is out of range", "ranks 0..0")),
    ("optimizer-bad-bucket", "UsageError", ("bucket_cap_mb must be a positive number", "got -1")),
    ("tape-device-dense", "NotSupportedError", ("device_dense='/gpu:0' is not supported", "Remove the device_dense")),
]


@pytest.mark.parametrize("case, kind, words", COMPAT_CASES, ids=[c[0] for c in COMPAT_CASES])
def test_bad_smddp_compat_call(compat_api_errors: dict, case: str, kind: str, words: tuple[str, ...]) -> None:
    result = compat_api_errors[case]
    assert result is not None, f"{case} was accepted"
    assert result[0] == kind, result
    for text in words:
        assert text in result[1], result


def _jobspec_hyperparameter_not_json(workdir: Path) -> None:
    from local_mode import JobSpec

    JobSpec("train.py", hyperparameters={"optimizer": object()})


def _jobspec_mesh_does_not_divide(workdir: Path) -> None:
    from local_mode import JobSpec

    JobSpec("train.py", distribution="dtensor", instance_count=2, dtensor_mesh={"batch": 3})


def _estimator(**overrides: object) -> Callable[[Path], None]:
    def build(workdir: Path) -> None:
        from estimators import TensorFlow

        kwargs = dict(entry_point="train.py", role=ROLE, instance_type="ml.c5.xlarge", instance_count=1,
                      image_uri=IMAGE, framework_version="2.21", py_version="py311")
        kwargs.update(overrides)
        TensorFlow(**kwargs).fit(wait=False, job_name="must-not-start")

    return build


API_CASES = [
    ("jobspec-hyperparameter-not-json", _jobspec_hyperparameter_not_json, "HyperparameterError",
     ("hyperparameters['optimizer']", "is not JSON-serialisable", "pass a string, number, boolean")),
    ("jobspec-mesh-does-not-divide", _jobspec_mesh_does_not_divide, "ConfigurationError",
     ("dtensor_mesh", "cannot be split evenly over 2 clients", "multiple of 2")),
    ("estimator-unknown-instance-type", _estimator(instance_type="ml.zz9.huge"), "UnknownInstanceTypeError",
     ("instance_type='ml.zz9.huge'", "known_instance_types()")),
    ("estimator-instance-count-0", _estimator(instance_count=0), "ConfigurationError",
     ("instance_count=0", "instance_count=1")),
    ("estimator-hyperparameter-not-json", _estimator(hyperparameters={"optimizer": {1, 2}}), "ConfigurationError",
     ("hyperparameters['optimizer']", "not JSON-serialisable")),
    ("estimator-bad-role", _estimator(role="arn:aws:iam::12:role/x"), "ConfigurationError",
     ("role='arn:aws:iam::12:role/x'", "arn:aws:iam::123456789012:role/")),
]


@pytest.mark.parametrize("case, call, kind, words", API_CASES, ids=[c[0] for c in API_CASES])
def test_bad_python_api_call(case: str, call: Callable[[Path], None], kind: str, words: tuple[str, ...],
                             workdir: Path, dead_aws: None) -> None:
    if case.startswith("estimator"):
        pytest.importorskip("sagemaker.tensorflow", reason="estimators.TensorFlow needs the SageMaker SDK v2")
    with pytest.raises(Exception) as info:
        call(workdir)
    assert type(info.value).__name__ == kind, repr(info.value)
    for text in words:
        assert text in str(info.value), str(info.value)
    assert sorted(p.name for p in workdir.iterdir()) == ["train.py"]
