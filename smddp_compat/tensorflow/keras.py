"""Horovod's ``horovod.tensorflow.keras`` names, for scripts that import that module:
``import horovod.tensorflow.keras as hvd`` -> ``import smddp_compat.tensorflow.keras as hvd``."""

from smddp_compat.tensorflow import *  # noqa: F401,F403
from smddp_compat.tensorflow import __all__  # noqa: F401
