"""What a rank reports back to the bench: its result file, and the process counters it reads.

The bench starts each job with ``BENCH_RESULT_DIR`` set; every rank writes ``rank<N>.json`` there (atomically), and
the bench reads them after the job ends. Progress lines (``progress``) go to the job's log, to show where the time
of a slow job went.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any

__all__ = ["write_rank_result", "peak_rss_bytes", "bytes_written", "progress"]

_IMPORTED = time.monotonic()


def write_rank_result(rank: int, payload: dict[str, Any]) -> None:
    """Writes ``payload`` as ``$BENCH_RESULT_DIR/rank<rank>.json`` (temp file + rename).

    Raises:
        KeyError: ``BENCH_RESULT_DIR`` is not set (the program was not started by the bench).
    """
    directory = os.environ["BENCH_RESULT_DIR"]
    path = os.path.join(directory, f"rank{rank}.json")
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    os.replace(temporary, path)


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bytes_written() -> int | None:
    """Bytes this process has passed to write-type system calls (``wchar`` of ``/proc/self/io``), sockets included.

    Returns:
        The counter, or None where ``/proc/self/io`` is unavailable.
    """
    try:
        with open("/proc/self/io", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def process_age() -> float:
    """Seconds since this process started (from ``/proc``; since this module's import where that fails)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


def progress(rank: int, message: str) -> None:
    """Prints ``bench: <seconds since the process started> s: message`` on rank 0 (into the job's log)."""
    if rank == 0:
        print(f"bench: {process_age():6.1f} s: {message}", flush=True)
