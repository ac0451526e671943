"""A ``ModelTrainer``'s job run on this machine by local mode's process backend (no Docker, no AWS).

:func:`train_local` reads the job from the trainer (its source code, compute, distributed config, hyperparameters,
environment, stopping condition, checkpoint folder, metric definitions) and the channels given to it, runs it as
the process backend runs an SDK v2 ``local_process`` job, with SDK v3's rule for the script's arguments, then gives
the trainer the view of the finished job SageMaker gives: ``trainer._latest_training_job`` is a
``sagemaker.core.resources.TrainingJob`` built from local mode's DescribeTrainingJob answer.

SDK v3's ``ModelTrainer`` has no MLflow field: :func:`train_local` takes ``mlflow=`` (or reads
``MLFLOW_TRACKING_URI``), and the job's view then answers ``mlflow_config`` and ``mlflow_details`` as a SageMaker
job tracked by SageMaker's managed MLflow does (what SDK v3's ``sagemaker.train.get_available_metrics`` reads).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import IO, Any

from sagemaker.train.utils import _get_unique_name, safe_serialize  # SDK v3's job-name and hyperparameter rules

from smddp_compat.estimators import (
    DEFAULT_LOCAL_OUTPUT, ConfigurationError, DistributionPlan, MlflowSetting, build_job_spec, described_as_sent,
    instance_spec, mlflow_settings, plan_distribution, run_job,
)
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.spec import JobSpec
from smddp_compat.local_mode.name_values import decode_value

__all__ = ["train_local", "build_local_spec", "local_job_description", "plan_of"]


def _channels(input_data_config: Sequence[Any] | None) -> dict[str, str]:
    """``InputData``/``Channel`` items as channel name -> local path or ``s3://`` URI."""
    channels: dict[str, str] = {}
    for item in input_data_config or ():
        name = getattr(item, "channel_name", None)
        source = getattr(item, "data_source", None)
        uri = getattr(source, "s3_uri", source)  # an S3DataSource names its URI
        if not isinstance(name, str) or not isinstance(uri, (str, os.PathLike)):
            raise ConfigurationError(
                "input_data_config", item, "local runs take InputData(channel_name=..., data_source=<local path, "
                "file:// or s3:// URI, or S3DataSource>)", "e.g. InputData(channel_name='train', data_source='./data')",
            )
        channels[name] = os.fspath(uri)
    return channels


def plan_of(trainer: Any) -> DistributionPlan:
    """The trainer's distribution, checked against its compute by the kit's rules."""
    compute = trainer.compute
    distributed = trainer.distributed
    if distributed is None:
        return plan_distribution(None, spec=instance_spec(compute.instance_type),
                                 instance_count=compute.instance_count or 1)
    check = getattr(distributed, "check", None)
    if check is None:
        raise ConfigurationError(
            "distributed", type(distributed).__name__, "is not one of the kit's configs, which local runs need",
            "use SMDDPCompat, Horovod, MultiWorkerMirrored, DTensor or ParameterServer from "
            "smddp_compat.estimators.sdk3, or distributed=None",
        )
    return check(compute.instance_type, compute.instance_count or 1, trainer.training_image)


def _output_path(trainer: Any, output_path: str | None) -> str:
    """Where the job's ``<job_name>/`` folder goes: ``output_path``, else the trainer's output path when it is not in
    S3 (a default S3 path is the user's real bucket: never written to unless asked), else the local default."""
    if output_path is not None:
        return output_path
    configured = getattr(trainer.output_data_config, "s3_output_path", None)
    if isinstance(configured, str) and configured and not configured.startswith("s3://"):
        return configured
    return DEFAULT_LOCAL_OUTPUT


def build_local_spec(trainer: Any, input_data_config: Sequence[Any] | None = None, *, output_path: str | None = None,
                     job_name: str | None = None, mlflow: MlflowSetting = None) -> JobSpec:
    """The local mode job of a ``ModelTrainer`` (see :func:`train_local` for the arguments).

    Raises:
        ConfigurationError: A trainer local runs cannot express (no ``source_code.entry_script``, a ``command``, a
            distributed config that is not the kit's), or a value the kit's checks refuse.
    """
    source = trainer.source_code
    if source is None or not source.entry_script:
        raise ConfigurationError("source_code", source, "local runs need SourceCode(entry_script=...)",
                                 "e.g. SourceCode(source_dir='src', entry_script='train.py')")
    if getattr(source, "command", None):
        raise ConfigurationError("source_code.command", source.command, "is not run by local runs",
                                 "give entry_script (and source_dir) instead")
    stopping = trainer.stopping_condition
    checkpoint = trainer.checkpoint_config
    metrics = [{"Name": definition.name, "Regex": definition.regex}
               for definition in trainer._metric_definitions or ()]  # no public reader in SDK v3
    hyperparameters = {name: decode_value(safe_serialize(value))
                       for name, value in (trainer.hyperparameters or {}).items()}
    return build_job_spec(
        entry_point=source.entry_script, source_dir=source.source_dir,
        instance_count=trainer.compute.instance_count or 1, plan=plan_of(trainer), hyperparameters=hyperparameters,
        inputs=_channels(input_data_config), output_path=_output_path(trainer, output_path),
        max_run=getattr(stopping, "max_runtime_in_seconds", None),
        job_name=job_name or _get_unique_name(trainer.base_job_name or "model-trainer"),
        environment=trainer.environment, checkpoint_local_path=getattr(checkpoint, "local_path", None),
        checkpoint_s3_uri=getattr(checkpoint, "s3_uri", None),
        metric_definitions=metrics, argument_rule="sdk-v3-driver", mlflow=mlflow_settings(mlflow),
    )


