"""Errors raised by local_mode.

Two families, after the SageMaker training toolkit's split between the user's mistakes and the job's failures:

* :class:`ConfigurationError` (and its subclasses): a value in the job's configuration is wrong. Raised when the
  :class:`~local_mode.spec.JobSpec` is built or before anything starts; the message names the field, the value
  received and the fix.
* :class:`JobFailedError`, :class:`ChannelError`, :class:`ArtifactError`: something went wrong while the job ran,
  fetched its input or stored its output.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LocalModeError",
    "ConfigurationError",
    "HyperparameterError",
    "ChannelError",
    "ArtifactError",
    "JobFailedError",
]


class LocalModeError(Exception):
    """Base class of every error raised by local_mode."""


class ConfigurationError(LocalModeError, ValueError):
    """A value in the job configuration is invalid.

    Attributes:
        field: The configuration field (or CLI option) that holds the bad value.
        value: The value received.
        fix: What to do instead.
    """

    def __init__(self, field: str, value: Any, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}={value!r}: {problem}. Fix: {fix}")


class HyperparameterError(ConfigurationError):
    """A hyperparameter cannot be passed to the training script (bad name, or value not JSON-serialisable)."""


class ChannelError(LocalModeError):
    """An input channel could not be fetched (e.g. an ``s3://`` prefix with no objects, or S3 unreachable)."""

    def __init__(self, channel: str, source: str, problem: str, fix: str) -> None:
        self.channel = channel
        self.source = source
        super().__init__(f"channel {channel!r} from {source}: {problem}. Fix: {fix}")


class ArtifactError(LocalModeError):
    """The job's artifacts (model.tar.gz, output.tar.gz, logs) could not be written or uploaded."""


class JobFailedError(LocalModeError):
    """A local job did not complete; raised by :meth:`local_mode.JobResult.raise_for_status`.

    Attributes:
        job_name: The job's name.
        status: ``"Failed"`` or ``"Stopped"``.
        reason: The failure reason (what the failed process wrote to its failure file, or why the job was stopped).
        label: The ``algo-N,rank`` label of the process that failed first, if one did.
        exit_code: That process's exit code, if one did.
    """

    def __init__(
        self, job_name: str, status: str, reason: str, label: str | None = None, exit_code: int | None = None
    ) -> None:
        self.job_name = job_name
        self.status = status
        self.reason = reason
        self.label = label
        self.exit_code = exit_code
        where = f" (first failure: [{label}], exit code {exit_code})" if label is not None else ""
        super().__init__(f"local job {job_name!r} {status.lower()}{where}: {reason}")
