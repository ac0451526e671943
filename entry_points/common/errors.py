"""Errors raised by the entry-point scripts and their shared modules.

Each marks a mistake the user can fix; `run_entry_point` writes ``<type>: <message>`` to the SageMaker failure file
(whose start SageMaker shows as the job's FailureReason), whatever the exception. `EntryPointError` and its kinds are
the scripts' own: a malformed data channel (`DatasetError`), an unusable directory (`CheckpointError`). Two are the
kit's shared classes, re-exported here: a hyperparameter that is unknown, malformed or out of range is a
:class:`~smddp_compat.errors.HyperparameterError` (``field`` the hyperparameter as the user spelled it, ``--epochs``);
a variable a launcher gives the script that is inconsistent (``TF_CONFIG``, ``DTENSOR_*``, ``SM_NUM_*``, ``SM_HOSTS``)
a :class:`~smddp_compat.cluster.ClusterConfigError`.
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

