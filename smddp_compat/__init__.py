"""smddp-compat: SageMaker's smdistributed.dataparallel TensorFlow API on Horovod, for TensorFlow 2.21.

``import smddp_compat.tensorflow as sdp`` gives the SMDDP (and Horovod) API; importing this package itself loads
nothing heavy.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
