"""A SageMaker CreateTrainingJob request, checked and reduced to what the twin replays.

The twin takes the request exactly as SageMaker receives it (``sagemaker_client.create_training_job(**params)``):
the dictionary an estimator, ``smddp submit`` or SDK v3's ``ModelTrainer`` sends, a JSON file of it, or the fields a
real job reports through DescribeTrainingJob. :meth:`TrainingJobRequest.from_params` checks the whole request against
SageMaker's API model (what CreateTrainingJob refuses is refused here, with the same field), then what the twin
needs beyond it: a Docker image reference, a checkpoint folder it can mount, environment values the docker CLI can
carry; and it refuses, naming the field and the fix, what it cannot reproduce (Pipe mode, heterogeneous clusters).
No value of a request ever becomes docker syntax: see :mod:`~smddp_compat.local_mode.docker._containers`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smddp_compat.local_mode.s3 import S3Location, parse_s3_uri
from smddp_compat.local_mode.api_model import check_request, describe_only_fields
from smddp_compat.local_mode.docker._fields import review
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.spec import check_local_host_count
from smddp_compat import contract

__all__ = ["Channel", "TrainingJobRequest", "DEFAULT_MAX_RUNTIME", "CHECKPOINT_LOCAL_PATH", "TENSORBOARD_LOCAL_PATH"]

DEFAULT_MAX_RUNTIME = 86400
"""SageMaker's default ``StoppingCondition.MaxRuntimeInSeconds`` (one day)."""

CHECKPOINT_LOCAL_PATH = contract.DEFAULT_CHECKPOINT_DIR
"""SageMaker's default ``CheckpointConfig.LocalPath``."""

TENSORBOARD_LOCAL_PATH = contract.DEFAULT_TENSORBOARD_DIR
"""SageMaker's default ``TensorBoardOutputConfig.LocalPath``."""

