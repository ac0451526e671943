"""``horovod.tensorflow.keras`` with Horovod's own semantics, on TensorFlow 2.21 with Keras 3 or tf-keras.

One line changes in a Horovod Keras script::

    import horovod.tensorflow.keras as hvd   ->   import smddp_compat.horovod.tensorflow.keras as hvd

Every name is Horovod's own, read from ``horovod.tensorflow.keras`` when used, except the names this module
defines, listed with the reason for each in :data:`smddp_compat.horovod.OVERRIDES`.
"""

from smddp_compat.horovod.forward import forward_to
from smddp_compat.horovod.lifecycle import init, shutdown
from smddp_compat.horovod.load_model import load_model
from smddp_compat.horovod.optimizer import DistributedOptimizer, PartialDistributedOptimizer
from smddp_compat.horovod.tensorflow.keras import callbacks, elastic

__getattr__, __dir__, __all__ = forward_to(
    globals(),
    "horovod.tensorflow.keras",
    overrides=("init", "shutdown", "DistributedOptimizer", "PartialDistributedOptimizer", "load_model",
               "callbacks", "elastic"),
)
