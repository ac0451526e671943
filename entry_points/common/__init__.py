"""The modules the entry-point scripts share (``smddp_compat.entry_points.common``).

* ``datasets``: offline MNIST and Rotten Tomatoes, and SageMaker data channels (no TensorFlow).
* ``sagemaker_contract``: the SageMaker training-container contract as a script sees it: directories,
  hyperparameters, metric lines, failure file, SIGTERM (no TensorFlow).
* ``errors``: the scripts' error classes (`EntryPointError` and its kinds).
* ``checkpoints``: atomic TensorFlow checkpoints, written by one process.
* ``keras_flavor``: the differences between Keras 3 and tf-keras the scripts meet.
* ``mnist_model``: the MNIST CNN.
* ``model_artifacts``: the servable model and weight digests.
* ``resumable_fit``: Keras ``fit`` with step checkpoints and mid-epoch resume.
* ``tensorboard_summaries``: TensorBoard scalars from rank 0 / the chief.
* ``dtensor_mesh``, ``dtensor_layers``, ``dtensor_optimizers``, ``dtensor_training``, ``dtensor_export``: the DTensor
  mesh, layers, optimizer, training loop and SavedModel export.

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
