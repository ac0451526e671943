"""Keras 3 variables given to Horovod's variable functions: Horovod gets the ``tf.Variable`` inside each one.

Horovod 0.28.1 calls ``.ref()`` and ``.assign()`` on what it is given inside ``tf.function``; a Keras 3 variable
has no ``.ref()`` and is read there as a symbolic tensor (``'SymbolicTensor' object has no attribute 'assign'``).
"""

from __future__ import annotations

from typing import Any, Iterable

from horovod.tensorflow import functions as _functions
from horovod.tensorflow.mpi_ops import global_process_set

from smddp_compat.keras_compat import unwrap_variable

__all__ = ["broadcast_variables", "unwrap_all", "unwrap_groups"]


def unwrap_all(variables: Iterable[Any]) -> list[Any]:
    """Each Keras 3 variable replaced by its ``tf.Variable``; anything else kept as is."""
    return [unwrap_variable(v) for v in variables]


def unwrap_groups(groups: Any) -> Any:
    """Horovod's ``groups`` argument (a count, or lists of variables) with Keras 3 variables unwrapped."""
    if isinstance(groups, (list, tuple)):
        return [unwrap_groups(g) if isinstance(g, (list, tuple)) else unwrap_variable(g) for g in groups]
    return groups


def broadcast_variables(variables: Iterable[Any], root_rank: int, process_set: Any = global_process_set,
                        inplace: bool = False) -> Any:
    """Horovod's ``broadcast_variables``, which also takes Keras 3 variables (``model.variables`` on Keras 3).

    Args:
        variables: tf.Variable, Keras 3 or tf-keras variables.
        root_rank: Rank whose values every process takes.
        process_set: Process set to broadcast within (default: all processes).
        inplace: Broadcast in place, as in Horovod.

    Returns:
        What Horovod's ``broadcast_variables`` returns (the assign operation in graph mode).
    """
    return _functions.broadcast_variables(unwrap_all(variables), root_rank, process_set=process_set,
                                          inplace=inplace)
