"""SageMaker-contract training scripts (this folder) and the modules they share (``common/``).

Scripts, the files a user passes as ``ENTRY_POINT`` (``smddp local SCRIPT --source-dir entry_points``, an estimator's
``entry_point`` with ``source_dir="entry_points"``) or runs as ``python entry_points/<script>.py [--name value ...]``
(by ``smddprun``, in local mode or on SageMaker; every hyperparameter has a default):

* ``smddp_mnist``: the SMDDP API (``smddp_compat.tensorflow`` as ``sdp``), a custom training loop; what ``smddp
  local`` runs when given no ENTRY_POINT.
* ``horovod_mnist``: the Horovod API, Keras ``fit``.
* ``keras_mwms``: Keras ``fit`` under a ``tf.distribute`` strategy chosen by ``--strategy``: ``mirrored``,
  ``central_storage`` (one host each), ``multi_worker_mirrored`` (one host or several), ``auto`` (the default:
  MultiWorkerMirrored across hosts, else Mirrored).
* ``parameter_server_mnist``: ``ParameterServerStrategy`` under SageMaker's ``parameter_server`` distribution.
* ``dtensor_sentiment`` (data-, model- or spatial-parallel tf-idf MLP) and ``dtensor_mnist_core`` (Core API MLP,
  hand-written Adam): DTensor.

``common`` (``smddp_compat.entry_points.common``): the modules the scripts share (datasets, the SageMaker contract as a
script sees it, checkpoints, models, TensorBoard summaries, the DTensor helpers; see its docstring). The scripts import
them by their installed names (``smddp_compat.entry_points.common.<module>``), so they come from the installed kit (the
kit's image has it; a plain checkout is found by the scripts' first lines), not from the job's source folder.

Importing this package imports none of them.
"""

__all__ = [
    "common", "dtensor_mnist_core", "dtensor_sentiment", "horovod_mnist", "keras_mwms", "parameter_server_mnist",
    "smddp_mnist",
]
