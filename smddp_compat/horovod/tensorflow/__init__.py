"""``horovod.tensorflow`` with Horovod's own semantics, on TensorFlow 2.21 with Keras 3 or tf-keras.

One line changes in a Horovod script::

    import horovod.tensorflow as hvd   ->   import smddp_compat.horovod.tensorflow as hvd

Every name is Horovod's own (``hvd.alltoall``, ``hvd.ProcessSet``, ``hvd.join``, ``hvd.start_timeline``,
``hvd.util``...), read from ``horovod.tensorflow`` when used, so behaviour and errors are Horovod's (for example
``tf.errors.FailedPreconditionError`` when ranks disagree). The exceptions are the names this module defines,
listed with the reason for each in :data:`smddp_compat.horovod.OVERRIDES`.
"""

from smddp_compat.horovod.forward import forward_to
from smddp_compat.horovod.lifecycle import init, shutdown
from smddp_compat.horovod.optimizer import tensorflow_distributed_optimizer as DistributedOptimizer
from smddp_compat.horovod.sync_batch_norm import SyncBatchNormalization
from smddp_compat.horovod.tape import DistributedGradientTape, PartialDistributedGradientTape
from smddp_compat.horovod.variables import broadcast_variables
from smddp_compat.horovod.tensorflow import elastic

__getattr__, __dir__, __all__ = forward_to(
    globals(),
    "horovod.tensorflow",
    overrides=("init", "shutdown", "broadcast_variables", "DistributedGradientTape",
               "PartialDistributedGradientTape", "DistributedOptimizer", "SyncBatchNormalization", "elastic"),
    submodules=("compression", "functions", "gradient_aggregation", "gradient_aggregation_eager", "mpi_ops",
                "sync_batch_norm", "util"),
)
