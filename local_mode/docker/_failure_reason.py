"""The ``FailureReason`` of a replayed job that failed, as SageMaker words it."""

from __future__ import annotations

import re
from pathlib import Path

from smddp_compat import contract
from smddp_compat.local_mode.layout import HostLayout

__all__ = ["failure_reason"]


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
