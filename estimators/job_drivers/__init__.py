"""The drivers that travel with a job: scripts shipped with its code that run inside the training container, in
place of (or around) the user's script, for what SageMaker's toolkit does not launch (standard library and the
``smddp_compat`` shipped beside them).

- ``dtensor_launch``: the entry point of ``distribution={"dtensor": ...}`` jobs (SDK v2). Sets DTENSOR_JOBS,
  DTENSOR_CLIENT_ID and DTENSOR_JOB_NAME from SM_HOSTS / SM_CURRENT_HOST and starts the user's script.
- ``dtensor_driver``: the SDK v3 driver of :class:`smddp_compat.estimators.sdk3.DTensor` (reuses ``dtensor_launch``).
- ``smddp_driver``: the SDK v3 driver of :class:`smddp_compat.estimators.sdk3.SMDDPCompat`, and through
  ``horovod_driver`` of :class:`~smddp_compat.estimators.sdk3.Horovod`.
- ``mwms_driver``: the SDK v3 driver of :class:`smddp_compat.estimators.sdk3.MultiWorkerMirrored`.
- ``ps_driver``: the SDK v3 driver of :class:`smddp_compat.estimators.sdk3.ParameterServer`.
- ``hyperparameter_args``: what every SDK v3 driver reads (SM_ENTRY_SCRIPT, SM_HPS, SM_DISTRIBUTED_CONFIG).

They are run as scripts (``python dtensor_launch.py ...``), never imported by the estimators package itself.
"""

__all__: list[str] = []
