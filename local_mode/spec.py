"""The description of one local training job, validated when it is built.

:class:`JobSpec` holds everything :func:`smddp_compat.local_mode.run` needs. Building one checks every value (paths exist,
counts are positive, hyperparameters are JSON-serialisable, the DTensor mesh fits the clients...) and raises a
:class:`~local_mode.errors.ConfigurationError` naming the field, the value and the fix, so nothing starts with a bad
configuration. The distribution settings are checked by :mod:`smddp_compat.distribution_config`, as the estimators
and both CLIs check them, against this machine's CPU cores.
"""

from __future__ import annotations

import enum
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from smddp_compat import contract
from smddp_compat import errors as shared_errors
from smddp_compat.distribution_config import DistributionConfig, HostCapacity
from smddp_compat.strategies import NAMES
from smddp_compat.launcher import MAX_SECONDS, usable_cores

from smddp_compat.local_mode.s3 import is_s3_uri, parse_s3_uri
from smddp_compat.local_mode.environment import is_reserved
from smddp_compat.local_mode.errors import ConfigurationError, HyperparameterError
from smddp_compat.local_mode.metrics import check_metric_definitions
from smddp_compat.local_mode.tracking import MlflowSettings

__all__ = [
    "Distribution",
    "JobSpec",
    "DEFAULT_MAX_RUN",
    "DEFAULT_OUTPUT_PATH",
    "check_hyperparameter_name",
]

DEFAULT_MAX_RUN = 24 * 60 * 60
"""SageMaker's default ``max_run`` (seconds)."""

DEFAULT_OUTPUT_PATH = "smddp_local_output"
"""Where artifacts go when no output path is given (relative to the working directory)."""

# SageMaker's limits (CreateTrainingJob): job names, channel names, hyperparameter values.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_ENTRY_POINT_SUFFIXES = (".py", ".sh")


Distribution = enum.Enum(  # type: ignore[misc]
    "Distribution", {name.upper(): name for name in NAMES}, type=str, module=__name__,
    qualname="Distribution",
)
Distribution.__doc__ = """How the processes of a job find each other: one member per strategy of
:mod:`smddp_compat.strategies` (``NONE``, ``SMDDP``, ``MPI``, ``MWMS``, ``DTENSOR``, ``PARAMETER_SERVER``), whose
class owns what it means."""


#: The most hosts a local job may have. SageMaker's API sets no maximum (an account's quota does, usually in the
#: tens); here every host is processes or a container on this one machine, and each host's ``resourceconfig.json``
#: lists every host (hosts squared on disk: 100,000 hosts wrote 3.9 MB per host).
MAX_LOCAL_HOSTS = 64


def check_local_host_count(name: str, value: int) -> int:
    """Refuses more hosts than :data:`MAX_LOCAL_HOSTS` for a job run on this machine."""
    if value > MAX_LOCAL_HOSTS:
        raise ConfigurationError(
            name, value, f"is more hosts than a job run on this machine may have ({MAX_LOCAL_HOSTS})",
            f"give at most {MAX_LOCAL_HOSTS} (SageMaker itself runs larger jobs: submit the job there)")
    return value


def _require_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(name, value, "must be a whole number", f"give {name} as an integer >= 1")
    if value < 1:
        raise ConfigurationError(name, value, "must be at least 1", f"give {name} >= 1")
    return value


