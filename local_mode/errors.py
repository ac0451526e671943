"""Errors raised by local_mode.

Two families, after the SageMaker training toolkit's split between the user's mistakes and the job's failures:

* :class:`ConfigurationError` (and its :class:`HyperparameterError`): a value in the job's configuration is wrong
  (e.g. a hyperparameter that cannot be passed to the script: a bad name, or a value not JSON-serialisable). Raised
  when the :class:`~local_mode.spec.JobSpec` is built or before anything starts; the message names the field, the
  value received and the fix. These are the kit's shared classes, re-exported from :mod:`smddp_compat.errors`.
* :class:`LocalModeError` (an :class:`~smddp_compat.errors.SmddpError`) and its :class:`JobFailedError`,
  :class:`ChannelError`, :class:`ArtifactError`, :class:`TrackingError`: something went wrong while the job ran,
  fetched its input, stored its output or reached its MLflow tracking server.
"""

from __future__ import annotations

from smddp_compat.errors import ConfigurationError, HyperparameterError, SmddpError

__all__ = [
    "LocalModeError", "ConfigurationError", "HyperparameterError", "ChannelError", "ArtifactError", "JobFailedError",
    "TrackingError",
]


class LocalModeError(SmddpError):
    """Base class of local_mode's own failures (the user's mistakes are :class:`ConfigurationError` s)."""


class ChannelError(LocalModeError):
    """An input channel could not be fetched (e.g. an ``s3://`` prefix with no objects, or S3 unreachable).

    The message is the kit's ``channels['<channel>']='<source>': <problem>. Fix: <fix>``.
    """

    def __init__(self, channel: str, source: str, problem: str, fix: str) -> None:
        self.channel = channel
        self.source = source
        super().__init__(field=f"channels[{channel!r}]", value=source, problem=problem, fix=fix)


class ArtifactError(LocalModeError):
    """The job's artifacts (model.tar.gz, output.tar.gz, logs) could not be written or uploaded."""


class TrackingError(LocalModeError):
    """An MLflow tracking server or store could not be used: before the job, which then does not start, or when a
    run's end kept by a job is sent. The message is ``<field>=<value>: <problem>. Fix: <fix>`` (never credentials)."""

    def __init__(self, uri: str, problem: str, fix: str, *, field: str = "mlflow tracking URI") -> None:
        super().__init__(field=field, value=uri, problem=problem, fix=fix)


class JobFailedError(LocalModeError):
    """A local job did not complete; raised by :meth:`smddp_compat.local_mode.JobResult.raise_for_status`.

    Attributes:
        job_name: The job's name.
        status: ``"Failed"`` or ``"Stopped"``.
        reason: The failure reason (what the failed process wrote to its failure file, or why the job was stopped).
        label: The ``algo-N,rank`` label of the process that failed first, if one did (also the error's ``rank``).
        host: That process's host, if one failed (the error's ``host``).
        exit_code: That process's exit code, if one did (the error's ``exit_code``).
    """

    def __init__(
        self,
        job_name: str,
        status: str,
        reason: str,
        label: str | None = None,
        exit_code: int | None = None,
        host: str | None = None,
    ) -> None:
        self.job_name = job_name
        self.status = status
        self.reason = reason
        self.label = label
        where = f" (first failure: [{label}], exit code {exit_code})" if label is not None else ""
        super().__init__(
            f"local job {job_name!r} {status.lower()}{where}: {reason}", rank=label, host=host, exit_code=exit_code
        )
