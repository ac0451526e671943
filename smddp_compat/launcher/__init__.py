"""Launching a job's processes: supervision, Horovod rendezvous, and the ``smddprun`` command.

Importing this package does not import TensorFlow (Horovod's runner is imported only when a rendezvous starts).
"""

from smddp_compat.launcher._cli import main
from smddp_compat.launcher._console import is_tensorflow_log_line, tensorflow_log_filter
from smddp_compat.launcher._hosts import (
    assign_ranks,
    is_this_machine,
    oversubscription_warning,
    parse_hosts,
    usable_cores,
)
from smddp_compat.launcher._ports import reserve_ports
from smddp_compat.launcher._rendezvous import DEFAULT_GLOO_TIMEOUT_SECONDS, HorovodRendezvous, HostSlots
from smddp_compat.launcher._supervisor import GroupResult, ProcessResult, ProcessSpec, run_process_group
from smddp_compat.smdistributed_shim import path as shim_path

__all__ = [
    "DEFAULT_GLOO_TIMEOUT_SECONDS",
    "GroupResult",
    "HorovodRendezvous",
    "HostSlots",
    "ProcessResult",
    "ProcessSpec",
    "assign_ranks",
    "is_tensorflow_log_line",
    "is_this_machine",
    "main",
    "oversubscription_warning",
    "parse_hosts",
    "reserve_ports",
    "run_process_group",
    "shim_path",
    "tensorflow_log_filter",
    "usable_cores",
]
