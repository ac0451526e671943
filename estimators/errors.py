"""Errors raised by the estimators package.

:class:`EstimatorError` (a :class:`smddp_compat.errors.SmddpError`) is the base of everything raised here. :class:`ConfigurationError` (and its subclasses) are
the user's mistakes, found when an estimator or CLI command is built, before any upload or AWS call: each names the
field, the value received and the fix. :class:`JobError` is a job that ran and failed, or an AWS call that did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from smddp_compat import errors as _shared

__all__ = [
    "EstimatorError",
    "ConfigurationError",
    "UnknownInstanceTypeError",
    "NoPublishedImageError",
    "MissingDependencyError",
    "JobError",
    "JobTimeoutError",
    "as_estimator_error",
    "raised_as_estimator_errors",
]


class EstimatorError(_shared.SmddpError):
    """Base class of every error raised by the estimators package."""


class ConfigurationError(_shared.ConfigurationError, EstimatorError):
    """A field of an estimator, a distribution or a CLI command is invalid (``field`` as the user wrote it, e.g.
    ``instance_count``, ``distribution["dtensor"]["mesh"]``, ``--channel``; ``value``, ``problem``, ``fix``)."""


class UnknownInstanceTypeError(ConfigurationError):
    """The instance type is not in the table of known SageMaker training instance types."""


class NoPublishedImageError(ConfigurationError):
    """No ``image_uri`` was given and AWS publishes no TensorFlow training image for the ``framework_version`` (with
    this ``py_version``, instance type and region). Not to be confused with
    :class:`smddp_compat.local_mode.docker.ImageNotFoundError`: a named image missing from the local Docker engine."""


class MissingDependencyError(EstimatorError, ImportError):
    """An optional dependency (e.g. SageMaker SDK v3, local_mode) is not installed; the message gives the install."""


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


def as_estimator_error(error: _shared.SmddpError) -> EstimatorError:
    """The estimators' error for an error of a package the estimator called (local_mode), with its structured fields.

    A configuration error stays a :class:`ConfigurationError` (same field, value, problem and fix); a failed local
    job (``status``, ``reason``) becomes a :class:`JobError`; anything else an :class:`EstimatorError` with the same
    message and fields.

    Args:
        error: The error raised by the called package.

    Returns:
        ``error`` itself when it already is an :class:`EstimatorError`, else the matching one (the caller raises it
        ``from error``).
    """
    if isinstance(error, EstimatorError):
        return error
    if isinstance(error, _shared.ConfigurationError):
        return ConfigurationError(error.field, error.value, error.problem, error.fix)
    job_name, status = getattr(error, "job_name", None), getattr(error, "status", None)
    if job_name is not None and status is not None:
        return JobError(
            job_name, str(error), status=status, reason=getattr(error, "reason", None),
            rank=error.rank, host=error.host, exit_code=error.exit_code,
        )
    return EstimatorError(str(error), **error.details())


@contextlib.contextmanager
def raised_as_estimator_errors() -> Iterator[None]:
    """Re-raises any :class:`~smddp_compat.errors.SmddpError` from the block as :func:`as_estimator_error` does,
    chained to the original (``from``), so that the estimators' public methods raise :class:`EstimatorError` s only.
    """
    try:
        yield
    except _shared.SmddpError as error:
        wrapped = as_estimator_error(error)
        if wrapped is error:
            raise
        raise wrapped from error
