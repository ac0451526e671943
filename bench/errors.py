"""Errors raised by the bench."""

from __future__ import annotations

from smddp_compat.errors import SmddpError, UsageError

__all__ = ["BenchError", "BenchUsageError"]


class BenchError(SmddpError):
    """Base class of the bench's errors."""


class BenchUsageError(BenchError, UsageError):
    """A bench option has a bad value; the message names it and the fix."""