_CHANNEL_NAMES_REFUSED = {".", ".."}
_EXAMPLES = {
    "TrainingJobName": "'smddp-mnist-2026-11-23'",
    "ResourceConfig.InstanceType": "'ml.c5.xlarge' or 'ml.p4d.24xlarge'",
    "StoppingCondition.MaxRuntimeInSeconds": "3600",
    "OutputDataConfig.S3OutputPath": "'s3://bucket/jobs/'",
}
# Docker's image reference grammar (distribution/reference): [registry[:port]/]path[:tag][@digest]. A reference that
# does not match is refused before it reaches a docker command line, where a leading '-' would read as an option.
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_IMAGE_REFERENCE = re.compile(
    _DOMAIN + _PATH + r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
# What the twin itself mounts under /opt/ml: a checkpoint folder may not be one of them, inside one, or hold one.
_TWIN_MOUNTS = (contract.INPUT_DIR, contract.MODEL_DIR, contract.OUTPUT_DIR, "code")
# Characters the docker CLI cannot carry in an environment value (its env-file is line-based; NUL ends a C string).
_UNPASSABLE_IN_ENVIRONMENT = ("\n", "\r", "\0")


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
        spot: ``EnableManagedSpotTraining``.
        max_wait: ``StoppingCondition.MaxWaitTimeInSeconds`` (set, and >= ``max_runtime``, for a spot job), or None.
        tensorboard_s3: ``TensorBoardOutputConfig.S3OutputPath``, or None.
        tensorboard_local_path: ``TensorBoardOutputConfig.LocalPath`` (default ``/opt/ml/output/tensorboard``).
        entrypoint: ``AlgorithmSpecification.ContainerEntrypoint`` (None: SageMaker runs ``train``).
        arguments: ``AlgorithmSpecification.ContainerArguments``.
        compression: ``OutputDataConfig.CompressionType``: ``GZIP`` (``model.tar.gz``) or ``NONE`` (files).
        network_isolation: ``EnableNetworkIsolation``: no S3, no credentials and no route out in the containers.
        warnings: What the twin does differently from SageMaker for this request's members, one line each
            (:func:`~smddp_compat.local_mode.docker._fields.review`).
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
    spot: bool = False
    max_wait: int | None = None
    tensorboard_s3: S3Location | None = None
    tensorboard_local_path: str = TENSORBOARD_LOCAL_PATH
    entrypoint: tuple[str, ...] | None = None
    arguments: tuple[str, ...] = ()
    compression: str = "GZIP"
    network_isolation: bool = False
    warnings: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def hosts(self) -> list[str]:
        """``algo-1`` .. ``algo-N``, in SageMaker's order."""
        return [f"algo-{index}" for index in range(1, self.instance_count + 1)]

    @property
    def command(self) -> list[str]:
        """What each container runs: ``train``, unless the request names its own entry point."""
        return [*(self.entrypoint or ("train",)), *self.arguments]

    def renamed(self, job_name: str) -> "TrainingJobRequest":
        """This request under another job name (checked as CreateTrainingJob checks ``TrainingJobName``)."""
        if job_name == self.job_name:
            return self
        return TrainingJobRequest.from_params({**self.params, "TrainingJobName": job_name})

    @property
    def container_start(self) -> tuple[str | None, list[str]]:
        """How each container is started: the program that replaces the image's entry point (the first item of
        ``ContainerEntrypoint``; None keeps the image's) and the arguments given after the image."""
        if self.entrypoint:
            return self.entrypoint[0], [*self.entrypoint[1:], *self.arguments]
        return None, self.command

    def checkpoint_config(self) -> dict[str, str] | None:
        """``/opt/ml/input/config/checkpointconfig.json`` as the container sees it: the request's ``S3Uri`` and
        ``LocalPath`` (its default filled in), or None without ``CheckpointConfig``."""
        if self.checkpoint_s3 is None:
            return None
        given = (self.params.get("CheckpointConfig") or {}).get("S3Uri")  # verbatim, as the request wrote it
        return {"LocalPath": self.checkpoint_local_path, "S3Uri": given or self.checkpoint_s3.uri}

    def hyperparameter(self, name: str) -> Any:
        """A hyperparameter's value decoded from JSON as the toolkit decodes it (the raw string if not JSON)."""
        raw = self.hyperparameters.get(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
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
        except RecursionError:
            raise ConfigurationError(
                "--request", str(path), "is JSON nested deeper than Python reads (its recursion limit)",
                "write the CreateTrainingJob parameters as a JSON object, as SageMaker takes them",
            ) from None
        except ValueError as exc:
            raise ConfigurationError(
                "--request", str(path), f"is not JSON ({exc})",
                "write the CreateTrainingJob parameters as a JSON object",
            ) from exc
        return cls.from_params(params)

    @classmethod
    def from_params(cls, params: Any) -> "TrainingJobRequest":
        """Checks a request's CreateTrainingJob parameters (extra DescribeTrainingJob fields are ignored).

        Raises:
            ConfigurationError: A missing or malformed field, or one the twin cannot reproduce; the message names the
                field, the value and the fix.
        """
        if not isinstance(params, Mapping):
            raise ConfigurationError(
                "request", params, "is not a JSON object", "give the CreateTrainingJob parameters as a dictionary"
            )
        describe_only = describe_only_fields() | {"ResponseMetadata"}
        params = {key: value for key, value in params.items() if key not in describe_only}
        check_request(params, examples=_EXAMPLES)
        warnings = review(params)  # refuses what the twin cannot reproduce (Pipe mode, instance groups, ...)
        job_name = params["TrainingJobName"]
        algorithm = _required(params, "AlgorithmSpecification", Mapping)
        image = algorithm.get("TrainingImage")
        if not isinstance(image, str) or not image:
            raise ConfigurationError(
                "AlgorithmSpecification.TrainingImage", image, "is missing",
                "give the training image (e.g. the tag `smddp image` prints)",
            )
        if not _IMAGE_REFERENCE.fullmatch(image):
            raise ConfigurationError(
                "AlgorithmSpecification.TrainingImage", image, "is not a Docker image reference",
                "give [registry/]repository[:tag][@digest], e.g. the tag `smddp image` prints",
            )
        resources = _required(params, "ResourceConfig", Mapping)
        instance_type = resources.get("InstanceType")
        if not isinstance(instance_type, str):
            raise ConfigurationError(
                "ResourceConfig.InstanceType", instance_type, "is missing",
                "use a type such as 'ml.c5.xlarge' or 'ml.p4d.24xlarge'",
            )
        count = resources.get("InstanceCount", 1)
        if count < 1:
            raise ConfigurationError("ResourceConfig.InstanceCount", count, "must be >= 1", "use e.g. 2")
        check_local_host_count("ResourceConfig.InstanceCount", count)
        hyperparameters = params.get("HyperParameters") or {}
        environment = params.get("Environment") or {}
        for name, value in environment.items():
            if any(character in value for character in _UNPASSABLE_IN_ENVIRONMENT) or not _utf8(value):
                raise ConfigurationError(
                    f"Environment[{name!r}]", value, "holds a line break, a NUL or an unpaired surrogate, which the twin cannot pass to a "
                    "container", "put the value on one line (or pass it as a hyperparameter)",
                )
        output = params["OutputDataConfig"]
        output_path = parse_s3_uri(str(output.get("S3OutputPath", "")), "OutputDataConfig.S3OutputPath")
        checkpoint = params.get("CheckpointConfig") or {}
        checkpoint_s3 = (
            parse_s3_uri(checkpoint["S3Uri"], "CheckpointConfig.S3Uri") if checkpoint.get("S3Uri") else None
        )
        local_path = _checkpoint_local_path(checkpoint.get("LocalPath") or CHECKPOINT_LOCAL_PATH)
        stopping = params.get("StoppingCondition") or {}
        max_runtime = stopping.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME)
        spot = bool(params.get("EnableManagedSpotTraining"))
        max_wait = stopping.get("MaxWaitTimeInSeconds")
        if spot and (max_wait is None or max_wait < max_runtime):
            # The API reference (StoppingCondition): MaxWaitTimeInSeconds "must be equal to or greater than
            # MaxRuntimeInSeconds"; "Managed Spot Training": set EnableManagedSpotTraining "and specify the
            # MaxWaitTimeInSeconds".
            raise ConfigurationError(
                "StoppingCondition.MaxWaitTimeInSeconds", max_wait,
                f"must be given and be at least MaxRuntimeInSeconds ({max_runtime}) when EnableManagedSpotTraining "
                "is true (it bounds the spot job's waits and runs together)",
                f"set it to e.g. {2 * max_runtime} (the SDK's max_wait), or leave EnableManagedSpotTraining out",
            )
        tensorboard = params.get("TensorBoardOutputConfig") or {}
        tensorboard_s3 = (
            parse_s3_uri(tensorboard["S3OutputPath"], "TensorBoardOutputConfig.S3OutputPath")
            if tensorboard.get("S3OutputPath") else None
        )
        tensorboard_local = _tensorboard_local_path(tensorboard.get("LocalPath") or TENSORBOARD_LOCAL_PATH, local_path)
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
            checkpoint_local_path=local_path,
            max_runtime=max_runtime,
            spot=spot,
            max_wait=max_wait,
            tensorboard_s3=tensorboard_s3,
            tensorboard_local_path=tensorboard_local,
            entrypoint=tuple(entrypoint) if entrypoint else None,
            arguments=tuple(arguments),
            compression=output.get("CompressionType") or "GZIP",
            network_isolation=params.get("EnableNetworkIsolation") is True,
            warnings=tuple(warnings),
            params=params,
        )