def _writable_destination(name: str, path: Path) -> None:
    """Checks that ``path`` is (or can be created as) a writable directory, leaving nothing behind.

    Permission bits do not tell (root passes ``os.access`` anywhere, and ``/proc`` or a read-only mount refuse even
    root), so a folder is really created in the nearest existing ancestor and removed at once.
    """
    if path.exists() and not path.is_dir():
        raise ConfigurationError(name, str(path), "exists and is not a directory", "give a directory path")
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    problem = f"cannot be written ({ancestor} is not a writable directory)"
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigurationError(name, str(path), problem, "choose a writable directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".smddp-write-check-", dir=ancestor))
    except OSError as exc:
        raise ConfigurationError(
            name, str(path), f"{problem}: {exc.strerror or exc}", "choose a writable directory"
        ) from None


def check_hyperparameter_name(name: object) -> str:
    """Checks that ``name`` can be a hyperparameter (it becomes the script's ``--NAME`` argument and ``SM_HP_NAME``)
    and returns it.

    Raises:
        HyperparameterError: ``name`` is not a string of letters, digits, ``_``, ``-`` and ``.`` (at most 256), or
            starts with ``sagemaker_`` (the framework's own hyperparameters).
    """
    problem = contract.hyperparameter_name_problem(name)
    if problem is not None:
        raise HyperparameterError("hyperparameters", name, *problem)
    return name  # type: ignore[return-value]


def _validate_hyperparameters(values: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(values, Mapping):
        raise HyperparameterError("hyperparameters", values, "must be a mapping", "pass a dict of name -> value")
    checked: dict[str, Any] = {}
    for name, value in values.items():
        check_hyperparameter_name(name)
        try:
            contract.encode_hyperparameter(name, value)  # what SageMaker refuses (not JSON, too long)
        except shared_errors.ConfigurationError as exc:
            raise HyperparameterError(str(exc.field), exc.value, str(exc.problem), str(exc.fix)) from None
        checked[name] = value
    return checked


def _validate_environment(values: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise ConfigurationError("environment", values, "must be a mapping", "pass a dict of NAME -> value strings")
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ConfigurationError(
                "environment", name, "is not a valid environment variable name", "use letters, digits and '_'"
            )
        if is_reserved(name):
            raise ConfigurationError(
                f"environment[{name!r}]",
                value,
                "is set by local_mode itself for every process",
                "leave it out (use hyperparameters, channels or the distribution settings instead)",
            )
        if not isinstance(value, str) or "\0" in value:
            raise ConfigurationError(f"environment[{name!r}]", value, "must be a string", f"pass str({value!r})")
        checked[name] = value
    return checked


def _validate_channels(values: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise ConfigurationError("channels", values, "must be a mapping", "pass a dict of NAME -> PATH or s3:// URI")
    checked: dict[str, str] = {}
    for name, source in values.items():
        problem = contract.channel_name_problem(name)
        if problem is not None:
            raise ConfigurationError(
                "channels", name, problem, "use 1-64 letters, digits, '.', '-', '_', other than '.' and '..' "
                "(e.g. train, test)"
            )
        if not isinstance(source, (str, os.PathLike)) or not str(source):
            raise ConfigurationError(
                f"channels[{name!r}]", source, "must be a local path or an s3:// URI", "e.g. ./data/train or s3://b/p"
            )
        source = os.fspath(source)
        if is_s3_uri(source):
            parse_s3_uri(source, f"channels[{name!r}]")
            checked[name] = source
            continue
        path = Path(source).expanduser().resolve()
        if not path.exists():
            raise ConfigurationError(
                f"channels[{name!r}]", source, "does not exist", "give an existing folder (or file), or an s3:// URI"
            )
        checked[name] = str(path)
    return checked


def default_job_name(entry_point: str, now: float | None = None) -> str:
    """A SageMaker-style unique job name: the entry point's stem and a millisecond timestamp.

    Args:
        entry_point: The entry point's file name.
        now: The time to stamp (``time.time()`` when None).

    Returns:
        e.g. ``train-2026-11-21-22-40-01-123``.
    """
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    base = re.sub(r"[^a-zA-Z0-9]+", "-", Path(entry_point).stem).strip("-") or "job"
    return f"{base[: 62 - len(stamp)]}-{stamp}"


@dataclass(frozen=True)
class JobSpec:
    """One local training job: what to run, on how many hosts and processes, with what input and output.

    Every field is checked when the spec is built; paths are made absolute. A spec is immutable.

    Attributes:
        entry_point: The training script (``.py`` or ``.sh``). Relative to ``source_dir`` when that is given
            (as the SageMaker SDK treats it), else to the working directory.
        source_dir: Folder copied into each host's code directory (the script's working directory and first import
            path). When None, only the entry point file is copied, as the SDK does.
        instance_count: H, the number of hosts (algo-1..algo-H on 127.0.0.2, 127.0.0.3, ...).
        processes_per_host: P, processes on each host (must be 1 for distribution ``none``).
        distribution: A strategy of :mod:`smddp_compat.strategies`: ``none``, ``smddp``, ``mpi``, ``mwms``,
            ``dtensor`` or ``parameter_server``; or a whole checked distribution (a
            :class:`~smddp_compat.distribution_config.DistributionConfig`, as the estimator resolved it), which then
            sets the processes per host, the mesh and the devices per process.
        hyperparameters: Passed to the script as ``--name value`` arguments and ``SM_HP_*`` variables; values must be
            JSON-serialisable. A value naming a path under ``/opt/ml`` (e.g. ``model_dir="/opt/ml/model"``) names
            the same path in each host's tree, as in a SageMaker container.
        channels: Channel name -> local folder/file or ``s3://bucket/prefix``; each appears in every host's
            ``input/data/<name>`` and as ``SM_CHANNEL_<NAME>``.
        output_path: Local folder or ``s3://bucket/prefix``; artifacts go to ``<output_path>/<job_name>/output/``
            (``model.tar.gz``, ``output.tar.gz``) and logs to ``<output_path>/<job_name>/logs/``.
        max_run: Seconds the processes may run before the job is stopped (SageMaker's ``max_run``).
        job_name: Unique job name; generated from the entry point and the time when None.
        environment: Extra environment variables for every process.
        checkpoint_path: Local folder shared as every host's ``checkpoints`` directory (kept between runs, so a rerun
            resumes). When None, the job's checkpoints are kept with its output, in
            ``<output_path>/<job_name>/checkpoints/`` (uploaded there at the end for an ``s3://`` output); the
            summary says where, and a second run resumes from them when given that folder. Never a folder under
            ``/opt/ml``, which names each host's own tree.
        checkpoint_s3_uri: SageMaker's ``CheckpointConfig.S3Uri``: each host's own ``checkpoints`` folder starts
            with the objects under that prefix (a later job given the same URI resumes; another URI starts empty),
            and at the end (a stop and a failure too) what each host's folder holds is stored there, what a host
            deleted deleted there, as SageMaker syncs them. Read and written with this machine's AWS settings (or
            ``AWS_ENDPOINT_URL``). Not with ``checkpoint_path``.
        dtensor_mesh: For ``dtensor``: the global mesh, e.g. ``{"batch": 4}`` (or ``[("batch", 4)]``, or
            ``"batch=4"``); its size must split evenly over the H x P clients. Exported as ``SMDDP_DTENSOR_MESH``.
            Stored as a read-only mapping.
        devices_per_process: For ``dtensor``: devices (virtual CPUs or GPUs) each client should use; exported as
            ``SMDDP_DTENSOR_DEVICES_PER_CLIENT``. Derived from the mesh when None.
        work_dir: Folder for the per-host ``/opt/ml`` trees, kept after the job; a temporary folder that is removed
            at the end when None.
        metric_definitions: Metrics read from the job's logs, as the SDK's ``metric_definitions``: a list of
            ``{"Name": ..., "Regex": ...}`` (each regex's first group captures the value); the result's
            ``final_metrics`` holds each one's last value. Stored as a tuple of read-only mappings.
        python: Interpreter for ``.py`` entry points (the current one by default).
        argument_rule: How the hyperparameters become the script's arguments, named after the upstream whose rule
            it is (:data:`smddp_compat.contract.ARGUMENT_RULES`): ``sagemaker-training`` (SDK v2 jobs, SageMaker's
            TensorFlow containers) or ``sdk-v3-driver`` (a ``ModelTrainer``'s job).
        mlflow: Where the job is tracked as an MLflow run (:class:`~local_mode.tracking.MlflowSettings`,
            SageMaker's ``MlflowConfig``), or None.
        distribution_config: The checked distribution (:class:`~smddp_compat.distribution_config.DistributionConfig`,
            every default filled in); set when the spec is built.
    """

    entry_point: str
    source_dir: str | None = None
    instance_count: int = 1
    processes_per_host: int = 1
    distribution: Distribution | str | DistributionConfig = "none"
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    channels: Mapping[str, str] = field(default_factory=dict)
    output_path: str = DEFAULT_OUTPUT_PATH
    max_run: float = DEFAULT_MAX_RUN
    job_name: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    checkpoint_path: str | None = None
    dtensor_mesh: Mapping[str, int] | None = None
    devices_per_process: int | None = None
    work_dir: str | None = None
    metric_definitions: Sequence[Mapping[str, str]] = ()
    python: str = sys.executable
    argument_rule: str = "sagemaker-training"
    checkpoint_s3_uri: str | None = None
    mlflow: MlflowSettings | None = None
    distribution_config: DistributionConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # the dataclass is frozen: normalised values are stored once, here
        hosts = check_local_host_count("instance_count", _require_count("instance_count", self.instance_count))
        config = self._checked_distribution(hosts)
        set_(self, "distribution_config", config)
        set_(self, "distribution", Distribution(config.kind))
        set_(self, "processes_per_host", config.processes_per_host)
        if config.mesh is not None:
            set_(self, "dtensor_mesh", MappingProxyType(dict(config.mesh)))

        source_dir, entry_point = self._resolve_code()
        set_(self, "source_dir", source_dir)
        set_(self, "entry_point", entry_point)

        set_(self, "hyperparameters", MappingProxyType(_validate_hyperparameters(self.hyperparameters)))
        set_(self, "channels", MappingProxyType(_validate_channels(self.channels)))
        set_(self, "environment", MappingProxyType(_validate_environment(self.environment)))

        if not isinstance(self.output_path, (str, os.PathLike)) or not os.fspath(self.output_path):
            raise ConfigurationError("output_path", self.output_path, "must be a folder or an s3:// URI", "e.g. ./out")
        output_path = os.fspath(self.output_path)
        if is_s3_uri(output_path):
            parse_s3_uri(output_path, "output_path")
        else:
            resolved = Path(output_path).expanduser().resolve()
            _writable_destination("output_path", resolved)
            output_path = str(resolved)
        set_(self, "output_path", output_path)

        if isinstance(self.max_run, bool) or not isinstance(self.max_run, (int, float)) or not self.max_run > 0:
            raise ConfigurationError("max_run", self.max_run, "must be a number of seconds > 0", "e.g. max_run=3600")
        if math.isinf(self.max_run) or math.isnan(self.max_run):
            raise ConfigurationError("max_run", self.max_run, "must be finite", "e.g. max_run=86400 (one day)")
        if self.max_run > MAX_SECONDS:
            raise ConfigurationError("max_run", self.max_run, f"is more than one year ({MAX_SECONDS} s), the longest "
                                     "time any launcher option takes", "e.g. max_run=86400 (one day)")

        job_name = self.job_name if self.job_name is not None else default_job_name(entry_point)
        problem = contract.job_name_problem(job_name)
        if problem is not None:
            raise ConfigurationError("job_name", job_name, *problem)
        set_(self, "job_name", job_name)

        for name in ("checkpoint_path", "work_dir"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, (str, os.PathLike)) or is_s3_uri(os.fspath(value)):
                raise ConfigurationError(name, value, "must be a local folder", "give a local directory path")
            resolved = Path(value).expanduser().resolve()
            if resolved == Path(contract.OPT_ML) or Path(contract.OPT_ML) in resolved.parents:
                raise ConfigurationError(
                    name, value, f"is in SageMaker's container tree ({contract.OPT_ML}), which every local host has "
                    "its own of: a folder of this machine there would be shared by every host and every later job",
                    "leave it out (each host's checkpoints folder, kept in <output>/<job>/checkpoints), or give a "
                    "folder of this machine elsewhere, e.g. ./checkpoints")
            _writable_destination(name, resolved)
            set_(self, name, str(resolved))

        if self.mlflow is not None and not isinstance(self.mlflow, MlflowSettings):
            raise ConfigurationError("mlflow", self.mlflow, "must be MlflowSettings",
                                     "e.g. mlflow=MlflowSettings('http://127.0.0.1:5000')")
        if self.checkpoint_s3_uri is not None:
            if not isinstance(self.checkpoint_s3_uri, str) or not is_s3_uri(self.checkpoint_s3_uri):
                raise ConfigurationError("checkpoint_s3_uri", self.checkpoint_s3_uri, "must be an s3:// URI",
                                         "e.g. checkpoint_s3_uri='s3://my-bucket/checkpoints/run-1'")
            parse_s3_uri(self.checkpoint_s3_uri, "checkpoint_s3_uri")
            if self.checkpoint_path is not None:
                raise ConfigurationError(
                    "checkpoint_path", self.checkpoint_path, "was given with checkpoint_s3_uri: the checkpoints are "
                    "kept in the S3 prefix, each host starting from it", "give one of the two")
        set_(self, "metric_definitions", tuple(
            MappingProxyType(definition.as_request()) for definition in check_metric_definitions(self.metric_definitions)
        ))

        if self.argument_rule not in contract.ARGUMENT_RULES:
            raise ConfigurationError("argument_rule", self.argument_rule, "is not a rule the kit knows",
                                     f"use one of {sorted(contract.ARGUMENT_RULES)}")
        if not isinstance(self.python, str) or not os.access(self.python, os.X_OK):
            raise ConfigurationError("python", self.python, "is not an executable interpreter", "give sys.executable")

    def request_params(self, instance_type: str) -> dict[str, Any]:
        """The job as the members of the CreateTrainingJob request that would run it (those DescribeTrainingJob
        echoes): hyperparameters as ``hyperparameters.json`` holds them, the metric definitions, each channel (a local
        one as the SDK's local mode's ``FileDataSource``), the output path, the hosts and the time limit.

        Args:
            instance_type: The ``ResourceConfig.InstanceType`` to name (``local``, or the estimator's
                ``local_process``).
        """
        channels = []
        for name, source in self.channels.items():
            data_source = (
                {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": source,
                                  "S3DataDistributionType": "FullyReplicated"}}
                if is_s3_uri(source) else
                {"FileDataSource": {"FileUri": "file://" + source, "FileDataDistributionType": "FullyReplicated"}}
            )
            channels.append({"ChannelName": name, "DataSource": data_source, "InputMode": "File"})
        return {
            "HyperParameters": contract.encode_hyperparameters(self.hyperparameters),
            "AlgorithmSpecification": {
                "TrainingInputMode": "File",
                "MetricDefinitions": [dict(definition) for definition in self.metric_definitions],
                "EnableSageMakerMetricsTimeSeries": False,
            },
            "InputDataConfig": channels,
            "OutputDataConfig": {"KmsKeyId": "", "S3OutputPath": self.output_path, "CompressionType": "GZIP"},
            "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": self.instance_count,
                               "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": math.ceil(self.max_run)},
            "Environment": dict(self.environment),
            **({"CheckpointConfig": {"S3Uri": self.checkpoint_s3_uri, "LocalPath": contract.DEFAULT_CHECKPOINT_DIR}}
               if self.checkpoint_s3_uri else {}),
            **({"MlflowConfig": self.mlflow.request_config()} if self.mlflow else {}),
        }

    def _resolve_code(self) -> tuple[str | None, str]:
        """Returns (absolute source_dir or None, entry point: relative to source_dir, or absolute)."""
        entry = self.entry_point
        if not isinstance(entry, (str, os.PathLike)) or not os.fspath(entry):
            raise ConfigurationError("entry_point", entry, "must be a path to a script", "e.g. train.py")
        entry = os.fspath(entry)
        if not entry.endswith(_ENTRY_POINT_SUFFIXES):
            raise ConfigurationError(
                "entry_point", entry, "must be a Python (.py) or shell (.sh) script", "give the training script's path"
            )
        if self.source_dir is None:
            path = Path(entry).expanduser().resolve()
            if not path.is_file():
                raise ConfigurationError(
                    "entry_point", entry, "does not exist", "check the path to the training script"
                )
            return None, str(path)
        if not isinstance(self.source_dir, (str, os.PathLike)):
            raise ConfigurationError("source_dir", self.source_dir, "must be a folder path", "e.g. ./src")
        source = Path(self.source_dir).expanduser().resolve()
        if not source.is_dir():
            raise ConfigurationError(
                "source_dir",
                os.fspath(self.source_dir),
                "is not an existing folder",
                "give the folder holding the script",
            )
        candidate = Path(entry).expanduser()
        path = (candidate if candidate.is_absolute() else source / candidate).resolve()
        if not path.is_file():
            raise ConfigurationError(
                "entry_point",
                entry,
                f"does not exist in source_dir {source}",
                "give the script's path inside source_dir",
            )
        try:
            relative = path.relative_to(source)
        except ValueError:
            raise ConfigurationError(
                "entry_point", entry, f"is outside source_dir {source}", "move the script into source_dir"
            ) from None
        return str(source), relative.as_posix()

    def _checked_distribution(self, hosts: int) -> DistributionConfig:
        """The distribution settings, checked as every entry checks them, against this machine's cores."""
        given = self.distribution if isinstance(self.distribution, DistributionConfig) else (
            DistributionConfig.from_flat(
                self.distribution.value if isinstance(self.distribution, Distribution) else self.distribution,
                processes_per_host=self.processes_per_host,
                mesh=self.dtensor_mesh,
                devices_per_process=self.devices_per_process,
            )
        )
        return given.resolve(HostCapacity.this_machine(usable_cores(), hosts), hosts)

    # Derived values -------------------------------------------------------------------------------------------

    @property
    def entry_point_path(self) -> str:
        """Absolute path of the entry point as given (before it is copied into the hosts' code directories)."""
        if self.source_dir is None:
            return self.entry_point
        return str(Path(self.source_dir) / self.entry_point)

    @property
    def entry_point_name(self) -> str:
        """The entry point as SageMaker names it (``sagemaker_program``): relative to the code directory."""
        return self.entry_point if self.source_dir is not None else Path(self.entry_point).name

    @property
    def hosts(self) -> list[str]:
        """The host names, ``algo-1`` .. ``algo-H``."""
        return [f"algo-{index}" for index in range(1, self.instance_count + 1)]

    @property
    def devices_per_client(self) -> int | None:
        """Devices each DTensor client should use (given, or mesh size / clients), None when unknown."""
        return self.distribution_config.devices_per_process