def local_job_description(result: JobResult, trainer: Any) -> dict[str, Any]:
    """DescribeTrainingJob for a finished local job of ``trainer``: local mode's one builder, with what the trainer
    sends besides the job (role, image, hyperparameters as SDK v3 serialises them) and ``local_process`` as the
    instance type."""
    hyperparameters = {name: safe_serialize(value) for name, value in (trainer.hyperparameters or {}).items()}
    return described_as_sent(result, role=trainer.role, image_uri=trainer.training_image,
                             hyperparameters=hyperparameters)


def train_local(
    trainer: Any,
    input_data_config: Sequence[Any] | None = None,
    *,
    output_path: str | None = None,
    job_name: str | None = None,
    logs: bool = True,
    stream: IO[str] | None = None,
    mlflow: MlflowSetting = None,
) -> Any:
    """Runs ``trainer``'s job on this machine, one local host per instance (algo-1..algo-N), with the process backend.

    The script gets what SDK v3's drivers give it on SageMaker: its hyperparameters as ``--name value`` arguments
    (strings as they are, other values as JSON, in order), the ``SM_*`` variables of its host, its channels, and the
    ranks of the kit's config (``distributed=``). Compute's instance type sizes the ranks as on SageMaker; the ranks
    run on this machine's CPUs.

    Args:
        trainer: A ``sagemaker.train.ModelTrainer`` with ``source_code.entry_script`` (either training mode; a
            ``Mode.LOCAL_CONTAINER`` trainer needs no AWS session or role).
        input_data_config: ``InputData`` items, as ``trainer.train()`` takes them (local folders, ``file://`` or
            ``s3://`` URIs).
        output_path: Folder (or ``s3://`` URI) that receives ``<job_name>/`` with ``output/model.tar.gz``,
            ``output/output.tar.gz`` and the logs. Default: the trainer's output path when it is local, else
            ``./smddp_local_output`` (an S3 output path is used only when given here).
        job_name: The job's name (default: SDK v3's, the base job name and a time stamp).
        logs: Print the processes' prefixed output as they run (the logs are kept with the job either way).
        stream: Where that output goes (default: standard output).
        mlflow: Where the job is tracked as an MLflow run, as SageMaker's managed MLflow tracks a training job:
            ``MlflowSettings`` (:mod:`smddp_compat.local_mode.tracking`), a tracking URI, or False (untracked); None
            (the default): tracked when ``MLFLOW_TRACKING_URI`` is set (in the experiment ``MLFLOW_EXPERIMENT_NAME``
            when set, else the job's base name).

    Returns:
        The finished job as a ``sagemaker.core.resources.TrainingJob`` (also ``trainer._latest_training_job``):
        status, secondary status and transitions, ``model_artifacts``, ``final_metric_data_list``, times; for a
        tracked job ``mlflow_config`` (``mlflow_resource_arn``: the tracking URI) and ``mlflow_details`` (its run).

    Raises:
        ConfigurationError: A setting local runs cannot run (named, with the fix).
        TrackingError: The MLflow server cannot be reached (nothing started), unless the settings allow an untracked
            job.
        sagemaker.core.utils.exceptions.FailedStatusError: The job failed or was stopped, as ``train()`` raises it
            for a SageMaker job; the job's description is on the trainer all the same.
    """
    from sagemaker.core.resources import TrainingJob  # SDK v3's job view
    from sagemaker.core.utils.code_injection.codec import transform
    from sagemaker.core.utils.exceptions import FailedStatusError

    spec = build_local_spec(trainer, input_data_config, output_path=output_path, job_name=job_name, mlflow=mlflow)
    with contextlib.ExitStack() as stack:
        result = run_job(spec, stream=stream if logs else stack.enter_context(open(os.devnull, "w")))
    description = local_job_description(result, trainer)
    job = TrainingJob(**transform(description, "DescribeTrainingJobResponse"))
    trainer._latest_training_job = job
    if not result.ok:
        raise FailedStatusError(resource_type="TrainingJob", status=result.status,
                                reason=description.get("FailureReason", result.secondary_status))
    return job

