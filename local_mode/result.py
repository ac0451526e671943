"""What a local job did: :class:`JobResult`, and the summary printed at the end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from smddp_compat.local_mode.artifacts import ArtifactPaths
from smddp_compat.local_mode.errors import JobFailedError
from smddp_compat.local_mode.metrics import metric_lines

__all__ = ["ProcessOutcome", "JobResult", "COMPLETED", "FAILED", "STOPPED"]

COMPLETED = "Completed"
FAILED = "Failed"
STOPPED = "Stopped"


@dataclass(frozen=True)
class ProcessOutcome:
    """How one process ended.

    Attributes:
        label: ``algo-N,index``.
        host: Its host.
        returncode: Exit code (negative: killed by that signal), None if it could not be reaped.
        duration: Seconds it ran.
    """

    label: str
    host: str
    returncode: int | None
    duration: float


@dataclass(frozen=True)
class JobResult:
    """The result of :func:`smddp_compat.local_mode.run`.

    Attributes:
        job_name: The job's name.
        status: ``Completed``, ``Failed`` (a process failed) or ``Stopped`` (max_run passed, or interrupted), as
            SageMaker names a training job's status.
        duration: Seconds from the start of the processes to the end of the last one.
        exit_code: 0, the failed process's exit code, 124 when max_run passed, 128 + signal when interrupted.
        failure_reason: Why the job did not complete, including what the failed process wrote to its failure file.
        failed_label: The ``algo-N,index`` of the process that failed first, if one did.
        artifacts: Where model.tar.gz, output.tar.gz and the logs are.
        processes: Every process's outcome, in index order.
        final_metrics: Each metric of the job's ``metric_definitions`` with its last value in the logs (the
            process backend's ``FinalMetricDataList``: :func:`~local_mode.metrics.final_values_from_logs`).
        max_run_exceeded: The job was stopped because ``max_run`` passed (SageMaker's secondary status
            ``MaxRuntimeExceeded``).
    """

    job_name: str
    status: str
    duration: float
    exit_code: int
    failure_reason: str | None
    failed_label: str | None
    artifacts: ArtifactPaths
    processes: tuple[ProcessOutcome, ...] = field(default_factory=tuple)
    final_metrics: Mapping[str, float] = field(default_factory=dict)
    max_run_exceeded: bool = False

    @property
    def secondary_status(self) -> str:
        """SageMaker's secondary status at the end: the status, or ``MaxRuntimeExceeded`` for a job stopped by its
        time limit (as the twin's :attr:`~local_mode.docker.twin.TwinResult.secondary_status`)."""
        return "MaxRuntimeExceeded" if self.status == STOPPED and self.max_run_exceeded else self.status

    @property
    def ok(self) -> bool:
        """Whether the job completed."""
        return self.status == COMPLETED

    def raise_for_status(self) -> "JobResult":
        """Returns the result when the job completed.

        Returns:
            ``self``.

        Raises:
            JobFailedError: The job failed or was stopped.
        """
        if not self.ok:
            failed = next((p for p in self.processes if p.label == self.failed_label), None)
            raise JobFailedError(
                self.job_name,
                self.status,
                self.failure_reason or "unknown reason",
                label=self.failed_label,
                exit_code=failed.returncode if failed else None,
                host=failed.host if failed else None,
            )
        return self

    def summary(self) -> str:
        """A few lines for humans: status, duration, final metrics, artifacts, logs, failure reason."""
        lines = [f"local job {self.job_name}: {self.status} in {self.duration:.1f} s"]
        lines += [f"  metric {line}" for line in metric_lines(self.final_metrics.items())]
        if self.artifacts.model:
            lines.append(f"  model:  {self.artifacts.model}")
        if self.artifacts.output:
            lines.append(f"  output: {self.artifacts.output}")
        for host, log in self.artifacts.logs.items():
            lines.append(f"  log {host}: {log}")
        for clash in self.artifacts.clashes:
            lines.append(f"  warning: name clash between hosts (SageMaker would keep only one): {clash}")
        for note in self.artifacts.skipped:
            lines.append(f"  left out: {note}")
        if self.failure_reason:
            lines.append(f"  failure reason: {self.failure_reason}")
        return "\n".join(lines)
