"""A SageMaker CreateTrainingJob request, checked and reduced to what the twin replays.

The twin takes the request exactly as SageMaker receives it (``sagemaker_client.create_training_job(**params)``):
the dictionary an estimator, ``smddp submit`` or SDK v3's ``ModelTrainer`` sends, a JSON file of it, or the fields a
real job reports through DescribeTrainingJob. :meth:`TrainingJobRequest.from_params` checks every field the twin
uses and refuses, naming the field and the fix, what it cannot reproduce (Pipe mode, heterogeneous clusters).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smddp_compat.local_mode._s3 import S3Location, parse_s3_uri
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat import contract

__all__ = ["Channel", "TrainingJobRequest", "DEFAULT_MAX_RUNTIME", "CHECKPOINT_LOCAL_PATH"]

DEFAULT_MAX_RUNTIME = 86400
"""SageMaker's default ``StoppingCondition.MaxRuntimeInSeconds`` (one day)."""

CHECKPOINT_LOCAL_PATH = contract.DEFAULT_CHECKPOINT_DIR
"""SageMaker's default ``CheckpointConfig.LocalPath``."""

_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9\.\-_]+$")
# Read back from DescribeTrainingJob, these fields are about the job's life, not its definition.
_DESCRIBE_ONLY = {
    "TrainingJobArn", "TrainingJobStatus", "SecondaryStatus", "FailureReason", "ModelArtifacts", "CreationTime",
    "TrainingStartTime", "TrainingEndTime", "LastModifiedTime", "SecondaryStatusTransitions", "FinalMetricDataList",
    "TrainingTimeInSeconds", "BillableTimeInSeconds", "ResponseMetadata", "ProfilingStatus", "WarmPoolStatus",
    "DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses", "LabelingJobArn", "AutoMLJobArn",
    "TuningJobArn", "ProfilerRuleConfigurations", "RetryStrategy",
}  # fmt: skip


@dataclass(frozen=True)
class Channel:
    """One input channel (``InputDataConfig`` entry) with an S3 source.

    Attributes:
        name: ``ChannelName``.
        source: The ``S3Uri`` prefix (or manifest) of its data.
        distribution: ``FullyReplicated`` or ``ShardedByS3Key``.
        content_type: ``ContentType``, or None.
    """

    name: str
    source: S3Location
    distribution: str = "FullyReplicated"
    content_type: str | None = None

    def input_data_config(self) -> dict[str, str]:
        """This channel's entry of ``/opt/ml/input/config/inputdataconfig.json``, as SageMaker writes it."""
        entry = {
            "TrainingInputMode": "File",
            "S3DistributionType": self.distribution,
            "RecordWrapperType": "None",
        }
        if self.content_type:
            entry["ContentType"] = self.content_type
        return entry