def _required(params: Mapping[str, Any], name: str, kind: type) -> Any:
    value = params.get(name)
    if not isinstance(value, kind):
        raise ConfigurationError(
            name, value, "is missing or malformed", f"the request needs {name}, as CreateTrainingJob does"
        )
    return value


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _folder_under_opt_ml(field: str, value: str, fix: str) -> str:
    """``value`` relative to /opt/ml, if it is a normalized absolute folder below it (else refused, named ``field``)."""
    relative = value[len(contract.OPT_ML) + 1 :] if value.startswith(f"{contract.OPT_ML}/") else None
    if not relative or posixpath.normpath(value) != value:
        raise ConfigurationError(field, value, f"must be a normalized absolute folder under {contract.OPT_ML}/", fix)
    return relative


def _checkpoint_local_path(value: str) -> str:
    """``CheckpointConfig.LocalPath``, if the twin can mount it: a normalized folder under /opt/ml that is none of
    the folders the twin mounts itself (input, model, output, code), nor inside or above one of them."""
    fix = f"leave it out (default {CHECKPOINT_LOCAL_PATH}) or use a folder such as {contract.OPT_ML}/checkpoints"
    first = _folder_under_opt_ml("CheckpointConfig.LocalPath", value, fix).split("/", 1)[0]
    if first in _TWIN_MOUNTS:
        raise ConfigurationError(
            "CheckpointConfig.LocalPath", value, f"is {contract.OPT_ML}/{first} or inside it, which the container "
            "uses for something else", fix,
        )
    return value


