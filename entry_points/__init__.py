"""SageMaker-contract training scripts (this folder) and the modules they share (``common/``).

See docs/training-scripts.md. Importing this package imports none of them.
"""

__all__ = [
    "common", "dtensor_mnist_core", "dtensor_sentiment", "horovod_mnist", "keras_mwms", "parameter_server_mnist",
    "smddp_mnist",
]
