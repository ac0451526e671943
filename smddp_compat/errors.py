"""Errors raised by smddp_compat.

Every error separates the user's mistakes (:class:`UsageError`) from failures of the job itself
(:class:`LaunchError`, :class:`RankFailedError`, :class:`CollectiveError`). Messages say what was wrong, the value
received, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "SmddpError",
    "UsageError",
    "NotInitializedError",
    "AlreadyInitializedError",
    "NotSupportedError",
    "CollectiveError",
    "LaunchError",
    "RankFailedError",
]


class SmddpError(Exception):
    """Base class of every error raised by smddp_compat."""


class UsageError(SmddpError, ValueError):
    """A value given by the user is invalid. The message names the value and the fix."""


class NotInitializedError(SmddpError, RuntimeError):
    """An API function was called before ``init()``."""

    def __init__(self, function: str) -> None:
        super().__init__(
            f"smdistributed.dataparallel is not initialized: {function}() was called before init(). "
            "Call smddp_compat.tensorflow.init() (sdp.init()) once at the start of the training script."
        )
        self.function = function


class AlreadyInitializedError(SmddpError, RuntimeError):
    """``init()`` was called twice (the text is the one SMDDP documents)."""

    def __init__(self) -> None:
        super().__init__("init() called more than once. smdistributed.dataparallel is already initialized.")


class NotSupportedError(SmddpError, NotImplementedError):
    """An argument SMDDP documents as unsupported was given."""


class CollectiveError(SmddpError, RuntimeError):
    """A collective operation failed across ranks (mismatched shapes or types, a rank that left, a stall)."""


class LaunchError(SmddpError, RuntimeError):
    """A process of a job could not be started."""


class RankFailedError(SmddpError, RuntimeError):
    """A rank of a job exited with an error; carries where and how."""

    def __init__(self, label: str, host: str, exit_code: int | None, command: list[str], reason: str) -> None:
        super().__init__(reason)
        self.label = label
        self.host = host
        self.exit_code = exit_code
        self.command = command
        self.reason = reason
