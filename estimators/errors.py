"""Errors raised by the estimators package.

Every error the estimators raise is a :class:`smddp_compat.errors.SmddpError`. The user's mistakes, found when an
estimator or CLI command is built, before any upload or AWS call, are the kit's one :class:`ConfigurationError`
(re-exported here from :mod:`smddp_compat.errors`; ``field`` as the user wrote it, e.g. ``instance_count``,
``distribution["dtensor"]["mesh"]``, ``--channel``) or one of its subclasses below: each names the field, the value
received and the fix. Everything else is an :class:`EstimatorError`: a :class:`JobError` is a job that ran and
failed, or an AWS call that did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version

from smddp_compat.errors import ConfigurationError, SmddpError

__all__ = [
    "EstimatorError",
    "ConfigurationError",
    "UnknownInstanceTypeError",
    "NoPublishedImageError",
    "MissingDependencyError",
    "SDK_APIS",
    "installed_sdk",
    "missing_sdk_error",
    "JobError",
    "JobTimeoutError",
    "LocalVersionWarning",
    "raised_as_estimator_errors",
]


class EstimatorError(SmddpError):
    """Base class of the estimators' own failures (the user's mistakes are :class:`ConfigurationError` s)."""


class UnknownInstanceTypeError(ConfigurationError):
    """The instance type is not in the table of known SageMaker training instance types."""


class NoPublishedImageError(ConfigurationError):
    """No ``image_uri`` was given and AWS publishes no TensorFlow training image for the ``framework_version`` (with
    this ``py_version``, instance type and region). Not to be confused with
    :class:`smddp_compat.local_mode.docker.ImageNotFoundError`: a named image missing from the local Docker engine."""


class LocalVersionWarning(UserWarning):
    """A ``local_process`` job asked for a ``framework_version`` or ``py_version`` other than this machine's, which
    is what runs it. Turn it into an error with ``warnings.simplefilter("error", LocalVersionWarning)``."""


class MissingDependencyError(EstimatorError, ImportError):
    """An optional dependency (e.g. SageMaker SDK v3, local_mode) is not installed; the message gives the install."""


#: The kit's API for each major version of the SageMaker Python SDK, and the install that brings that SDK.
SDK_APIS: dict[int, tuple[str, str]] = {
    2: ("smddp_compat.estimators.TensorFlow (the estimator; also smddp submit)", "pip install 'smddp-compat[sdk2]'"),
    3: ("smddp_compat.estimators.sdk3 (ModelTrainer's SMDDPCompat, Horovod, MultiWorkerMirrored, DTensor and "
        "ParameterServer configs)",
        "pip install 'smddp-compat[sdk3]'"),
}


def installed_sdk() -> str | None:
    """The installed SageMaker Python SDK's version (the ``sagemaker`` distribution), or None."""
    try:
        return version("sagemaker")
    except PackageNotFoundError:
        return None


def missing_sdk_error(major: int, cause: BaseException) -> MissingDependencyError:
    """The error for the API of SDK v``major`` (:data:`SDK_APIS`) when that SDK does not import (``cause``): which
    SDK this environment has, the install command, and the kit's API for the SDK that is here."""
    api, install = SDK_APIS[major]
    found = installed_sdk()
    cause = (str(cause).strip().splitlines() or [type(cause).__name__])[0]  # SDK v3's own notices run to many lines
    if found is None:
        other = 5 - major  # the other of v2 and v3
        return MissingDependencyError(
            f"{api} needs the SageMaker Python SDK v{major}, and no SageMaker SDK is installed ({cause}): {install}. "
            f"With SDK v{other} instead ({SDK_APIS[other][1]}), use {SDK_APIS[other][0]}.")
    found_major = int(found.split(".")[0]) if found.split(".")[0].isdigit() else 0
    if found_major == major:
        return MissingDependencyError(
            f"{api} needs the SageMaker Python SDK v{major}; sagemaker {found} is installed but does not import "
            f"({cause}): reinstall it, {install}.")
    instead = f". With SDK v{found_major} use {SDK_APIS[found_major][0]}" if found_major in SDK_APIS else ""
    return MissingDependencyError(
        f"{api} needs the SageMaker Python SDK v{major}, and this environment has sagemaker {found} ({cause}): "
        f"{install} in an environment of its own (SDK v2 and v3 cannot share one){instead}.")


class JobError(EstimatorError, RuntimeError):
    """A training job failed, was stopped, or an AWS call about it failed.

    Attributes:
        job_name: The training job's name.
        status: Its last known status (``Failed``, ``Stopped``, ...), or None.
        reason: The failure reason SageMaker (or local mode) reported, or None.
        rank, host, exit_code: The process that failed first, when known (``local_process`` jobs).
    """

    def __init__(
        self,
        job_name: str,
        message: str,
        *,
        status: str | None = None,
        reason: str | None = None,
        rank: int | str | None = None,
        host: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        """Keeps the job's name, status and reason beside the message.

        Args:
            job_name: The training job's name.
            message: The full message.
            status: The job's last status.
            reason: The failure reason.
            rank: The rank or ``algo-N,index`` label of the process that failed first.
            host: Its host.
            exit_code: Its exit code.
        """
        self.job_name = job_name
        self.status = status
        self.reason = reason
        super().__init__(message, rank=rank, host=host, exit_code=exit_code)


class JobTimeoutError(JobError, TimeoutError):
    """Waiting for a job took longer than the timeout; the job itself goes on."""


@contextlib.contextmanager
def raised_as_estimator_errors() -> Iterator[None]:
    """Re-raises a failure of a package the estimator called (local_mode) as the estimators' own, chained to it.

    A failed local job (an error with ``job_name`` and ``status``) becomes a :class:`JobError` with its ``reason``,
    ``rank``, ``host`` and ``exit_code``; any other :class:`~smddp_compat.errors.SmddpError` an
    :class:`EstimatorError` with the same message and fields. The user's mistakes (:class:`ConfigurationError` s)
    and the estimators' own errors leave unchanged.
    """
    try:
        yield
    except (ConfigurationError, EstimatorError):
        raise
    except SmddpError as error:
        job_name, status = getattr(error, "job_name", None), getattr(error, "status", None)
        if job_name is not None and status is not None:
            raise JobError(
                job_name, str(error), status=status, reason=getattr(error, "reason", None),
                rank=error.rank, host=error.host, exit_code=error.exit_code,
            ) from error
        raise EstimatorError(str(error), **error.details()) from error
