"""The modules the entry-point scripts share (``smddp_compat.entry_points.common``): the SageMaker contract as a
script sees it, datasets, checkpoints, models, TensorBoard summaries and the DTensor helpers.

See docs/training-scripts.md#the-shared-modules-entry_pointscommon. Importing this package imports none of them.
"""

__all__ = [
    "checkpoints", "datasets", "dtensor_export", "dtensor_layers", "dtensor_mesh", "dtensor_optimizers",
    "dtensor_training", "errors", "hyperparameters", "keras_flavor", "lifecycle", "metric_lines", "mnist_model",
    "model_artifacts", "resumable_fit", "tensorboard_summaries", "training_env",
]
