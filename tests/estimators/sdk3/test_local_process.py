"""``train_local``: a ModelTrainer's job with each of the kit's configs on 2 local hosts (process backend, no Docker),
and the finished job as SDK v3 shows a SageMaker job, its MLflow run too (``mlflow=URI``, read back from a real server
and by SDK v3's own reader; docs/mlflow.md shows those lines). Runs in .venv-sdk3 only (``bash tests/run-sdk3``)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.estimators.conftest import REPO

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

pytestmark = pytest.mark.processes

SCRIPTS = Path(REPO) / "tests" / "local_mode" / "scripts"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"


def _trainer(entry_script: str, distributed, *, instance_type: str = "ml.c5.xlarge", **kwargs):
    from sagemaker.train import ModelTrainer
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    return ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER,  # no AWS session or role needed
        training_image=IMAGE,
        source_code=SourceCode(source_dir=str(SCRIPTS), entry_script=entry_script),
        compute=Compute(instance_type=instance_type, instance_count=2),
        distributed=distributed,
        base_job_name="v3-local",
        **kwargs,
    )


def _records(job, prefix: str) -> list[dict]:
    """The JSON records the job's processes wrote to their output data folders, from ``output.tar.gz``."""
    output = job.model_artifacts.s3_model_artifacts.replace("model.tar.gz", "output.tar.gz")
    with tarfile.open(output) as tar:
        return [json.load(tar.extractfile(member)) for member in tar.getmembers()
                if Path(member.name).name.startswith(prefix) and member.isfile()]


def test_a_plain_job_gets_sdk3_arguments_and_answers_as_a_training_job(tmp_path: Path, mlflow_server) -> None:
    from mlflow import MlflowClient
    from sagemaker.core.shapes import MetricDefinition
    from sagemaker.core.training.configs import InputData
    from sagemaker.train import get_available_metrics

    from smddp_compat.estimators.sdk3 import train_local

    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    hyperparameters = {"epochs": 3, "optimizer": "adam", "layers": [64, 32], "dropout": 0.5, "shuffle": True}
    trainer = _trainer("dump_env.py", None, hyperparameters=hyperparameters).with_metric_definitions(
        [MetricDefinition(name="process", regex=r"dumped environment of process (\d+)")])
    inputs, uri = [InputData(channel_name="train", data_source=str(data))], mlflow_server.uri
    job = train_local(trainer, inputs, output_path=str(tmp_path / "out"), mlflow=uri)  # uri: the tracking server's
    run = MlflowClient(uri).get_run(job.mlflow_details.mlflow_run_id)  # the job's run, as SageMaker's MLflow has it
    metrics = get_available_metrics(job)  # SDK v3's own reader of a job's run: ['process']

    assert job is trainer._latest_training_job
    assert (job.training_job_status, job.secondary_status) == ("Completed", "Completed")
    assert job.training_job_name.startswith("v3-local-")
    assert job.resource_config.instance_count == 2
    assert job.hyper_parameters == {"epochs": "3", "optimizer": "adam", "layers": "[64, 32]", "dropout": "0.5",
                                    "shuffle": "true"}  # as SDK v3 sends them
    assert Path(job.model_artifacts.s3_model_artifacts).is_file()
    records = sorted(_records(job, "env-"), key=lambda r: r["env"]["SM_CURRENT_HOST"])
    assert [r["env"]["SM_CURRENT_HOST"] for r in records] == ["algo-1", "algo-2"]
    # SDK v3's drivers' rule: in the order given, strings as they are, other values as JSON.
    assert records[0]["argv"] == ["--epochs", "3", "--optimizer", "adam", "--layers", "[64, 32]", "--dropout",
                                  "0.5", "--shuffle", "true"]
    assert json.loads(records[0]["env"]["SM_HPS"]) == hyperparameters
    assert records[0]["channels"] == {"train": ["rows.csv"]}

    # the job's run, as SDK v3 shows a job tracked by SageMaker's managed MLflow; the scripts found it too
    assert job.mlflow_config.mlflow_resource_arn == uri
    assert {r["env"]["MLFLOW_RUN_ID"] for r in records} == {run.info.run_id}
    assert run.info.experiment_id == job.mlflow_details.mlflow_experiment_id == \
        MlflowClient(uri).get_experiment_by_name("v3-local").experiment_id  # the job's name less its timestamp
    assert (run.info.run_name, run.info.status) == (job.training_job_name, "FINISHED")
    assert run.data.params == {"epochs": "3", "optimizer": "adam", "layers": "[64, 32]", "dropout": "0.5",
                               "shuffle": "true"}
    assert sorted(point.value for point in MlflowClient(uri).get_metric_history(run.info.run_id, "process")) == [
        0.0, 1.0]
    assert metrics == ["process"]


@pytest.mark.parametrize("config, script, prefix, total", [
    ("SMDDPCompat", "allreduce.py", "allreduce-", 3.0),  # ranks 0 and 1 add rank + 1
    ("Horovod", "allreduce.py", "allreduce-", 3.0),
    ("MultiWorkerMirrored", "mwms_allreduce.py", "mwms-", 3.0),  # workers 0 and 1 add index + 1
    ("DTensor", "dtensor_sum.py", "dtensor-", 2.0),  # a ones vector over the mesh's two devices
])
def test_each_kit_config_runs_its_ranks_on_two_hosts(tmp_path: Path, config: str, script: str, prefix: str,
                                                     total: float) -> None:
    from smddp_compat.estimators import sdk3

    distributed = getattr(sdk3, config)(**({"processes_per_host": 1} if config == "SMDDPCompat" else {}))
    job = sdk3.train_local(_trainer(script, distributed), output_path=str(tmp_path), logs=False)

    assert job.training_job_status == "Completed"
    records = _records(job, prefix)
    assert len(records) == 2, records
    assert {r["sum"] for r in records} == {total}, records


def test_a_parameter_server_job_ends_when_its_scripts_end(tmp_path: Path) -> None:
    """Scripts that train with plain ``fit`` on each host, never using the servers (AWS's example's pattern)."""
    from smddp_compat.estimators import sdk3

    trainer = _trainer("keras_fit_per_host.py", sdk3.ParameterServer(), hyperparameters={"epochs": 1},
                       environment={"SMDDP_PS_START_TIMEOUT_SECONDS": "3600"})
    job = sdk3.train_local(trainer, output_path=str(tmp_path), logs=False)
    assert job.training_job_status == "Completed"
    assert Path(job.model_artifacts.s3_model_artifacts).is_file()


def test_a_failed_script_raises_as_train_does_and_keeps_the_description(tmp_path: Path) -> None:
    from sagemaker.core.utils.exceptions import FailedStatusError

    from smddp_compat.estimators.sdk3 import train_local

    trainer = _trainer("fail_or_sleep.py", None, hyperparameters={"fail-index": 1, "delay": 0, "sleep": 30})
    with pytest.raises(FailedStatusError, match="Failed"):
        train_local(trainer, output_path=str(tmp_path), logs=False)
    job = trainer._latest_training_job
    assert job.training_job_status == "Failed"
    assert "algo-" in job.failure_reason


def test_a_config_that_is_not_the_kits_is_named() -> None:
    from sagemaker.train.distributed import Torchrun

    from smddp_compat.estimators.errors import ConfigurationError
    from smddp_compat.estimators.sdk3 import train_local

    with pytest.raises(ConfigurationError, match="Torchrun.*SMDDPCompat"):
        train_local(_trainer("dump_env.py", Torchrun()))
