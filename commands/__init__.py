"""The kit's commands: ``smddp`` (:mod:`.cli`) and its subcommands, ``smddp local`` (:mod:`.local_cli`), ``smddp
tune`` (:mod:`.tune_cli`), ``smddp doctor`` (:mod:`.doctor`), ``smddp install-horovod`` (:mod:`.horovod_install`),
``smddp submit|status|logs|wait|fetch`` (:mod:`.submit_cli`), and the job options the local and submit commands share
(:mod:`.job_options`). Installed as ``smddp_compat.commands``; nothing that runs in a training process imports it,
and a job's code bundle never holds it (``smddprun``, which does run there, is ``smddp_compat.launcher``).
"""
