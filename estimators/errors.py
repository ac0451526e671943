"""Errors raised by the estimators package.

:class:`EstimatorError` is the base of everything raised here. :class:`ConfigurationError` (and its subclasses) are
the user's mistakes, found when an estimator or CLI command is built, before any upload or AWS call: each names the
field, the value received and the fix. :class:`JobError` is a job that ran and failed, or an AWS call that did.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EstimatorError",
    "ConfigurationError",
    "UnknownInstanceTypeError",
    "ImageNotFoundError",
    "MissingDependencyError",
    "JobError",
    "JobTimeoutError",
]


class EstimatorError(Exception):
    """Base class of every error raised by the estimators package."""


class ConfigurationError(EstimatorError, ValueError):
    """A field of an estimator, a distribution or a CLI command is invalid.

    Attributes:
        field: The name of the bad field, as the user wrote it (e.g. ``instance_count``,
            ``distribution["dtensor"]["mesh"]``, ``--channel``).
        value: The value received.
        fix: What to do instead.
    """

    def __init__(self, field: str, value: Any, problem: str, fix: str) -> None:
        """Builds the message ``<field>=<value!r>: <problem>. Fix: <fix>``.

        Args:
            field: The bad field's name.
            value: The value received.
            problem: What is wrong with it.
            fix: How to correct it.
        """
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}={value!r}: {problem}. Fix: {fix}")


class UnknownInstanceTypeError(ConfigurationError):
    """The instance type is not in the table of known SageMaker training instance types."""


class ImageNotFoundError(ConfigurationError):
    """No training image is known for the framework version and none was given."""


class MissingDependencyError(EstimatorError, ImportError):
    """An optional dependency (e.g. SageMaker SDK v3, local_mode) is not installed; the message gives the install."""


class JobError(EstimatorError, RuntimeError):
    """A training job failed, was stopped, or an AWS call about it failed.

    Attributes:
        job_name: The training job's name.
        status: Its last known status (``Failed``, ``Stopped``, ...), or None.
        reason: The failure reason SageMaker (or local mode) reported, or None.
    """

    def __init__(self, job_name: str, message: str, *, status: str | None = None, reason: str | None = None) -> None:
        """Keeps the job's name, status and reason beside the message.

        Args:
            job_name: The training job's name.
            message: The full message.
            status: The job's last status.
            reason: The failure reason.
        """
        self.job_name = job_name
        self.status = status
        self.reason = reason
        super().__init__(message)


class JobTimeoutError(JobError, TimeoutError):
    """Waiting for a job took longer than the timeout; the job itself goes on."""
