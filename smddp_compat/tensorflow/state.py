"""Process-wide state: init, shutdown, and the rank/size queries."""

from __future__ import annotations

import os
from typing import Any

import horovod.tensorflow as _hvd

from smddp_compat.errors import AlreadyInitializedError, NotInitializedError
from smddp_compat.keras_compat import adapt_keras3_for_keras2_scripts

__all__ = [
    "start", "init", "shutdown", "is_initialized", "require_init", "size", "local_size", "rank", "local_rank",
    "cross_rank", "cross_size", "mpi_built", "gloo_built", "nccl_built",
]

_initialized = False

# Variables an MPI launcher (Open MPI, MPICH/PMI, Slurm) sets in every rank it starts.
_MPI_LAUNCH_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def _choose_controller() -> None:
    """Without a Gloo rendezvous and outside mpirun, run as one process over Gloo.

    Horovod built with MPI would otherwise try MPI_Init in singleton mode, which Open MPI refuses as root.
    """
    if os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR") or os.environ.get("HOROVOD_CONTROLLER"):
        return
    if any(marker in os.environ for marker in _MPI_LAUNCH_MARKERS):
        return
    if _hvd.gloo_built():
        os.environ["HOROVOD_CONTROLLER"] = "gloo"
        os.environ["HOROVOD_CPU_OPERATIONS"] = "gloo"


def start(**horovod_init_args: Any) -> None:
    """Starts Horovod (or joins it when already started) and adapts Keras 3 for Keras 2-era scripts.

    Shared by both faces: SMDDP's ``init()`` (which refuses a second call) and Horovod's (which allows it).

    Args:
        **horovod_init_args: Passed to ``horovod.tensorflow.init`` (``comm``, ``process_sets``).
    """
    global _initialized
    _choose_controller()
    _hvd.init(**horovod_init_args)
    _initialized = True
    adapt_keras3_for_keras2_scripts()


def init() -> None:
    """Initializes smdistributed.dataparallel. Call it once, at the start of the training script.

    Under ``smddprun`` (or ``smddp local``) the rank comes from the launcher; under ``mpirun`` from MPI; run alone,
    the script is a job of size 1.

    Raises:
        AlreadyInitializedError: ``init()`` was already called (and ``shutdown()`` was not).
    """
    if _initialized:
        raise AlreadyInitializedError()
    start()


def shutdown() -> None:
    """Shuts smdistributed.dataparallel down. Optional at the end of the script; ``init()`` may follow."""
    global _initialized
    if _initialized:
        _hvd.shutdown()
    _initialized = False


def is_initialized() -> bool:
    """True between ``init()`` and ``shutdown()``."""
    return _initialized and _hvd.is_initialized()


def require_init(function: str) -> None:
    """Raises NotInitializedError naming ``function`` when ``init()`` has not been called."""
    if not _initialized:
        raise NotInitializedError(function)


def size() -> int:
    """Total number of processes (one per GPU on GPU hosts) across all nodes."""
    require_init("size")
    return _hvd.size()


def local_size() -> int:
    """Number of processes on this node."""
    require_init("local_size")
    return _hvd.local_size()


def rank() -> int:
    """Rank of this process in the job, from 0 to ``size() - 1``; rank 0 is the leader."""
    require_init("rank")
    return _hvd.rank()


def local_rank() -> int:
    """Rank of this process among the processes of its node (use it to pin a GPU)."""
    require_init("local_rank")
    return _hvd.local_rank()


def cross_rank() -> int:
    """Index of this process's node among the nodes (Horovod API)."""
    require_init("cross_rank")
    return _hvd.cross_rank()


def cross_size() -> int:
    """Number of nodes that have a process with this local rank (Horovod API)."""
    require_init("cross_size")
    return _hvd.cross_size()


def mpi_built() -> bool:
    """True when Horovod was built with MPI."""
    return bool(_hvd.mpi_built())


def gloo_built() -> bool:
    """True when Horovod was built with Gloo."""
    return bool(_hvd.gloo_built())


def nccl_built() -> bool:
    """True when Horovod was built with NCCL (GPU hosts)."""
    return bool(_hvd.nccl_built())
