"""The request's spot, TensorBoard and checkpoint fields (no Docker needed): a spot job needs
``MaxWaitTimeInSeconds`` of at least ``MaxRuntimeInSeconds``, as CreateTrainingJob requires; TensorBoard's local path
must be a folder the twin can reach; ``checkpointconfig.json`` holds what SageMaker puts there."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode.docker import TrainingJobRequest
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.layout import create_host_tree
from tests.docker.test_request import REQUEST


def _request(**changes: Any) -> dict[str, Any]:
    params = copy.deepcopy(REQUEST)
    for name, value in changes.items():
        params[name] = value
    return params


def test_a_spot_job_reads_its_wait_and_tensorboard_config() -> None:
    request = TrainingJobRequest.from_params(_request(
        EnableManagedSpotTraining=True, StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 600},
        TensorBoardOutputConfig={"S3OutputPath": "s3://bucket/tb"},
    ))
    assert (request.spot, request.max_runtime, request.max_wait) == (True, 600, 600)
    assert request.tensorboard_s3 is not None and request.tensorboard_s3.uri == "s3://bucket/tb"
    assert request.tensorboard_local_path == "/opt/ml/output/tensorboard"
    plain = TrainingJobRequest.from_params(REQUEST)
    assert (plain.spot, plain.max_wait, plain.tensorboard_s3) == (False, None, None)


@pytest.mark.parametrize(
    "stopping", [{"MaxRuntimeInSeconds": 600}, {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 599}]
)
def test_a_spot_job_without_enough_wait_time_is_refused_as_the_service_refuses_it(stopping: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        TrainingJobRequest.from_params(_request(EnableManagedSpotTraining=True, StoppingCondition=stopping))
    message = str(caught.value)
    assert "StoppingCondition.MaxWaitTimeInSeconds" in message and "at least MaxRuntimeInSeconds (600)" in message
    assert "e.g. 1200" in message


@pytest.mark.parametrize(
    "local_path, problem",
    [
        ("/opt/ml/output", "uses for something else"),
        ("/opt/ml/model/tb", "uses for something else"),
        ("/opt/ml/input/tb", "uses for something else"),
        ("/opt/ml/checkpoints/tb", "overlaps the checkpoint folder"),
        ("/tmp/tb", "normalized absolute folder under /opt/ml/"),
        ("/opt/ml/output/../tb", "normalized absolute folder under /opt/ml/"),
    ],
)
def test_a_tensorboard_path_the_twin_cannot_reach_is_refused(local_path: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        TrainingJobRequest.from_params(_request(
            TensorBoardOutputConfig={"S3OutputPath": "s3://bucket/tb", "LocalPath": local_path}))
    assert "TensorBoardOutputConfig.LocalPath" in str(caught.value) and problem in str(caught.value)


def test_checkpointconfig_json_is_written_where_sagemaker_writes_it(tmp_path: Path) -> None:
    request = TrainingJobRequest.from_params(_request(
        CheckpointConfig={"S3Uri": "s3://bucket/checkpoints/", "LocalPath": "/opt/ml/ckpt"}))
    layout = create_host_tree(tmp_path / "algo-1", "algo-1", encoded_hyperparameters={}, resource={},
                              data_config={}, checkpoint_config=request.checkpoint_config())
    written = json.loads((tmp_path / "algo-1" / "input" / "config" / "checkpointconfig.json").read_text())
    assert written == {"LocalPath": "/opt/ml/ckpt", "S3Uri": "s3://bucket/checkpoints/"}
    assert layout.checkpoint_config_file == tmp_path / "algo-1" / "input" / "config" / "checkpointconfig.json"
    without = TrainingJobRequest.from_params({k: v for k, v in REQUEST.items() if k != "CheckpointConfig"})
    assert without.checkpoint_config() is None


def test_an_interruption_is_refused_for_a_job_sagemaker_would_never_interrupt(tmp_path: Path) -> None:
    from smddp_compat.local_mode.docker import SageMakerTwin

    on_demand = TrainingJobRequest.from_params(REQUEST)
    with pytest.raises(ConfigurationError) as caught:
        SageMakerTwin(on_demand, interrupt_after=10)  # refused before any Docker engine is looked for
    assert "interrupt_after" in str(caught.value) and "EnableManagedSpotTraining" in str(caught.value)
    spot = TrainingJobRequest.from_params(_request(
        EnableManagedSpotTraining=True, StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 900}))
    with pytest.raises(ConfigurationError, match="interrupt_after"):
        SageMakerTwin(spot, interrupt_after=float("nan"))

    path = tmp_path / "request.json"
    path.write_text(json.dumps(REQUEST))
    for argv in (["--backend", "docker", "--request", str(path)], ["train.py"]):
        done = subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", "local", *argv, "--interrupt-after", "5"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert "interrupt" in done.stderr and "EnableManagedSpotTraining" in done.stderr, done.stderr
