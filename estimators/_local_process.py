"""``instance_type="local_process"``: an estimator's job run on this machine by local_mode (no Docker, no AWS).

The estimator's fields map onto :class:`smddp_compat.local_mode.JobSpec`: ``instance_count`` -> hosts algo-1..algo-H,
the distribution plan's kind and processes per host, hyperparameters, ``fit(inputs)`` channels (local folders,
``file://`` or ``s3://`` URIs), ``output_path`` (a folder, ``file://`` or ``s3://``), ``max_run``, ``environment``,
``checkpoint_local_path`` (SageMaker's default ``/opt/ml/checkpoints`` is each host's own folder, kept in
``<output>/<job>/checkpoints``; another folder is one of this machine, shared by the hosts), ``checkpoint_s3_uri``
(each host's folder starts from that S3 prefix and is stored there at the end), ``metric_definitions``;
the script gets the hyperparameters SageMaker would give it,
``model_dir`` included (:func:`script_hyperparameters`). A DTensor mesh and devices per client go to local_mode's
own DTensor settings.
``custom_mpi_options`` have no meaning there (ranks start over Gloo, or one host's ranks as the kit's own mpirun
group, which takes none of the job's mpirun options) and are ignored with a warning.
"""

from __future__ import annotations

import copy
import logging
import os
import posixpath
import sys
import warnings
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Mapping

from smddp_compat import contract
from smddp_compat.estimators._distribution import DistributionPlan
from smddp_compat.estimators.errors import ConfigurationError, LocalVersionWarning
from smddp_compat.local_mode.backends import ProcessBackend
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.spec import JobSpec
from smddp_compat.local_mode.tracking import MlflowSettings

__all__ = [
    "local_channels", "script_hyperparameters", "warn_of_other_versions", "build_job_spec", "run_job",
    "LOCAL_INSTANCE_TYPE", "described_as_sent", "channel_uri", "mlflow_settings", "MlflowSetting",
]

#: Where an SDK door's local job is tracked in MLflow: settings, a tracking URI, False (never tracked), or None (as
#: MLflow's own variables say: ``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME``; untracked when unset).
MlflowSetting = MlflowSettings | str | bool | None

logger = logging.getLogger(__name__)

#: The instance type that runs an estimator's (or a ModelTrainer's) job on this machine with the process backend.
LOCAL_INSTANCE_TYPE = "local_process"
#: Default output folder of local_process jobs when the estimator has no output_path.
DEFAULT_LOCAL_OUTPUT = "smddp_local_output"


