"""smdistributed.dataparallel alias provided by smddp-compat (backed by Horovod)."""

__version__ = "smddp-compat"
