"""SageMaker estimators for smddp-compat: SMDDP on any TensorFlow, DTensor, and local runs.

- :class:`TensorFlow` (SageMaker SDK v2, extra ``smddp-compat[sdk2]``): ``from smddp_compat.estimators import
  TensorFlow`` in place of ``from sagemaker.tensorflow import TensorFlow``.
- :mod:`smddp_compat.estimators.sdk3` (SageMaker SDK v3, extra ``smddp-compat[sdk3]``): ``SMDDPCompat``,
  ``Horovod``, ``MultiWorkerMirrored``, ``DTensor`` and ``ParameterServer`` distributed configs for ``ModelTrainer``,
  and ``train_local`` (a trainer's job on this machine).
- :func:`build_job_spec` and :func:`run_job`: an estimator's or trainer's job as a local_mode job, run here.
- :mod:`smddp_compat.commands.submit_cli`: ``smddp submit|status|logs|wait|fetch``.

Importing this package imports neither TensorFlow nor the SageMaker SDK: :class:`TensorFlow` is loaded on first
use, so the package also imports where only SDK v3 is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smddp_compat.estimators._distribution import DistributionPlan, plan_distribution
from smddp_compat.estimators._local_process import (
    DEFAULT_LOCAL_OUTPUT, MlflowSetting, build_job_spec, described_as_sent, mlflow_settings, run_job,
)
from smddp_compat.estimators._jobs import (
    check_destination, describe_job, fetch_model, format_status, iter_log_events, wait_for_job,
)
from smddp_compat.estimators._local_tuning import LocalTuningClient, run_tuning_job
from smddp_compat.estimators._source_bundle import DEFAULT_SOURCE_EXCLUDES, stage_driver_dir
from smddp_compat.estimators._validation import (
    check_channel_names, check_job_name, check_positive_int, check_positive_seconds, check_s3_uri, instance_spec,
    resolve_region, sagemaker_mlflow_config,
)
from smddp_compat.estimators.errors import (
    ConfigurationError, EstimatorError, JobError, JobTimeoutError, LocalVersionWarning, MissingDependencyError,
    NoPublishedImageError, UnknownInstanceTypeError, missing_sdk_error,
)
from smddp_compat.image.cuda import CpuImageWarning, check_image_for_instance_type, image_cuda
from smddp_compat.instance_types import InstanceSpec, known_instance_types

if TYPE_CHECKING:  # pragma: no cover
    from smddp_compat.estimators._tensorflow_estimator import TensorFlow

__all__ = [
    "TensorFlow", "DEFAULT_SOURCE_EXCLUDES", "DistributionPlan", "InstanceSpec", "plan_distribution", "instance_spec",
    "known_instance_types", "CpuImageWarning", "check_image_for_instance_type", "image_cuda", "check_channel_names",
    "check_job_name", "stage_driver_dir", "ConfigurationError", "EstimatorError", "JobError", "JobTimeoutError",
    "LocalVersionWarning", "MissingDependencyError", "NoPublishedImageError", "UnknownInstanceTypeError",
    "DEFAULT_LOCAL_OUTPUT", "build_job_spec", "run_job", "described_as_sent",
    "LocalTuningClient", "run_tuning_job", "check_destination", "describe_job", "fetch_model", "format_status",
    "iter_log_events", "wait_for_job", "check_positive_int", "check_positive_seconds", "check_s3_uri", "resolve_region",
    "sagemaker_mlflow_config", "mlflow_settings", "MlflowSetting",
]


def __getattr__(name: str) -> Any:
    if name == "TensorFlow":
        try:
            from smddp_compat.estimators._tensorflow_estimator import TensorFlow  # loads the SageMaker SDK v2
        except ImportError as exc:
            raise missing_sdk_error(2, exc) from exc
        return TensorFlow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