def _tensorboard_local_path(value: str, checkpoint_path: str) -> str:
    """``TensorBoardOutputConfig.LocalPath``, if the twin can reach it: a normalized folder under /opt/ml/output (in
    the output folder the twin mounts) or beside it under /opt/ml (mounted on its own), but not the input, model or
    code folder, /opt/ml/output itself, or the checkpoint folder (or inside or above it)."""
    field = "TensorBoardOutputConfig.LocalPath"
    fix = f"leave it out (default {TENSORBOARD_LOCAL_PATH}) or use a folder such as {TENSORBOARD_LOCAL_PATH}"
    relative = _folder_under_opt_ml(field, value, fix)
    first = relative.split("/", 1)[0]
    if first in _TWIN_MOUNTS and first != contract.OUTPUT_DIR or relative == contract.OUTPUT_DIR:
        raise ConfigurationError(
            field, value, f"is {contract.OPT_ML}/{first} or inside it, which the container uses for something else", fix
        )
    if f"{value}/".startswith(f"{checkpoint_path}/") or checkpoint_path.startswith(f"{value}/"):
        raise ConfigurationError(field, value, f"overlaps the checkpoint folder {checkpoint_path}", fix)
    return value


def _channel(index: int, entry: Any) -> Channel:
    where = f"InputDataConfig[{index}]"
    if not isinstance(entry, Mapping):
        raise ConfigurationError(where, entry, "is not an object", "give ChannelName and DataSource.S3DataSource")
    name = entry.get("ChannelName")
    if name in _CHANNEL_NAMES_REFUSED:
        raise ConfigurationError(
            f"{where}.ChannelName", name, "would name the data folder itself or its parent",
            "use a name with a letter or digit, e.g. 'train'",
        )
    source = (entry.get("DataSource") or {}).get("S3DataSource")
    if not isinstance(source, Mapping):
        raise ConfigurationError(
            f"{where}.DataSource", entry.get("DataSource"), "has no S3DataSource",
            "the twin serves S3 channels only; upload the data to S3",
        )
    distribution = source.get("S3DataDistributionType", "FullyReplicated")
    if distribution not in ("FullyReplicated", "ShardedByS3Key"):
        raise ConfigurationError(
            f"{where}.DataSource.S3DataSource.S3DataDistributionType", distribution, "is unknown",
            "use 'FullyReplicated' or 'ShardedByS3Key'",
        )
    return Channel(
        name=name,
        source=parse_s3_uri(str(source.get("S3Uri", "")), f"{where}.DataSource.S3DataSource.S3Uri"),
        distribution=distribution,
        content_type=entry.get("ContentType"),
    )
