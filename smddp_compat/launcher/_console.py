"""What the console shows of a job's output: TensorFlow's C++ start-up lines are hidden there by default.

Every TensorFlow process prints a few C++ log lines when it starts (oneDNN, "Could not find cuda drivers", CPU
instructions, and without a GPU ``E0000 ... failed call to cuInit: ... (303)``, which reads like a failure and is
not one). They go to the log files only, unless asked for (``--show-tf-logs``) or the user set
``TF_CPP_MIN_LOG_LEVEL`` (TensorFlow then prints what the user asked for). Fatal (``F``) lines are always shown.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import IO

__all__ = ["is_tensorflow_log_line", "tensorflow_log_filter", "TensorFlowLogFilter", "ConsoleStream", "notice", "why",
           "release_stdout"]

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

    A :class:`TensorFlowLogFilter` of its own, or None (hide nothing) when ``show`` is set (``--show-tf-logs``) or
    the process's environment sets ``TF_CPP_MIN_LOG_LEVEL``.
    """
    if show or "TF_CPP_MIN_LOG_LEVEL" in environ:
        return None
    return TensorFlowLogFilter()


# A protocol buffer printed as text (``name {``, ``key: "CPU"``, ``}``), which TensorFlow's distributed runtime
# appends to some of its log lines (a server's ``SessionOptions: ...``): it opens with ``name {`` on the next line.
_PREFIX = r"^(?:\[\d+,\d+\]<std(?:out|err)>:)?"
_PROTO_OPENS = re.compile(_PREFIX + r"\w+ \{$")
_PROTO_TEXT_LINE = re.compile(_PREFIX + r"\s*(?:\w+ \{|\}|\w+: .*)?$")


class TensorFlowLogFilter:
    """Hides TensorFlow's C++ log lines (:func:`is_tensorflow_log_line`) and a protocol-buffer text that one of them
    continues with (from a ``name {`` right after it to the first line that is not such text). One per process: it
    remembers its last lines."""

    def __init__(self) -> None:
        self._after_log_line = False
        self._in_proto = False

    def __call__(self, text: str) -> bool:
        """True for a line to keep off the console."""
        after, self._after_log_line = self._after_log_line, False
        if is_tensorflow_log_line(text):
            self._after_log_line, self._in_proto = True, False
            return True
        if (after and _PROTO_OPENS.match(text)) or (self._in_proto and _PROTO_TEXT_LINE.match(text)):
            self._in_proto = bool(text.strip())  # a blank line ends the text
            return True
        self._in_proto = False
        return False


# -- a console that a closed pipe cannot break ------------------------------------------------------------------------


def notice(text: str) -> None:
    """Tells the user, on standard error, about an output sink that failed (nothing if that is gone too)."""
    try:
        sys.stderr.write(f"smddp: warning: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # standard error cannot be written either: there is no one left to tell


def why(exc: BaseException) -> str:
    """An OS error's words (``Broken pipe``), else the exception's text or type."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__


def _stream_name(stream: IO[str]) -> str:
    if stream is sys.__stdout__ or stream is sys.stdout:
        return "standard output"
    if stream is sys.__stderr__ or stream is sys.stderr:
        return "standard error"
    return f"the console ({getattr(stream, 'name', type(stream).__name__)})"


class ConsoleStream:
    """A text stream for what a job shows on the console: its first failed write (a closed pipe, as in
    ``smddprun ... | head -1``, or a closed file) drops it for good, says so once on standard error, and never
    raises, so that no job, rank or clean-up is stopped by a console that went away. (A ConsoleStream given as
    ``stream`` is used as it is.)
    """

    def __new__(cls, stream: "IO[str] | ConsoleStream") -> "ConsoleStream":
        if isinstance(stream, ConsoleStream):
            return stream
        return super().__new__(cls)

    def __init__(self, stream: "IO[str] | ConsoleStream") -> None:
        if stream is self:
            return
        self.stream = stream
        self.failed = False
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        """Writes and flushes ``text``; returns its length (written or dropped)."""
        with self._lock:
            if not self.failed:
                try:
                    self.stream.write(text)
                    self.stream.flush()
                except (OSError, ValueError) as exc:  # a closed pipe, a closed file
                    self.failed = True
                    notice(f"{_stream_name(self.stream)} cannot be written any more ({why(exc)}); the job goes on, "
                           "its output is no longer shown and still goes to its log files")
        return len(text)

    def flush(self) -> None:
        """Nothing to do: every write is flushed."""


def release_stdout() -> None:
    """Flushes standard output; when it is closed (``smddp ... | head -1``), points it at /dev/null, so that
    Python's own last flush at exit neither prints a BrokenPipeError nor turns the exit code into 120."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
