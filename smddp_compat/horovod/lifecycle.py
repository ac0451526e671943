"""Horovod's ``init``/``shutdown`` semantics over the kit's shared state: ``init()`` may be called again."""

from __future__ import annotations

from typing import Any, Sequence

import horovod.tensorflow as _horovod

from smddp_compat.tensorflow import state as shared_state
from smddp_compat.tensorflow.watched_collectives import watch_horovod_collectives

__all__ = ["init", "shutdown"]


def init(comm: Any = None, process_sets: Sequence[Any] | None = None) -> None:
    """Initializes Horovod, as ``horovod.tensorflow.init`` does; a second call is allowed and changes nothing.

    On top of Horovod's own init: run alone (no launcher), the job is one process over Gloo even when Horovod
    was built with MPI; and Keras 3 accepts what Horovod's Keras recipes pass (see
    :mod:`smddp_compat.keras_compat`). The SMDDP face (``smddp_compat.tensorflow``) sees the job as
    initialized too. Horovod's collectives report to the kit's stall watchdog
    (:func:`smddp_compat.tensorflow.watched_collectives.watch_horovod_collectives`), which ends a stall under Gloo
    as under MPI.

    Args:
        comm: MPI communicator or list of ranks, as in Horovod.
        process_sets: Process sets to register at start-up, as in Horovod.
    """
    shared_state.start(comm=comm, process_sets=process_sets)
    watch_horovod_collectives()


def shutdown() -> None:
    """Shuts Horovod down (``init()`` may follow), as ``horovod.tensorflow.shutdown`` does."""
    shared_state.shutdown()
    _horovod.shutdown()
