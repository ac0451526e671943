"""The twin's table of CreateTrainingJob members (no Docker needed): every member of SageMaker's API model is
classified as reproduced, warned or refused, and a request's members are refused or warned about by name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from smddp_compat.local_mode.docker import TrainingJobRequest
from smddp_compat.local_mode.docker._fields import MEMBERS, Handling, config_files, review
from smddp_compat.local_mode.errors import ConfigurationError
from tests.docker.test_request import REQUEST

_TABLE = {member.path: member for member in MEMBERS}


def _input_shape() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker").operation_model(
        "CreateTrainingJob").input_shape


def _unclassified(shape: Any, path: str = "") -> list[str]:
    """Members of ``shape`` that neither have an entry of their own nor sit in a structure that is walked."""
    missing: list[str] = []
    for name, member in shape.members.items():
        where = f"{path}.{name}" if path else name
        if where in _TABLE:
            continue
        inner = member.member if member.type_name == "list" else member
        if inner.type_name == "structure":
            missing += _unclassified(inner, f"{where}[]" if member.type_name == "list" else where)
        else:
            missing.append(where)
    return missing


def _model_paths(shape: Any, path: str = "") -> set[str]:
    paths: set[str] = set()
    for name, member in shape.members.items():
        where = f"{path}.{name}" if path else name
        paths.add(where)
        inner = member.member if member.type_name == "list" else member
        if inner.type_name == "structure":
            paths |= _model_paths(inner, f"{where}[]" if member.type_name == "list" else where)
    return paths


def test_every_member_of_botocores_model_is_classified() -> None:
    assert _unclassified(_input_shape()) == []
    assert set(_TABLE) <= _model_paths(_input_shape()), "entries for members SageMaker's model does not have"
    assert len(_TABLE) == len(MEMBERS), "a member is classified twice"
    for member in MEMBERS:
        assert member.note, member.path
        assert member.handling is not Handling.REFUSED or member.fix, f"{member.path}: a refusal needs its fix"


def test_a_member_botocore_gains_is_caught() -> None:
    from botocore.model import ShapeResolver

    shapes = {
        "Input": {"type": "structure", "members": {"TrainingJobName": {"shape": "S"}, "Brand": {"shape": "New"}}},
        "New": {"type": "structure", "members": {"Knob": {"shape": "S"}}},
        "S": {"type": "string"},
    }
    assert _unclassified(ShapeResolver(shapes).get_shape_by_name("Input")) == ["Brand.Knob"]
    # and a request that sets it is told so, not silently dropped
    (said,) = [w for w in review({**REQUEST, "Brand": {"Knob": "on"}}) if w.startswith("Brand")]
    assert said.startswith("Brand.Knob = 'on': not known to the twin"), said


def _with(path: str, value: Any) -> dict[str, Any]:
    request = copy.deepcopy(REQUEST)
    *parents, last = path.split(".")
    target: Any = request
    for key in parents:
        target = target[int(key)] if key.isdigit() else target.setdefault(key, {})
    target[last] = value
    return request


@pytest.mark.parametrize(
    ("path", "value", "named", "fix"),
    [
        ("AlgorithmSpecification.AlgorithmName", "my-algorithm", "AlgorithmSpecification.AlgorithmName",
         "TrainingImage"),
        ("InputDataConfig.0.DataSource.S3DataSource.S3DataType", "ManifestFile",
         "InputDataConfig[0].DataSource.S3DataSource.S3DataType", "use 'S3Prefix'"),
        ("InputDataConfig.0.CompressionType", "Gzip", "InputDataConfig[0].CompressionType", "File mode"),
        ("InputDataConfig.0.RecordWrapperType", "RecordIO", "InputDataConfig[0].RecordWrapperType", "leave it out"),
        ("InputDataConfig.0.DataSource.S3DataSource.InstanceGroupNames", ["a"], "InstanceGroupNames",
         "InstanceCount"),
        ("ServerlessJobConfig", {"BaseModelArn": "arn:aws:sagemaker:us-east-1:aws:hub-content/x/Model/m",
                                 "JobType": "FineTuning"}, "ServerlessJobConfig", "run this job on SageMaker"),
    ],
)
def test_what_the_twin_cannot_reproduce_is_refused_by_name(path: str, value: Any, named: str, fix: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        TrainingJobRequest.from_params(_with(path, value))
    message = str(caught.value)
    assert named in message and fix in message, message


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("EnableInterContainerTrafficEncryption", True, "EnableInterContainerTrafficEncryption = True: not reproduced"),
        ("VpcConfig", {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
         "VpcConfig: not reproduced: the hosts run on an internal network"),
        ("RetryStrategy", {"MaximumRetryAttempts": 3}, "RetryStrategy: not reproduced"),
        ("AlgorithmSpecification.TrainingInputMode", "FastFile", "TrainingInputMode = 'FastFile': FastFile is served"),
        ("AlgorithmSpecification.ContainerArguments", ["--epochs", "3"],
         "ContainerArguments: given without ContainerEntrypoint: the twin runs `train` followed by"),
        ("DebugHookConfig", {"S3OutputPath": "s3://bucket/debug"}, "written to /opt/ml/input/config/debughookconfig"),
        ("InputDataConfig.0.ShuffleConfig", {"Seed": 7}, "InputDataConfig[0].ShuffleConfig: not reproduced"),
        ("Tags", [{"Key": "team", "Value": "ml"}], "Tags: not applied"),
    ],
)
def test_what_the_twin_does_differently_is_warned_by_name(path: str, value: Any, said: str) -> None:
    request = TrainingJobRequest.from_params(_with(path, value))
    assert any(said in warning for warning in request.warnings), request.warnings


def test_what_asks_for_nothing_is_not_warned_about() -> None:
    quiet = {
        "EnableInterContainerTrafficEncryption": False, "EnableNetworkIsolation": False, "Tags": [],
        "RemoteDebugConfig": {"EnableRemoteDebug": False}, "InfraCheckConfig": {"EnableInfraCheck": False},
        "ProfilerConfig": {"DisableProfiler": True},
    }
    baseline = TrainingJobRequest.from_params(REQUEST).warnings
    assert TrainingJobRequest.from_params({**REQUEST, **quiet}).warnings == baseline
    with_entrypoint = _with("AlgorithmSpecification.ContainerEntrypoint", ["python", "train.py"])
    with_entrypoint["AlgorithmSpecification"]["ContainerArguments"] = ["--epochs", "3"]
    assert not [w for w in TrainingJobRequest.from_params(with_entrypoint).warnings if "ContainerArguments" in w]


def test_network_isolation_with_an_s3_source_is_told_how_sagemaker_hands_it_over() -> None:
    isolated = TrainingJobRequest.from_params({**REQUEST, "EnableNetworkIsolation": True})
    assert isolated.network_isolation
    (said,) = [w for w in isolated.warnings if w.startswith("EnableNetworkIsolation")]
    assert "/opt/ml/input/data/code/sourcedir.tar.gz" in said and "'code' channel" in said
    (role,) = [w for w in isolated.warnings if w.startswith("RoleArn")]
    assert "get none (network isolation)" in role
    as_the_sdk = copy.deepcopy(REQUEST)
    as_the_sdk["EnableNetworkIsolation"] = True
    as_the_sdk["HyperParameters"]["sagemaker_submit_directory"] = '"/opt/ml/input/data/code/sourcedir.tar.gz"'
    (said,) = [w for w in review(as_the_sdk) if w.startswith("EnableNetworkIsolation")]
    assert "model_dir=False" in said  # the SDK's TensorFlow estimator sends an s3:// model_dir unless told not to
    del as_the_sdk["HyperParameters"]["model_dir"]
    assert not [w for w in review(as_the_sdk) if w.startswith("EnableNetworkIsolation")]


def test_debugger_and_profiler_configs_become_files_as_sagemaker_writes_them() -> None:
    hook = {"S3OutputPath": "s3://bucket/debug", "HookParameters": {"save_interval": "10"}}
    profiler = {"S3OutputPath": "s3://bucket/profile", "ProfilingParameters": {"DataloaderProfilingConfig": "{}"}}
    assert config_files({**REQUEST, "DebugHookConfig": hook, "ProfilerConfig": profiler}) == {
        "debughookconfig.json": hook, "profilerconfig.json": profiler}
    assert config_files(REQUEST) == {}


@pytest.mark.parametrize(
    ("environment", "named", "rule"),
    [
        ({f"V{index}": "1" for index in range(101)}, "Environment", "give 0 to 100 entries"),
        ({"V": "x" * 513}, "Environment['V']", "give 0 to 512 characters"),
        ({"V" * 513: "1"}, "Environment name", "give 0 to 512 characters"),
    ],
)
def test_the_environment_keeps_sagemakers_limits(environment: dict[str, str], named: str, rule: str) -> None:
    """botocore's TrainingEnvironmentMap: at most 100 entries; keys and values of at most 512 characters."""
    with pytest.raises(ConfigurationError) as caught:
        TrainingJobRequest.from_params({**REQUEST, "Environment": environment})
    assert named in str(caught.value) and rule in str(caught.value), str(caught.value)