def _installed_tensorflow() -> str | None:
    """This interpreter's TensorFlow version (read from its metadata: TensorFlow itself is not imported)."""
    for distribution in ("tensorflow", "tensorflow-cpu"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return None


def warn_of_other_versions(framework_version: Any, py_version: Any, *, stacklevel: int = 2) -> None:
    """Warns (:class:`LocalVersionWarning`, one line) when a local_process job asks for a ``framework_version``
    (e.g. ``"2.4.1"``: its parts must match this machine's TensorFlow) or ``py_version`` (``"py37"``; ``"py3"``
    for any 3.x) other than this machine's, which is what runs the job. None asks for nothing."""
    here_tf = _installed_tensorflow()
    here_py = f"py{sys.version_info.major}{sys.version_info.minor}"
    other = []
    if isinstance(framework_version, str) and (
        here_tf is None or framework_version.split(".") != here_tf.split(".")[: len(framework_version.split("."))]
    ):
        other.append(f"framework_version={framework_version!r}")
    if isinstance(py_version, str) and py_version not in (here_py, f"py{sys.version_info.major}"):
        other.append(f"py_version={py_version!r}")
    if not other:
        return
    runs = f"TensorFlow {here_tf}" if here_tf else "no TensorFlow (not installed)"
    matching = (f"pass framework_version='{'.'.join(here_tf.split('.')[:2])}', py_version='{here_py}'" if here_tf
                else "install TensorFlow here")
    warnings.warn(
        f"{' and '.join(other)} cannot be honoured by instance_type='local_process': the job runs this machine's "
        f"{runs} on Python {sys.version_info.major}.{sys.version_info.minor}; {matching}, or run that version where "
        "it exists (instance_type='local' with its image, or SageMaker)",
        LocalVersionWarning, stacklevel=stacklevel + 1,
    )


def local_channels(inputs: object) -> dict[str, str]:
    """``fit(inputs)`` as local_mode channels.

    Args:
        inputs: None, a path / ``file://`` / ``s3://`` string (the ``training`` channel), a dict of channel name to
            such strings, or SDK ``TrainingInput`` objects.

    Returns:
        Channel name -> local path or ``s3://`` URI.

    Raises:
        ConfigurationError: An input of another kind.
    """
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        inputs = {"training": inputs}
    channels: dict[str, str] = {}
    for name, source in inputs.items():
        uri = source
        config = getattr(source, "config", None)  # sagemaker.inputs.TrainingInput
        if isinstance(config, Mapping):
            uri = channel_uri(config)
        if not isinstance(uri, (str, os.PathLike)):
            raise ConfigurationError(
                f"inputs[{name!r}]", source, "local_process jobs take local paths, file:// or s3:// URIs",
                "pass e.g. {'train': './data/train'} or {'train': 's3://bucket/train'}",
            )
        uri = os.fspath(uri)
        channels[name] = uri[len("file://"):] if uri.startswith("file://") else uri
    return channels


def channel_uri(channel: Mapping[str, Any]) -> str | None:
    """The URI of one channel as a CreateTrainingJob request (or an SDK ``TrainingInput``) holds it: its S3 prefix,
    or the ``file://`` folder of the SDK's local modes; None when it has neither."""
    source = channel.get("DataSource") or {}
    return (source.get("S3DataSource") or {}).get("S3Uri") or (source.get("FileDataSource") or {}).get("FileUri")


def mlflow_settings(setting: MlflowSetting, *, field: str = "mlflow",
                    environ: Mapping[str, str] | None = None) -> MlflowSettings | None:
    """Where a local job of the SDK doors is tracked (:class:`~smddp_compat.local_mode.tracking.MlflowSettings`), or
    None (untracked).

    ``setting`` None reads MLflow's own variables, as SDK v2's ``fit()`` and MLflow itself do: the job is tracked
    when ``MLFLOW_TRACKING_URI`` is set, in the experiment ``MLFLOW_EXPERIMENT_NAME`` when set (else the job's base
    name). A URI is tracked there (the experiment as above); settings are used as they are; False is never tracked.

    Args:
        setting: The door's explicit setting (``field`` names it in errors).
        field: The argument's name as the user wrote it.
        environ: The variables read (None: this process's).

    Raises:
        ConfigurationError: A setting of another type, or a URI MLflow tracking cannot use here (an ARN of
            SageMaker's managed MLflow, a scheme other than http(s), sqlite or file), naming where it came from.
    """
    if setting is False:
        return None
    if isinstance(setting, MlflowSettings):
        return setting
    environ = os.environ if environ is None else environ
    experiment = environ.get("MLFLOW_EXPERIMENT_NAME", "").strip() or None
    if isinstance(setting, str):
        return MlflowSettings(setting, experiment_name=experiment)
    if setting is not None:
        raise ConfigurationError(field, setting, "is not an MLflow setting",
                                 "pass MlflowSettings(URI, ...), a tracking URI, False (untracked), or None (tracked "
                                 "when MLFLOW_TRACKING_URI is set)")
    uri = environ.get("MLFLOW_TRACKING_URI", "").strip()
    if not uri:
        return None
    try:
        return MlflowSettings(uri, experiment_name=experiment)
    except ConfigurationError as exc:
        source = "MLFLOW_TRACKING_URI" if exc.field == "mlflow tracking URI" else "MLFLOW_EXPERIMENT_NAME"
        raise ConfigurationError(
            f"{source} (environment)", exc.value, f"{exc.problem} (the variable says where a local job is tracked)",
            f"{exc.fix}; or unset it, or pass {field}=False to run this job untracked") from None


def script_hyperparameters(hyperparameters: Mapping[str, Any], model_dir: Any) -> dict[str, Any]:
    """The hyperparameters SageMaker gives the script of the SDK's TensorFlow job (its ``sagemaker_*`` ones aside):
    the user's and ``model_dir`` as ``sagemaker.tensorflow.TensorFlow.hyperparameters`` sends it (none for
    ``model_dir=False``; the one given; else ``/opt/ml/model`` for an MPI job, ``s3://<output_path>/<job>/model``
    for the others).

    The script of a local job writes no S3: an ``s3://`` model_dir, given or the SDK's default, is
    ``/opt/ml/model``, the host's model folder (``SM_MODEL_DIR``), whose files end in the job's model.tar.gz.
    """
    hyperparameters = dict(hyperparameters)
    if model_dir is False:
        return hyperparameters
    if isinstance(model_dir, str) and model_dir.startswith("s3://"):
        logger.info("model_dir %r is each host's model folder (SM_MODEL_DIR) in a local_process job: what the "
                    "script saves there goes into the job's model.tar.gz", model_dir)
    local = isinstance(model_dir, str) and bool(model_dir) and not model_dir.startswith("s3://")
    hyperparameters[contract.MODEL_DIR_HYPERPARAMETER] = model_dir if local else contract.CONTAINER_MODEL_DIR
    return hyperparameters


def _is_default_checkpoint_folder(path: str) -> bool:
    """Whether ``checkpoint_local_path`` is SageMaker's default, ``/opt/ml/checkpoints`` (AWS's notebooks pass it):
    in a local_process job that is each host's own checkpoints folder, as in each SageMaker container."""
    return posixpath.normpath(path) == contract.DEFAULT_CHECKPOINT_DIR


def build_job_spec(
    *,
    entry_point: str,
    source_dir: str | None,
    instance_count: int,
    plan: DistributionPlan,
    hyperparameters: Mapping[str, Any],
    inputs: object,
    output_path: str | None,
    max_run: float | None,
    job_name: str | None,
    environment: Mapping[str, str] | None,
    checkpoint_local_path: str | None,
    checkpoint_s3_uri: str | None = None,
    metric_definitions: Any = None,
    model_dir: Any = False,
    argument_rule: str = "sagemaker-training",
    mlflow: MlflowSettings | None = None,
) -> JobSpec:
    """The local_mode JobSpec of an estimator's job (validated by local_mode on construction).

    ``hyperparameters`` are the user's; ``model_dir`` is the SDK v2 estimator's (see :func:`script_hyperparameters`;
    the default False adds none, as SDK v3's trainers send none). ``argument_rule`` is how they become the
    script's arguments (``JobSpec.argument_rule``: ``sdk-v3-driver`` for a ``ModelTrainer``'s job).

    ``metric_definitions`` (the SDK's list of ``{"Name", "Regex"}``) pass through: the result's ``final_metrics``
    holds each metric's last value in the logs, as DescribeTrainingJob's ``FinalMetricDataList`` does.
    ``mlflow``: where the job is tracked as an MLflow run (:func:`mlflow_settings` reads a door's setting), or None.

    Raises:
        ConfigurationError: (local_mode's) for a value local_mode refuses.
    """
    if plan.custom_mpi_options:
        logger.warning(
            "custom_mpi_options %r are ignored by instance_type='local_process' (ranks start over Gloo, or as the "
            "kit's own mpirun group on one host, without the job's mpirun options)",
            plan.custom_mpi_options,
        )
    output = output_path or DEFAULT_LOCAL_OUTPUT
    if output.startswith("file://"):
        output = output[len("file://"):]
    extra: dict[str, Any] = {}
    if max_run:
        extra["max_run"] = max_run
    if checkpoint_local_path and not _is_default_checkpoint_folder(checkpoint_local_path):
        extra["checkpoint_path"] = checkpoint_local_path  # a folder of this machine: JobSpec refuses /opt/ml/...
    if checkpoint_s3_uri:
        extra["checkpoint_s3_uri"] = checkpoint_s3_uri  # each host's folder starts from it and is stored there
    if metric_definitions:
        extra["metric_definitions"] = metric_definitions
    return JobSpec(
        entry_point=entry_point,
        source_dir=source_dir,
        instance_count=instance_count,
        distribution=plan.config,  # the estimator's checked distribution, as it is (never flattened to strings)
        hyperparameters=script_hyperparameters(hyperparameters, model_dir),
        channels=local_channels(inputs),
        output_path=output,
        job_name=job_name,
        environment=dict(environment or {}),
        argument_rule=argument_rule,
        mlflow=mlflow,
        **extra,
    )


def run_job(spec: JobSpec, stream: Any = None, control: JobControl | None = None) -> JobResult:
    """Runs a local_mode job to its end on local mode's process backend and returns its result.

    Args:
        spec: The job.
        stream: Where its processes' prefixed output and the summary go (None: standard output).
        control: The job's stop and metric listener (a tuning job's trial), or None.
    """
    return ProcessBackend(stream=stream).run(spec, control=control)


def described_as_sent(result: JobResult, *, role: str | None, image_uri: str | None,
                      hyperparameters: Mapping[str, str] | None = None, volume_size: int | None = None,
                      output_path: str | None = None, arn: str | None = None) -> dict[str, Any]:
    """DescribeTrainingJob of a finished local_process job as the SDK that ran it sees it: local mode's one builder
    (:meth:`~smddp_compat.local_mode.outcome.JobResult.describe`) with what the SDK sends besides the job (role,
    image, hyperparameters as it serialises them, volume, output path; each None: as local mode has it), the ARN
    in the SDK session's region, and :data:`LOCAL_INSTANCE_TYPE` as the instance type."""
    params = copy.deepcopy(dict(result.request_params))
    if role:
        params["RoleArn"] = role
    if image_uri:
        params["AlgorithmSpecification"]["TrainingImage"] = image_uri
    if hyperparameters is not None:
        params["HyperParameters"] = dict(hyperparameters)
    params["ResourceConfig"]["InstanceType"] = LOCAL_INSTANCE_TYPE
    if volume_size is not None:
        params["ResourceConfig"]["VolumeSizeInGB"] = volume_size
    if output_path is not None:
        params["OutputDataConfig"]["S3OutputPath"] = output_path
    return replace(result, request_params=params, **({"arn": arn} if arn else {})).describe()
