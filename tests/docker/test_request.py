"""The twin's request model and CLI refusals (no Docker needed): every field the twin uses is checked, and what it
cannot reproduce is refused naming the field and the fix, before anything starts."""

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

REQUEST: dict[str, Any] = {
    "TrainingJobName": "twin-unit",
    "AlgorithmSpecification": {"TrainingImage": "smddp-compat:latest", "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/jobs"},
    "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    "HyperParameters": {
        "sagemaker_submit_directory": '"s3://bucket/twin-unit/source/sourcedir.tar.gz"',
        "model_dir": '"s3://models/twin-unit/model"',
        "epochs": "3",
    },
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://bucket/train", "S3DataDistributionType": "ShardedByS3Key"}}}],
    "CheckpointConfig": {"S3Uri": "s3://bucket/checkpoints"},
}


def test_a_request_is_read_as_sagemaker_receives_it() -> None:
    request = TrainingJobRequest.from_params(REQUEST)
    assert request.hosts == ["algo-1", "algo-2"]
    assert request.command == ["train"]
    assert request.max_runtime == 600
    assert request.hyperparameter("epochs") == 3
    assert {name: loc.uri for name, loc in request.s3_uris().items()} == {
        "sagemaker_submit_directory": "s3://bucket/twin-unit/source/sourcedir.tar.gz",
        "model_dir": "s3://models/twin-unit/model",
    }
    (channel,) = request.channels
    assert channel.input_data_config() == {
        "TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "None"}
    assert request.checkpoint_s3 is not None and request.checkpoint_local_path == "/opt/ml/checkpoints"


def test_a_describe_answer_is_a_request_too() -> None:
    described = dict(REQUEST, TrainingJobStatus="Completed", TrainingJobArn="arn:...", ModelArtifacts={})
    assert TrainingJobRequest.from_params(described).job_name == "twin-unit"


def _changed(path: str, value: Any) -> dict[str, Any]:
    request = copy.deepcopy(REQUEST)
    *parents, last = path.split(".")
    target: Any = request
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return request


@pytest.mark.parametrize(
    ("path", "value", "named", "fix"),
    [
        ("TrainingJobName", "bad name!", "TrainingJobName", "'smddp-mnist-2026-11-23'"),
        ("AlgorithmSpecification.TrainingImage", None, "TrainingImage", "smddp image"),
        ("AlgorithmSpecification.TrainingInputMode", "Pipe", "TrainingInputMode", "use 'File'"),
        ("ResourceConfig.InstanceType", "p4d", "InstanceType", "ml.c5.xlarge"),
        ("ResourceConfig.InstanceCount", 0, "InstanceCount", "use e.g. 2"),
        ("ResourceConfig.InstanceCount", 100000, "InstanceCount", "give at most 64"),
        ("ResourceConfig.InstanceGroups", [{"InstanceGroupName": "a", "InstanceType": "ml.c5.xlarge",
                                            "InstanceCount": 1}], "InstanceGroups", "InstanceCount"),
        ("HyperParameters.epochs", 3, "HyperParameters['epochs']", "as a string"),
        ("OutputDataConfig.S3OutputPath", "/local/path", "S3OutputPath", "s3://"),
        ("StoppingCondition.MaxRuntimeInSeconds", -1, "MaxRuntimeInSeconds", "3600"),
        ("CheckpointConfig.LocalPath", "/tmp/ckpt", "LocalPath", "/opt/ml/checkpoints"),
        ("InputDataConfig.0.InputMode", "Pipe", "InputMode", "use 'File'"),
        ("InputDataConfig.0.DataSource", {"FileSystemDataSource": {
            "FileSystemId": "fs-0123456789a", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
            "DirectoryPath": "/x"}}, "DataSource", "upload the data to S3"),
        # Values that would otherwise become docker syntax or a path out of the job (issue 19):
        ("CheckpointConfig.LocalPath", "/opt/ml/checkpoints,source=/", "LocalPath", "/opt/ml/checkpoints"),
        ("CheckpointConfig.LocalPath", "/opt/ml/../../etc", "LocalPath", "normalized"),
        ("CheckpointConfig.LocalPath", "/opt/ml/model", "LocalPath", "uses for something else"),
        ("CheckpointConfig.LocalPath", "/opt/ml/input/data/ckpt", "LocalPath", "uses for something else"),
        ("AlgorithmSpecification.TrainingImage", "--privileged", "TrainingImage", "[registry/]repository"),
        ("AlgorithmSpecification.TrainingImage", "img --volume=/:/host", "TrainingImage", "[registry/]repository"),
        ("AlgorithmSpecification.ContainerEntrypoint", "train", "ContainerEntrypoint", "a list"),
        ("AlgorithmSpecification.ContainerArguments", [3], "ContainerArguments[0]", "as a string"),
        ("Environment", {"DOCKER_HOST": "tcp://x\nLD_PRELOAD=/evil.so"}, "Environment['DOCKER_HOST']", "one line"),
        ("Environment", {"A B": "1"}, "Environment name 'A B'", "pattern"),
        ("Environment", {"X": 1}, "Environment['X']", "as a string"),
        ("CheckpointConfig", "s3://bucket/ck", "CheckpointConfig", "as an object"),
        ("StoppingCondition", 3600, "StoppingCondition", "as an object"),
        ("InputDataConfig.0.ChannelName", "..", "ChannelName", "'train'"),
        ("InputDataConfig.0.ChannelName", ".", "ChannelName", "'train'"),
        ("InputDataConfig.0.ChannelName", "a/b", "ChannelName", "pattern"),
        ("RoleArn", None, "RoleArn", "is required"),
        ("NotAField", 1, "NotAField", "TrainingJobName"),
    ],
)
def test_bad_requests_name_the_field_and_the_fix(path: str, value: Any, named: str, fix: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        TrainingJobRequest.from_params(_changed(path, value))
    message = str(caught.value)
    assert named in message and fix in message, message


def _smddp_local(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", "local", *argv],
                          capture_output=True, text=True, timeout=120)


def test_a_request_nested_deeper_than_python_reads_is_refused_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"TrainingJobName": "x", "HyperParameters": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(ConfigurationError, match="nested deeper than Python reads"):
        TrainingJobRequest.from_file(deep)


def test_cli_refusals_start_nothing(tmp_path: Path) -> None:
    missing = _smddp_local("--backend", "docker", "--request", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "JSON file" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_changed("ResourceConfig.InstanceCount", 0)))
    refused = _smddp_local("--backend", "docker", "--request", str(bad))
    assert refused.returncode == 2 and "InstanceCount" in refused.stderr
    no_backend = _smddp_local("--request", str(bad))
    assert no_backend.returncode == 2 and "needs --backend docker" in no_backend.stderr
    mixed = _smddp_local("train.py", "--backend", "docker", "--request", str(bad))
    assert mixed.returncode == 2 and "cannot be combined" in mixed.stderr
    spec = _smddp_local("train.py", "--backend", "docker")  # a script for the twin: checked as the process backend
    assert spec.returncode == 2 and "entry_point='train.py': does not exist" in spec.stderr
    for done in (missing, refused, no_backend, mixed, spec):
        assert "Traceback" not in done.stderr
