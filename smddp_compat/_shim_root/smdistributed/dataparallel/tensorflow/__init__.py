"""``smdistributed.dataparallel.tensorflow``, served by smddp_compat.tensorflow (Horovod underneath)."""

from smddp_compat.tensorflow import *  # noqa: F401,F403
from smddp_compat.tensorflow import __all__  # noqa: F401
