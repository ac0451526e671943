"""Errors raised by the entry-point scripts and their shared modules.

`EntryPointError` marks a mistake the user can fix (a bad hyperparameter, a malformed data channel, an unusable
directory); `run_entry_point` writes its message to the SageMaker failure file. Anything else is a bug or an
environment failure and is reported with its type name.
"""

from __future__ import annotations

from smddp_compat import cluster as _cluster
from smddp_compat import errors as _shared

__all__ = ["EntryPointError", "HyperparameterError", "DatasetError", "CheckpointError", "ClusterConfigError"]


class EntryPointError(_shared.SmddpError):
    """Base class: a user-fixable problem with how a training script was configured or fed."""


class HyperparameterError(_shared.HyperparameterError, EntryPointError):
    """A hyperparameter is unknown, malformed or out of range: ``field`` is the hyperparameter as the user spelled
    it (``--epochs``), with the ``value`` received, the ``problem`` and the ``fix``."""


class DatasetError(EntryPointError):
    """A data channel is missing files, or holds arrays of the wrong shape, type or labels.

    Attributes:
        path: The file or directory at fault.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CheckpointError(EntryPointError):
    """A checkpoint directory cannot be used (not writable, or holds an unreadable checkpoint)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ClusterConfigError(EntryPointError, _cluster.ClusterConfigError):
    """A variable a launcher gives the script (``TF_CONFIG``, ``DTENSOR_*``, ``SM_NUM_*``) is inconsistent.

    ``SM_HOSTS``, ``SM_CURRENT_HOST`` and ``SMDDP_HOST_ADDRESSES`` are read by :mod:`smddp_compat.cluster`, which
    raises its own :class:`smddp_compat.cluster.ClusterConfigError` (this class's base), as at every launcher.
    """

    def __init__(self, message: str) -> None:
        """Keeps ``message`` as the whole text (the script's own checks compose it)."""
        _shared.SmddpError.__init__(self, message)
