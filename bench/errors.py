"""Errors raised by the bench."""

from __future__ import annotations

from smddp_compat.errors import SmddpError, UsageError

__all__ = ["BenchError", "BenchInterrupted", "BenchUsageError"]


class BenchError(SmddpError):
    """Base class of the bench's errors."""


class BenchUsageError(BenchError, UsageError):
    """A bench option has a bad value; the message names it and the fix."""


class BenchInterrupted(BenchError):
    """SIGINT or SIGTERM reached the bench while a job ran: the job was stopped, and the bench stops too.

    Attributes:
        signum: The signal's number.
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}: the running job was stopped; no report written")
