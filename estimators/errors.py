"""Errors raised by the estimators package.

:class:`EstimatorError` (a :class:`smddp_compat.errors.SmddpError`) is the base of everything raised here. :class:`ConfigurationError` (and its subclasses) are
the user's mistakes, found when an estimator or CLI command is built, before any upload or AWS call: each names the
field, the value received and the fix. :class:`JobError` is a job that ran and failed, or an AWS call that did.
"""

from __future__ import annotations

from smddp_compat import errors as _shared

__all__ = [
    "EstimatorError",
    "ConfigurationError",
    "UnknownInstanceTypeError",
    "NoPublishedImageError",
    "MissingDependencyError",
    "JobError",
    "JobTimeoutError",
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
    :class:`local_mode.docker.ImageNotFoundError`: a named image missing from the local Docker engine."""


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
