"""The distribution rules where the entries used to disagree, checked at every entry of SDK v2's environment.

Each DTensor mesh below goes through ``smddp_compat.local_mode.JobSpec``, ``smddp local``, ``smddp_compat.estimators.TensorFlow`` (an
``ml.c5.xlarge`` cluster and ``local_process``) and ``smddp submit``, on 2 CPU hosts x 1 process; every entry must
accept it, or refuse it with the same problem and fix (only the field's spelling follows the entry). The SDK v3
plug-in ``DTensor`` gets the same rows in ``tests/estimators/sdk3/test_distribution_rules.py`` (run in .venv-sdk3).

- ``{"batch": 8}``: CPU clients take mesh size / clients virtual devices (4 each); it was refused by the estimators.
- ``{"bätch": 8}``: names are ASCII identifiers; the estimators accepted it.
- a dimension given twice, and a mesh whose size the 2 clients cannot split: refused everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from smddp_compat.distribution_config import DistributionConfig, HostCapacity
from smddp_compat.errors import ConfigurationError as SharedConfigurationError
from tests.estimators.conftest import tar_members
from tests.fake_aws import ROLE, aws, moto_url  # noqa: F401

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
HOSTS = 2


class Rule(NamedTuple):
    """One mesh in its three spellings and what every entry must answer (problem and fix None: accepted)."""

    case: str
    mesh: Any  # as JobSpec, the estimator's dictionary and the SDK v3 plug-in take it
    cli: str  # as --mesh takes it
    problem: str | None
    fix: str | None


RULES = [
    Rule("cpu-mesh-larger-than-the-clients", {"batch": 8}, "batch=8", None, None),
    Rule("non-ascii-dimension-name", {"bätch": 8}, "bätch=8",
         "dimension name 'bätch' is not an ASCII identifier",
         "use ASCII letters, digits and '_', not starting with a digit, e.g. 'batch' or 'model'"),
    Rule("dimension-given-twice", [["batch", 4], ["batch", 2]], "batch=4,batch=2",
         "dimension name 'batch' is given twice", "give each dimension once, with one size"),
    Rule("mesh-the-clients-cannot-split", {"batch": 3}, "batch=3",
         f"the mesh (batch=3) has 3 devices, which cannot be split evenly over {HOSTS} clients ({HOSTS} host(s) x 1 "
         "process(es))",
         f"make the product of the mesh sizes a multiple of {HOSTS}, or change instance_count / processes_per_host"),
]
IDS = [rule.case for rule in RULES]
ACCEPTED_DEVICES_PER_CLIENT = 4  # {"batch": 8} over 2 clients


def _assert_refused(error: BaseException, rule: Rule) -> None:
    assert (getattr(error, "problem", None), getattr(error, "fix", None)) == (rule.problem, rule.fix), str(error)


def _assert_refused_on_the_command_line(code: int, stderr: str, rule: Rule) -> None:
    assert code == 2, stderr
    assert f"{rule.problem}. Fix: {rule.fix}" in stderr
    assert "Traceback" not in stderr


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "code" / "train.py"
    path.parent.mkdir()
    path.write_text("print('training')\n")
    return path


def test_the_model_itself_on_two_cpu_hosts() -> None:
    for rule in RULES:
        try:
            config = DistributionConfig.from_flat("dtensor", mesh=rule.mesh).resolve(HostCapacity.this_machine(8), HOSTS)
        except SharedConfigurationError as error:
            _assert_refused(error, rule)
        else:
            assert rule.problem is None, rule.case
            assert config.devices_per_process == ACCEPTED_DEVICES_PER_CLIENT


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_jobspec(rule: Rule, script: Path, tmp_path: Path) -> None:
    from smddp_compat.local_mode import JobSpec
    from smddp_compat.local_mode.errors import ConfigurationError

    def build() -> JobSpec:
        return JobSpec(entry_point="train.py", source_dir=str(script.parent), instance_count=HOSTS,
                       distribution="dtensor", dtensor_mesh=rule.mesh, output_path=str(tmp_path / "out"))

    if rule.problem is None:
        spec = build()
        assert spec.devices_per_client == ACCEPTED_DEVICES_PER_CLIENT
        assert dict(spec.dtensor_mesh) == rule.mesh
        return
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert caught.value.field == "dtensor_mesh"
    _assert_refused(caught.value, rule)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_smddp_local(rule: Rule, script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from smddp_compat.commands.local_cli import build_parser, main, spec_from_args

    argv = ["train.py", "--source-dir", str(script.parent), "--instance-count", str(HOSTS),
            "--distribution", "dtensor", "--mesh", rule.cli, "--output", str(tmp_path / "out")]
    if rule.problem is None:  # what main() would run, without running it
        spec = spec_from_args(build_parser().parse_args(argv))
        assert spec.devices_per_client == ACCEPTED_DEVICES_PER_CLIENT
        return
    code = main(argv)
    stderr = capsys.readouterr().err
    _assert_refused_on_the_command_line(code, stderr, rule)
    assert "dtensor_mesh=" in stderr
    assert not (tmp_path / "out").exists()


def _estimator(aws: Any, script: Path, instance_type: str, mesh: Any) -> Any:  # noqa: F811
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.estimators import TensorFlow

    session = {} if instance_type == "local_process" else {"sagemaker_session": aws.sagemaker_session()}
    return TensorFlow(entry_point=str(script), role=ROLE, instance_type=instance_type, instance_count=HOSTS,
                      image_uri=IMAGE, framework_version="2.21", py_version="py311",
                      distribution={"dtensor": {"enabled": True, "mesh": mesh}}, **session)


@pytest.mark.parametrize("instance_type", ["ml.c5.xlarge", "local_process"])
@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_estimator(rule: Rule, instance_type: str, aws: Any, script: Path, tmp_path: Path) -> None:  # noqa: F811
    if rule.problem is None:
        estimator = _estimator(aws, script, instance_type, rule.mesh)
        config = estimator.distribution_plan.config
        assert config.kind == "dtensor" and config.devices_per_process == ACCEPTED_DEVICES_PER_CLIENT
        if instance_type == "local_process":  # local_mode accepts what the estimator hands it
            from smddp_compat.estimators._local_process import build_job_spec

            spec = build_job_spec(
                entry_point=str(script), source_dir=None, instance_count=HOSTS, plan=estimator.distribution_plan,
                hyperparameters={}, inputs=None, output_path=str(tmp_path / "out"), max_run=None, job_name=None,
                environment=None, checkpoint_local_path=None,
            )
            assert spec.devices_per_client == ACCEPTED_DEVICES_PER_CLIENT
        return
    from smddp_compat.estimators.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        _estimator(aws, script, instance_type, rule.mesh)
    assert caught.value.field == "distribution['dtensor']['mesh']"
    _assert_refused(caught.value, rule)
    assert aws.all_objects() == [] and aws.training_jobs() == []


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_smddp_submit(rule: Rule, aws: Any, script: Path, tmp_path: Path,  # noqa: F811
                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.commands.submit_cli import main

    job = f"mesh-{rule.case}"
    code = main(["submit", str(script), "--instance-type", "ml.c5.xlarge", "--instance-count", str(HOSTS),
                 "--role", ROLE, "--image-uri", IMAGE, "--distribution", "dtensor", "--mesh", *rule.cli.split(","),
                 "--job-name", job])
    stderr = capsys.readouterr().err
    if rule.problem is None:
        assert code == 0, stderr
        described = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
        uri = json.loads(described["HyperParameters"]["sagemaker_submit_directory"])
        members = tar_members(aws.download(uri, str(tmp_path / "sourcedir.tar.gz")))
        dtensor = json.loads(members["smddp_compat_dtensor.json"])["dtensor"]
        assert dtensor["devices_per_process"] == ACCEPTED_DEVICES_PER_CLIENT and dtensor["mesh"] == [["batch", 8]]
        return
    _assert_refused_on_the_command_line(code, stderr, rule)
    assert aws.all_objects() == [] and aws.training_jobs() == []


GIVEN_DEVICES_PROBLEM = ("the mesh (batch=8) has 8 devices but the job has 4 (2 host(s) x 1 process(es) x 2 CPU(s))",
                         "make the product of the mesh sizes 4, or change instance_count / processes_per_host / "
                         "devices_per_process")


def test_given_devices_per_process_must_match_the_mesh_at_every_entry(
    aws: Any, script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    """Once devices_per_process is given, the mesh size must be clients x devices (here 8 != 2 x 2)."""
    from smddp_compat.local_mode import JobSpec
    from smddp_compat.commands.local_cli import main as local_main
    from smddp_compat.local_mode.errors import ConfigurationError as LocalConfigurationError

    with pytest.raises(LocalConfigurationError) as local:
        JobSpec(entry_point=str(script), instance_count=HOSTS, distribution="dtensor", dtensor_mesh={"batch": 8},
                devices_per_process=2, output_path=str(tmp_path / "out"))
    assert (local.value.problem, local.value.fix) == GIVEN_DEVICES_PROBLEM
    code = local_main([str(script), "--instance-count", str(HOSTS), "--distribution", "dtensor", "--mesh", "batch=8",
                       "--devices-per-process", "2", "--output", str(tmp_path / "out")])
    assert code == 2 and "{}. Fix: {}".format(*GIVEN_DEVICES_PROBLEM) in capsys.readouterr().err

    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.commands.submit_cli import main as submit_main
    from smddp_compat.estimators.errors import ConfigurationError

    from smddp_compat.estimators import TensorFlow

    with pytest.raises(ConfigurationError) as estimator:
        TensorFlow(entry_point=str(script), role=ROLE, instance_type="ml.c5.xlarge", instance_count=HOSTS,
                   image_uri=IMAGE, framework_version="2.21", py_version="py311",
                   sagemaker_session=aws.sagemaker_session(),
                   distribution={"dtensor": {"enabled": True, "mesh": {"batch": 8}, "devices_per_process": 2}})
    assert (estimator.value.problem, estimator.value.fix) == GIVEN_DEVICES_PROBLEM
    code = submit_main(["submit", str(script), "--instance-type", "ml.c5.xlarge", "--instance-count", str(HOSTS),
                        "--role", ROLE, "--image-uri", IMAGE, "--distribution", "dtensor", "--mesh", "batch=8",
                        "--devices-per-process", "2"])
    assert code == 2 and "{}. Fix: {}".format(*GIVEN_DEVICES_PROBLEM) in capsys.readouterr().err
    assert aws.all_objects() == [] and aws.training_jobs() == []


@pytest.mark.parametrize("flat", [
    {"kind": "smddp", "processes_per_host": 2, "custom_mpi_options": "-x NCCL_DEBUG=INFO"},
    {"kind": "mpi"},
    {"kind": "mwms"},
    {"kind": "dtensor", "processes_per_host": 2, "mesh": "batch=4,model=2", "devices_per_process": 4},
])
def test_the_flat_form_and_the_sdk_dictionary_describe_the_same_config(flat: dict[str, Any]) -> None:
    """``smddp submit`` hands the estimator ``to_sdk_dict()``: reading it back gives the same config."""
    config = DistributionConfig.from_flat(flat.pop("kind"), **flat)
    assert DistributionConfig.from_sdk_dict(config.to_sdk_dict()) == config


def test_gpu_hosts_split_their_gpus_over_the_clients() -> None:
    p4d = HostCapacity.instance("ml.p4d.24xlarge", 96, 8)
    config = DistributionConfig("dtensor", 2, mesh={"batch": 16}).resolve(p4d, 2)
    assert (config.device_type, config.devices_per_process) == ("GPU", 4)
    assert DistributionConfig("smddp").resolve(p4d, 2).processes_per_host == 8
    assert DistributionConfig("mpi").resolve(HostCapacity.instance("ml.c5.xlarge", 4, 0), 1).processes_per_host == 1
    with pytest.raises(SharedConfigurationError, match="8 GPU\\(s\\), which 3 clients cannot share evenly"):
        DistributionConfig("dtensor", 3).resolve(p4d, 1)
