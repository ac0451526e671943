"""Launching a job's processes: supervision, Horovod rendezvous, and the ``smddprun`` command.

What the kit's other launchers (local mode's backends, the strategies, the bench, the ``smddp`` command) use is
exported here; the modules behind it are the launcher's own.

Importing this package does not import TensorFlow (Horovod's runner is imported only when a rendezvous starts).
"""

from smddp_compat.launcher._cli import main
from smddp_compat.launcher._console import (
    ConsoleStream, TensorFlowLogFilter, is_tensorflow_log_line, release_stdout, tensorflow_log_filter)
from smddp_compat.launcher._engine import ENGINE_VARIABLE, EngineChoice, choose_engine
from smddp_compat.launcher._hosts import (
    assign_ranks, is_this_machine, oversubscription_warning, parse_hosts, usable_cores)
from smddp_compat.launcher._mpi_group import TaggedLines, mpirun_unavailable_reason, run_mpi_group
from smddp_compat.launcher._option_types import (
    MAX_SECONDS, environment_choice, finite_seconds, positive_count, positive_seconds, whole_number)
from smddp_compat.launcher._own_network import (
    JOB_NETWORK_VARIABLE, job_network_choice, own_network_unavailable_reason)
from smddp_compat.launcher._ports import reserve_ports
from smddp_compat.launcher._rank_settings import stall_watchdog_env
from smddp_compat.cluster import HostSlots
from smddp_compat.launcher._rendezvous import DEFAULT_GLOO_TIMEOUT_SECONDS, HorovodRendezvous
from smddp_compat.launcher._supervisor import (
    STOP_SIGNALS, GroupResult, ProcessResult, ProcessSpec, StopSignalled, describe_failure, run_process_group,
    stop_signals_handled, stop_signals_noted, stop_signals_raise)
from smddp_compat.smdistributed_shim import path as shim_path

__all__ = [
    "DEFAULT_GLOO_TIMEOUT_SECONDS", "ENGINE_VARIABLE", "JOB_NETWORK_VARIABLE", "job_network_choice",
    "own_network_unavailable_reason", "MAX_SECONDS", "STOP_SIGNALS", "StopSignalled",
    "stop_signals_handled", "stop_signals_noted", "stop_signals_raise", "ConsoleStream", "EngineChoice", "GroupResult",
    "HorovodRendezvous", "HostSlots", "ProcessResult", "ProcessSpec", "TensorFlowLogFilter", "TaggedLines",
    "assign_ranks", "choose_engine", "describe_failure", "environment_choice", "finite_seconds", "is_tensorflow_log_line", "is_this_machine",
    "main", "mpirun_unavailable_reason", "oversubscription_warning", "parse_hosts", "positive_count",
    "positive_seconds", "release_stdout", "reserve_ports", "run_mpi_group", "run_process_group", "shim_path",
    "stall_watchdog_env", "tensorflow_log_filter", "usable_cores", "whole_number",
]
