"""What the console shows of a job's output: TensorFlow's C++ start-up lines are hidden there by default.

Every TensorFlow process prints a handful of C++ log lines when it starts (oneDNN, "Could not find cuda drivers",
CPU instructions, and on a machine without a GPU ``E0000 ... failed call to cuInit: ... (303)``, which reads like a
failure and is not one). The launchers keep them out of the console but still write them to the per-rank or per-host
log files. They are shown when asked for (``--show-tf-logs``) or when the user set ``TF_CPP_MIN_LOG_LEVEL``: then
TensorFlow itself decides what it prints, as the user asked. Fatal (``F``) lines are always shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

__all__ = ["is_tensorflow_log_line", "tensorflow_log_filter"]

# An optional mpirun --tag-output prefix, then one of TensorFlow's C++ log formats (absl's ``I0000 00:00:... pid
# file.cc:N] ...`` and TF's own ``2026-01-01 00:00:00.000000: I path/file.cc:N] ...``) at level I, W or E, or one of
# the two known unprefixed lines TensorFlow prints with them.
_TENSORFLOW_LOG_LINE = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:)?(?:"
    r"[IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-/]+:\d+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] [\w.\-/]+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$"
    r")"
)


def is_tensorflow_log_line(text: str) -> bool:
    """Whether ``text`` (one output line, without its newline) is a TensorFlow C++ log line below fatal."""
    return _TENSORFLOW_LOG_LINE.match(text) is not None


def tensorflow_log_filter(environ: Mapping[str, str], *, show: bool) -> Callable[[str], bool] | None:
    """The console filter of a process: what :class:`~smddp_compat.launcher.ProcessSpec` ``console_hides`` takes.

    Args:
        environ: The process's environment.
        show: The user asked to see TensorFlow's C++ log lines (``--show-tf-logs``).

    Returns:
        :func:`is_tensorflow_log_line`, or None (hide nothing) when ``show`` is set or the environment sets
        ``TF_CPP_MIN_LOG_LEVEL``.
    """
    if show or "TF_CPP_MIN_LOG_LEVEL" in environ:
        return None
    return is_tensorflow_log_line
