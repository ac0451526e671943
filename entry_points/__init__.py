"""SageMaker-contract training scripts and the modules they share.

Scripts (run as ``python entry_points/<script>.py [--name value ...]``, by ``smddprun``, in local mode or on
SageMaker; every hyperparameter has a default): ``smddp_mnist`` (SMDDP API, custom loop), ``horovod_mnist``
(Horovod API, Keras fit), ``keras_mwms`` (tf.distribute Mirrored / MultiWorkerMirrored), ``dtensor_sentiment``
and ``dtensor_mnist_core`` (DTensor).

Shared modules: ``datasets`` (offline MNIST and Rotten Tomatoes, no TensorFlow), ``sagemaker_contract``
(directories, hyperparameters, metric lines, failure file, SIGTERM; no TensorFlow), ``errors``, ``checkpoints``
(atomic TensorFlow checkpoints), ``keras_flavor`` (Keras 3 / tf-keras differences), ``mnist_model`` (the CNN),
``model_artifacts`` (servable model, weight digests), ``resumable_fit`` (Keras fit with step checkpoints and
mid-epoch resume), ``tensorboard_summaries`` (TensorBoard scalars from rank 0 / the chief), ``dtensor_*`` (DTensor
mesh, layers, optimizer, training loop, export).
Importing this package imports none of them.
"""

__all__ = [
    "checkpoints",
    "datasets",
    "dtensor_export",
    "dtensor_layers",
    "dtensor_mesh",
    "dtensor_optimizers",
    "dtensor_training",
    "errors",
    "keras_flavor",
    "mnist_model",
    "model_artifacts",
    "resumable_fit",
    "sagemaker_contract",
    "tensorboard_summaries",
]
