"""SageMaker-contract training scripts and the modules they share.

Scripts (run as ``python entry_points/<script>.py [--name value ...]``, by ``smddprun``, in local mode or on
SageMaker): ``smddp_mnist``, ``horovod_mnist``, ``keras_mwms``, ``dtensor_sentiment``, ``dtensor_mnist_core``.

Shared modules: ``datasets`` (offline MNIST and Rotten Tomatoes data, no TensorFlow), ``sagemaker_contract``
(directories, hyperparameters, metric lines, failure file, SIGTERM; no TensorFlow), ``checkpoints`` (atomic
TensorFlow checkpoints), ``errors``. Importing this package imports none of them.
"""

__all__ = ["checkpoints", "datasets", "errors", "sagemaker_contract"]
