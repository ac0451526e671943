"""Errors raised by the entry-point scripts and their shared modules, each a mistake the user can fix (its
``<type>: <message>`` goes to the failure file): `EntryPointError` and its kinds (`DatasetError`, `CheckpointError`),
and the kit's :class:`~smddp_compat.errors.HyperparameterError` (``field``: the hyperparameter as the user spelled
it) and :class:`~smddp_compat.cluster.ClusterConfigError` (``TF_CONFIG``, ``DTENSOR_*``, ``SM_*``), re-exported.
"""

from __future__ import annotations

from smddp_compat.cluster import ClusterConfigError
from smddp_compat.errors import HyperparameterError, SmddpError

__all__ = ["EntryPointError", "HyperparameterError", "DatasetError", "CheckpointError", "ClusterConfigError"]


class EntryPointError(SmddpError):
    """Base class of the scripts' own errors: a user-fixable problem with how a script was configured or fed."""


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

