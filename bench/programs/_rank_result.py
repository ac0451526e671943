"""What a rank reports back to the bench: its result file, and the process counters it reads.

The bench starts each job with ``BENCH_RESULT_DIR`` set; every rank writes ``rank<N>.json`` there (atomically), and
the bench reads them after the job ends.
"""

from __future__ import annotations

import json
import os
import resource
from typing import Any

__all__ = ["write_rank_result", "peak_rss_bytes", "bytes_written"]


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
