"""The modules the entry-point scripts share (``smddp_compat.entry_points.common``).

The SageMaker training-container contract as a script sees it, one module per job (no TensorFlow in them):

* ``training_env``: `TrainingEnv`, where the script reads and writes (``SM_*`` folders, channels, hosts, checkpoint
  and TensorBoard folders and their hyperparameters; local fallbacks for a plain run).
* ``hyperparameters``: `parse_hyperparameters` (SageMaker's ``--name value``) and the argparse types of the values.
* ``metric_lines``: `MetricLogger`'s ``name=value;`` lines and the regular expressions that read them back.
* ``lifecycle``: `run_entry_point` (exceptions become the failure file and a non-zero exit), SIGTERM as a flag
  (`termination_requested`), `write_failure`.

The rest:

* ``datasets``: offline MNIST and Rotten Tomatoes, and SageMaker data channels (no TensorFlow).
* ``errors``: the scripts' error classes (`EntryPointError` and its kinds).
* ``checkpoints``: atomic TensorFlow checkpoints, written by one process.
* ``keras_flavor``: the differences between Keras 3 and tf-keras the scripts meet.
* ``mnist_model``: the MNIST CNN (and the MLP), and their held-out evaluation.
* ``model_artifacts``: the servable model, weight digests and the run's ``metrics.json``.
* ``resumable_fit``: Keras ``fit`` with step checkpoints and mid-epoch resume.
* ``tensorboard_summaries``: TensorBoard scalars from rank 0 / the chief.
* ``dtensor_mesh``, ``dtensor_layers``, ``dtensor_optimizers``, ``dtensor_training``, ``dtensor_export``: the DTensor
  mesh, layers, optimizer, training loop and SavedModel export.

Importing this package imports none of them.
"""

__all__ = [
    "checkpoints", "datasets", "dtensor_export", "dtensor_layers", "dtensor_mesh", "dtensor_optimizers",
    "dtensor_training", "errors", "hyperparameters", "keras_flavor", "lifecycle", "metric_lines", "mnist_model",
    "model_artifacts", "resumable_fit", "tensorboard_summaries", "training_env",
]
