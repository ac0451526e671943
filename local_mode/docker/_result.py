"""How a replayed job ended, in DescribeTrainingJob's terms: the twin's answer and its ``FailureReason``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from smddp_compat import contract
from smddp_compat.local_mode.layout import HostLayout

__all__ = ["TwinResult", "failure_reason"]


#: Exit codes of a replayed job by its secondary status, then its status.
_EXIT_CODES = {"Completed": 0, "MaxRuntimeExceeded": 124, "Stopped": 143}


@dataclass
class TwinResult:
    """How a replayed job ended, in DescribeTrainingJob's terms.

    Attributes:
        job_name: The job's name.
        status: ``Completed``, ``Failed`` or ``Stopped``.
        secondary_status: ``Completed``, ``Failed``, ``Stopped`` or ``MaxRuntimeExceeded``.
        failure_reason: ``FailureReason`` (None unless Failed).
        model_artifacts: The ``model.tar.gz`` URI, or None.
        output_artifacts: The ``output.tar.gz`` URI, or None.
        start: When the containers started.
        end: When the job ended.
        exit_codes: Host -> its container's exit code.
        logs: Host -> its log (``<output>/<job>/logs/<host>.log``, a file or an ``s3://`` URI).
        processes_per_host: The GPUs the twin granted each host (0 for CPU instance types).
    """

    job_name: str
    status: str
    secondary_status: str
    failure_reason: str | None
    model_artifacts: str | None
    output_artifacts: str | None
    start: datetime
    end: datetime
    exit_codes: dict[str, int] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    processes_per_host: int = 0

    @property
    def ok(self) -> bool:
        """True when the job completed."""
        return self.status == "Completed"

    @property
    def exit_code(self) -> int:
        """0 completed, 124 past ``MaxRuntimeInSeconds``, 143 stopped, else the first failed host's code (or 1)."""
        if self.secondary_status in _EXIT_CODES:
            return _EXIT_CODES[self.secondary_status]
        failed = [code for code in self.exit_codes.values() if code]
        return _EXIT_CODES.get(self.status, failed[0] if failed else 1)

    def describe(self) -> dict[str, Any]:
        """The DescribeTrainingJob fields SageMaker would report for this job."""
        answer: dict[str, Any] = {
            "TrainingJobName": self.job_name,
            "TrainingJobStatus": self.status,
            "SecondaryStatus": self.secondary_status,
            "TrainingStartTime": self.start,
            "TrainingEndTime": self.end,
            "TrainingTimeInSeconds": int((self.end - self.start).total_seconds()),
        }
        if self.failure_reason:
            answer["FailureReason"] = self.failure_reason
        if self.model_artifacts:
            answer["ModelArtifacts"] = {"S3ModelArtifacts": self.model_artifacts}
        return answer


# Open MPI's report of the process that ended the job: "... rank 2 with PID 0 on node algo-2 exited on signal 9".
_MPI_CULPRIT = re.compile(r"rank \d+ with PID \d+ on node \S+ exited on signal \d+[^\n]*")


def failure_reason(
    layouts: dict[str, HostLayout], failed_host: str | None, codes: dict[str, int], log_dir: Path
) -> str:
    """``FailureReason`` as SageMaker words it (``AlgorithmError:`` and the failure file), naming the host; when
    mpirun reports which rank on which node ended the job, that comes first (the host that failed is then the one
    that ran mpirun, not the one where the rank died)."""
    culprit = ""
    for host in layouts:
        log = log_dir / f"{host}.log"
        found = _MPI_CULPRIT.search(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else None
        if found:
            culprit = f"mpirun: {found.group(0).strip()}. "
            break
    order = [failed_host] if failed_host else []
    order += [host for host in layouts if host not in order]
    for host in order:
        text = contract.read_failure_reason(layouts[host].failure_file)
        if text:
            return contract.truncate_failure_reason(
                f"AlgorithmError: {culprit}{text} (on {host}, exit code {codes.get(host)})"
            )
    code = codes.get(failed_host or "")
    return f"AlgorithmError: {culprit}{failed_host} exited with code {code} and wrote no failure file"