@dataclass(frozen=True)
class TrainingJobRequest:
    """What the twin needs of a CreateTrainingJob request.

    Attributes:
        job_name: ``TrainingJobName``.
        image: ``AlgorithmSpecification.TrainingImage``.
        instance_type: ``ResourceConfig.InstanceType``.
        instance_count: ``ResourceConfig.InstanceCount``.
        hyperparameters: ``HyperParameters`` as sent (name -> string; the SDK JSON-encodes the values).
        environment: ``Environment``.
        channels: The S3 channels of ``InputDataConfig``.
        output_path: ``OutputDataConfig.S3OutputPath``.
        checkpoint_s3: ``CheckpointConfig.S3Uri``, or None.
        checkpoint_local_path: ``CheckpointConfig.LocalPath`` (default ``/opt/ml/checkpoints``).
        max_runtime: ``StoppingCondition.MaxRuntimeInSeconds``.
        entrypoint: ``AlgorithmSpecification.ContainerEntrypoint`` (None: SageMaker runs ``train``).
        arguments: ``AlgorithmSpecification.ContainerArguments``.
        params: The whole request, as received.
    """

    job_name: str
    image: str
    instance_type: str
    instance_count: int
    hyperparameters: Mapping[str, str]
    environment: Mapping[str, str]
    channels: tuple[Channel, ...]
    output_path: S3Location
    checkpoint_s3: S3Location | None = None
    checkpoint_local_path: str = CHECKPOINT_LOCAL_PATH
    max_runtime: int = DEFAULT_MAX_RUNTIME
    entrypoint: tuple[str, ...] | None = None
    arguments: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def hosts(self) -> list[str]:
        """``algo-1`` .. ``algo-N``, in SageMaker's order."""
        return [f"algo-{index}" for index in range(1, self.instance_count + 1)]

    @property
    def command(self) -> list[str]:
        """What each container runs: ``train``, unless the request names its own entry point."""
        return [*(self.entrypoint or ("train",)), *self.arguments]

    def hyperparameter(self, name: str) -> Any:
        """A hyperparameter's value decoded from JSON as the toolkit decodes it (the raw string if not JSON)."""
        raw = self.hyperparameters.get(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw

    def s3_uris(self) -> dict[str, S3Location]:
        """Every ``s3://`` location a container may read by itself: the source, and a ``model_dir`` hyperparameter."""
        found: dict[str, S3Location] = {}
        for name in (contract.SUBMIT_DIRECTORY, "model_dir"):
            value = self.hyperparameter(name)
            if isinstance(value, str) and value.startswith("s3://"):
                found[name] = parse_s3_uri(value, f"HyperParameters[{name!r}]")
        return found

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainingJobRequest":
        """Reads a request from a JSON file (the CreateTrainingJob parameters, or a DescribeTrainingJob answer).

        Raises:
            ConfigurationError: The file is missing, not JSON, or not a valid request.
        """
        location = Path(path)
        try:
            params = json.loads(location.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(
                "--request", str(path), f"cannot be read ({exc.strerror})", "give the path of a JSON file"
            ) from exc
        except ValueError as exc:
            raise ConfigurationError(
                "--request", str(path), f"is not JSON ({exc})",
                "write the CreateTrainingJob parameters as a JSON object",
            ) from exc
        return cls.from_params(params)

    @classmethod
    def from_params(cls, params: Any) -> "TrainingJobRequest":
        """Checks a request.

        Args:
            params: The CreateTrainingJob parameters (extra DescribeTrainingJob fields are ignored).

        Returns:
            The request.

        Raises:
            ConfigurationError: A missing or malformed field, or one the twin cannot reproduce; the message names the
                field, the value and the fix.
        """
        if not isinstance(params, Mapping):
            raise ConfigurationError(
                "request", params, "is not a JSON object", "give the CreateTrainingJob parameters as a dictionary"
            )
        params = {key: value for key, value in params.items() if key not in _DESCRIBE_ONLY}
        job_name = _required(params, "TrainingJobName", str)
        if not _JOB_NAME.match(job_name):
            raise ConfigurationError(
                "TrainingJobName", job_name, "is not a valid job name (1-63 letters, digits and '-')",
                "use a name such as 'smddp-mnist-2026-11-23'",
            )
        algorithm = _required(params, "AlgorithmSpecification", Mapping)
        image = algorithm.get("TrainingImage")
        if not isinstance(image, str) or not image:
            raise ConfigurationError(
                "AlgorithmSpecification.TrainingImage", image, "is missing",
                "give the training image (e.g. the tag `smddp image` prints)",
            )
        if algorithm.get("TrainingInputMode", "File") not in ("File", "FastFile"):
            raise ConfigurationError(
                "AlgorithmSpecification.TrainingInputMode", algorithm.get("TrainingInputMode"),
                "is not reproduced by the twin", "use 'File' (FastFile is served as File)",
            )
        resources = _required(params, "ResourceConfig", Mapping)
        if resources.get("InstanceGroups"):
            raise ConfigurationError(
                "ResourceConfig.InstanceGroups", resources["InstanceGroups"],
                "heterogeneous clusters are not reproduced by the twin", "use InstanceType and InstanceCount",
            )
        instance_type = resources.get("InstanceType")
        if not isinstance(instance_type, str) or not instance_type.startswith("ml."):
            raise ConfigurationError(
                "ResourceConfig.InstanceType", instance_type, "is not a SageMaker instance type",
                "use a type such as 'ml.c5.xlarge' or 'ml.p4d.24xlarge'",
            )
        count = resources.get("InstanceCount", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ConfigurationError(
                "ResourceConfig.InstanceCount", count, "must be an integer >= 1", "use e.g. 2"
            )
        hyperparameters = params.get("HyperParameters") or {}
        _string_map("HyperParameters", hyperparameters)
        environment = params.get("Environment") or {}
        _string_map("Environment", environment)
        output = _required(params, "OutputDataConfig", Mapping)
        output_path = parse_s3_uri(str(output.get("S3OutputPath", "")), "OutputDataConfig.S3OutputPath")
        checkpoint = params.get("CheckpointConfig") or {}
        checkpoint_s3 = (
            parse_s3_uri(str(checkpoint["S3Uri"]), "CheckpointConfig.S3Uri") if checkpoint.get("S3Uri") else None
        )
        local_path = checkpoint.get("LocalPath") or CHECKPOINT_LOCAL_PATH
        if not str(local_path).startswith(f"{contract.OPT_ML}/"):
            raise ConfigurationError(
                "CheckpointConfig.LocalPath", local_path, f"must be a folder under {contract.OPT_ML}/",
                f"leave it out (default {CHECKPOINT_LOCAL_PATH})",
            )
        stopping = params.get("StoppingCondition") or {}
        max_runtime = stopping.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME)
        if not isinstance(max_runtime, int) or isinstance(max_runtime, bool) or max_runtime < 1:
            raise ConfigurationError(
                "StoppingCondition.MaxRuntimeInSeconds", max_runtime, "must be an integer >= 1", "use e.g. 3600"
            )
        entrypoint = algorithm.get("ContainerEntrypoint")
        arguments = algorithm.get("ContainerArguments") or []
        return cls(
            job_name=job_name,
            image=image,
            instance_type=instance_type,
            instance_count=count,
            hyperparameters=dict(hyperparameters),
            environment=dict(environment),
            channels=tuple(_channel(index, entry) for index, entry in enumerate(params.get("InputDataConfig") or [])),
            output_path=output_path,
            checkpoint_s3=checkpoint_s3,
            checkpoint_local_path=str(local_path),
            max_runtime=max_runtime,
            entrypoint=tuple(entrypoint) if entrypoint else None,
            arguments=tuple(arguments),
            params=params,
        )


def _required(params: Mapping[str, Any], name: str, kind: type) -> Any:
    value = params.get(name)
    if not isinstance(value, kind):
        raise ConfigurationError(
            name, value, "is missing or malformed", f"the request needs {name}, as CreateTrainingJob does"
        )
    return value


def _string_map(name: str, value: object) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigurationError(
            name, value, "must map names to strings", f"encode every {name} value as a string, as the SDK does"
        )


def _channel(index: int, entry: Any) -> Channel:
    where = f"InputDataConfig[{index}]"
    if not isinstance(entry, Mapping):
        raise ConfigurationError(where, entry, "is not an object", "give ChannelName and DataSource.S3DataSource")
    name = entry.get("ChannelName")
    if not isinstance(name, str) or not _CHANNEL_NAME.match(name):
        raise ConfigurationError(
            f"{where}.ChannelName", name, "is not a valid channel name", "use letters, digits, '.', '-' or '_'"
        )
    mode = entry.get("InputMode", "File")
    if mode not in ("File", "FastFile"):
        raise ConfigurationError(
            f"{where}.InputMode", mode, "is not reproduced by the twin", "use 'File' (FastFile is served as File)"
        )
    source = (entry.get("DataSource") or {}).get("S3DataSource")
    if not isinstance(source, Mapping):
        raise ConfigurationError(
            f"{where}.DataSource", entry.get("DataSource"), "has no S3DataSource",
            "the twin serves S3 channels only; upload the data to S3",
        )
    if source.get("S3DataType", "S3Prefix") != "S3Prefix":
        raise ConfigurationError(
            f"{where}.DataSource.S3DataSource.S3DataType", source.get("S3DataType"),
            "is not reproduced by the twin", "use 'S3Prefix'",
        )
    distribution = source.get("S3DataDistributionType", "FullyReplicated")
    if distribution not in ("FullyReplicated", "ShardedByS3Key"):
        raise ConfigurationError(
            f"{where}.DataSource.S3DataSource.S3DataDistributionType", distribution, "is unknown",
            "use 'FullyReplicated' or 'ShardedByS3Key'",
        )
    if entry.get("CompressionType", "None") != "None":
        raise ConfigurationError(
            f"{where}.CompressionType", entry.get("CompressionType"), "is only used by Pipe mode",
            "leave it out (File mode)",
        )
    return Channel(
        name=name,
        source=parse_s3_uri(str(source.get("S3Uri", "")), f"{where}.DataSource.S3DataSource.S3Uri"),
        distribution=distribution,
        content_type=entry.get("ContentType"),
    )
