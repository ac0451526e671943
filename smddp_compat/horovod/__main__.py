"""``python -m smddp_compat.horovod``: prints the table of what the Horovod face overrides and why."""

from smddp_compat.horovod import overrides_table

print(overrides_table())
