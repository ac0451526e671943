"""The kit's one error base, and the errors every package shares.

Every error the kit raises is a :class:`SmddpError`, which carries, besides its message, the fields a program needs
to act on it without parsing the text (set or None; :meth:`SmddpError.details` lists the set ones).
:class:`UsageError` (and :class:`ConfigurationError`, which always names field, value, problem and fix, and its
:class:`HyperparameterError`) are the user's mistakes; :class:`LaunchError` and :class:`CollectiveError` failures of
the job itself. The constructors and the message format live here alone.

The user's mistakes are these shared classes whichever package finds them: ``local_mode``, ``estimators`` and
``entry_points`` re-export them (``smddp_compat.local_mode.ConfigurationError`` *is* this class), and ``except
ConfigurationError`` catches them all. Each package's own failures derive from its base (``LocalModeError``,
``EstimatorError``, ``EntryPointError``, ``BenchError``, ``DockerError``), an SmddpError.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "SmddpError",
    "UsageError",
    "ConfigurationError",
    "HyperparameterError",
    "NotInitializedError",
    "AlreadyInitializedError",
    "NotSupportedError",
    "CollectiveError",
    "LaunchError",
]


_UNSET: Any = object()


class SmddpError(Exception):
    """Base class of every error raised by the kit.

    Attributes:
        field: The setting (argument, option, variable) that holds a bad value, or None.
        value: The value received (None when unset or not applicable).
        problem: What is wrong with it, or None.
        fix: What to do instead, or None.
        rank: The rank (or process label) at fault, or None.
        host: The host at fault, or None.
        exit_code: The exit code of the process at fault, or None.
    """

    field: str | None = None
    value: Any = None
    problem: str | None = None
    fix: str | None = None
    rank: int | str | None = None
    host: str | None = None
    exit_code: int | None = None

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        value: Any = _UNSET,
        problem: str | None = None,
        fix: str | None = None,
        rank: int | str | None = None,
        host: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        """Keeps the structured fields (the class's attributes); the message, when None, is composed from them:
        ``<field>=<value!r>: <problem>. Fix: <fix>``."""
        self.field = field
        self.value = None if value is _UNSET else value
        self.problem = problem
        self.fix = fix
        self.rank = rank
        self.host = host
        self.exit_code = exit_code
        if message is None:
            message = _compose(field, value, problem, fix)
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        """The structured fields that are set (for logs, JSON answers and tests)."""
        names = ("field", "value", "problem", "fix", "rank", "host", "exit_code")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


def _compose(field: str | None, value: Any, problem: str | None, fix: str | None) -> str:
    subject = field or ""
    if value is not _UNSET:
        subject = f"{subject}={value!r}" if subject else repr(value)
    text = ": ".join(part for part in (subject, problem) if part)
    return f"{text}. Fix: {fix}" if fix else text


class UsageError(SmddpError, ValueError):
    """A value given by the user is invalid. The message names the value and the fix."""


class ConfigurationError(UsageError):
    """A setting of a job, a launcher, an estimator or a script is invalid: names the field, the value, the problem
    and the fix.

    The message is ``<field>=<value!r>: <problem>. Fix: <fix>``.
    """

    def __init__(self, field: str, value: Any, problem: str, fix: str) -> None:
        """Builds the error from its four parts; `field` is the setting as the user wrote it (e.g.
        ``processes_per_host``, ``--channel``, ``distribution["dtensor"]["mesh"]``)."""
        super().__init__(field=field, value=value, problem=problem, fix=fix)


class HyperparameterError(ConfigurationError):
    """A hyperparameter cannot be used: a bad name, a value that cannot be encoded, or one the script refuses (unknown,
    malformed or out of range).

    ``field`` is the hyperparameter as the user spelled it (``--epochs``, ``hyperparameters['lr']``).
    """


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
