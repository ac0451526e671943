"""The SMDDP face under Keras's module name (its names, SMDDP's semantics).

Horovod Keras scripts use the Horovod face, with Horovod's semantics:
``import horovod.tensorflow.keras as hvd`` -> ``import smddp_compat.horovod.tensorflow.keras as hvd``."""

from smddp_compat.tensorflow import *  # noqa: F401,F403
from smddp_compat.tensorflow import __all__  # noqa: F401
