"""``horovod.keras`` for Keras 3 and tf-keras:
``import horovod.keras as hvd`` -> ``import smddp_compat.horovod.keras as hvd``.

With TensorFlow as Keras's only backend, Horovod's ``horovod.keras`` and ``horovod.tensorflow.keras`` offer the same
functions; this module is :mod:`smddp_compat.horovod.tensorflow.keras` under Horovod's other name.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("smddp_compat.horovod.tensorflow.keras")
