"""``smdistributed.dataparallel.tensorflow`` on Horovod, for TensorFlow 2.21 with Keras 3 or tf-keras.

SMDDP scripts::

    import smddp_compat.tensorflow as sdp      # or, unchanged, under smddprun:
    import smdistributed.dataparallel.tensorflow as sdp
    sdp.init()
    tape = sdp.DistributedGradientTape(tape)
    sdp.broadcast_variables(model.variables, root_rank=0)

Horovod scripts use the Horovod face instead, with Horovod's semantics (a second ``init()`` allowed, Horovod's
error types): ``import horovod.tensorflow as hvd`` -> ``import smddp_compat.horovod.tensorflow as hvd``
(see :mod:`smddp_compat.horovod`).
"""

from smddp_compat.job_startup import require_horovod

require_horovod()  # before the modules that import Horovod: a missing Horovod is named with its fix

from smddp_compat.tensorflow import callbacks  # noqa: E402
from smddp_compat.tensorflow._gradients import DEFAULT_BUCKET_CAP_MB
from smddp_compat.tensorflow._hooks import BroadcastGlobalVariablesHook
from smddp_compat.tensorflow._ops import (
    Adasum, Average, Compression, Max, Min, Product, ReduceOp, Sum, allgather, allgather_object, allreduce, broadcast,
    broadcast_global_variables, broadcast_object, broadcast_variables, grouped_allreduce, oob_allreduce, overlap)
from smddp_compat.tensorflow._optimizer import DistributedOptimizer
from smddp_compat.tensorflow._stall import watch as stall_watch
from smddp_compat.tensorflow.state import (
    cross_rank, cross_size, gloo_built, init, is_initialized, local_rank, local_size, mpi_built, nccl_built, rank,
    shutdown, size)
from smddp_compat.tensorflow._tape import DistributedGradientTape

__all__ = [
    # SMDDP API (seed documentation order)
    "init", "size", "local_size", "rank", "local_rank", "allreduce", "broadcast_global_variables",
    "broadcast_variables", "oob_allreduce", "overlap", "broadcast", "shutdown", "DistributedOptimizer",
    "DistributedGradientTape", "BroadcastGlobalVariablesHook", "Compression", "ReduceOp",
    # Horovod API additions
    "is_initialized", "cross_rank", "cross_size", "grouped_allreduce", "allgather", "broadcast_object",
    "allgather_object", "Average", "Sum", "Min", "Max", "Adasum", "Product", "mpi_built", "gloo_built", "nccl_built",
    "callbacks", "DEFAULT_BUCKET_CAP_MB",
    # smddp_compat additions
    "stall_watch",
]
