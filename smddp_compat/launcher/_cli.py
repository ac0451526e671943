"""``smddprun``: starts the ranks of a data-parallel job on this machine, like ``horovodrun`` and SMDDP's launcher.

    smddprun -np 2 python train.py --epochs 3
    smddprun -np 4 -H localhost:4 --timeout 600 python train.py
    mpirun -np 16 --host algo-1:8,algo-2:8 smddprun python -m mpi4py train.py    (as SageMaker runs it)

Each rank gets Horovod's environment (rank, size, local and cross rank, rendezvous), the ``smdistributed`` alias on
``PYTHONPATH`` (so an unchanged SMDDP script imports smddp_compat), and its output prefixed with ``[rank]``.
When a rank fails, the others are stopped within seconds and smddprun exits with that rank's code.

Started by mpirun without ``-np``, smddprun is one rank: it prepares that rank and becomes the command
(see :mod:`smddp_compat.launcher._per_rank`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from typing import Sequence

from smddp_compat.errors import SmddpError, UsageError
from smddp_compat.launcher._console import tensorflow_log_filter
from smddp_compat.launcher._hosts import (
    assign_ranks,
    is_this_machine,
    oversubscription_warning,
    parse_hosts,
    usable_cores,
)
from smddp_compat.launcher._per_rank import exec_rank, launched_by_mpi
from smddp_compat.launcher._rank_settings import stall_directory, stall_env, stall_watchdog_env, with_shim_on_path
from smddp_compat.launcher._rendezvous import DEFAULT_GLOO_TIMEOUT_SECONDS, HorovodRendezvous, HostSlots
from smddp_compat.launcher._supervisor import GroupResult, ProcessSpec, run_process_group

#: Seconds between SIGTERM and SIGKILL when the ranks are stopped (``--grace``).
DEFAULT_GRACE_SECONDS = 5.0

__all__ = [
    "main",
    "build_parser",
    "rank_specs",
    "with_shim_on_path",
    "stall_env",
    "stall_watchdog_env",
    "stall_directory",
]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``smddprun``."""
    parser = argparse.ArgumentParser(
        prog="smddprun",
        description="Run a data-parallel TensorFlow job (SMDDP or Horovod API) as N ranks on this machine.",
    )
    parser.add_argument(
        "-np",
        "--num-proc",
        dest="num_proc",
        type=int,
        default=None,
        help="number of ranks to start (required, except for a rank started by mpirun)",
    )
    parser.add_argument(
        "-H", "--hosts", default=None, help="host:slots[,host:slots...] (hosts must be this machine; default localhost:N)"
    )
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--gloo", dest="engine", action="store_const", const="gloo", help="Gloo controller (default)")
    engine.add_argument("--mpi", dest="engine", action="store_const", const="mpi", help="MPI controller via mpirun")
    parser.add_argument("--timeout", type=_positive_float, default=None, help="stop the job after this many seconds")
    parser.add_argument(
        "--grace",
        type=_positive_float,
        default=None,
        help=f"seconds between SIGTERM and SIGKILL when stopping ranks (default {DEFAULT_GRACE_SECONDS:g})",
    )
    parser.add_argument(
        "--gloo-timeout",
        type=_positive_float,
        default=None,
        help=f"seconds a rank waits for its peers in Gloo before failing (default {DEFAULT_GLOO_TIMEOUT_SECONDS})",
    )
    parser.add_argument(
        "--stall-check-seconds",
        type=_positive_float,
        default=None,
        help="warn about ranks missing from a collective after this many seconds (default 60)",
    )
    parser.add_argument(
        "--stall-shutdown-seconds",
        type=_positive_float,
        default=None,
        help="end the job when a rank waits this many seconds in one collective (default: never)",
    )
    parser.add_argument(
        "--no-shim", action="store_true", help="do not put the smdistributed alias on PYTHONPATH"
    )
    parser.add_argument("--log-dir", default=None, help="also write each rank's output to LOG_DIR/rank.N.log")
    parser.add_argument(
        "--show-tf-logs",
        action="store_true",
        help="show TensorFlow's C++ log lines on the console (hidden by default, unless TF_CPP_MIN_LOG_LEVEL is "
        "set; --log-dir files always keep them)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program to run and its arguments")
    return parser


def _resolve_hosts(args: argparse.Namespace) -> list[HostSlots]:
    if args.num_proc < 1:
        raise UsageError(f"-np must be at least 1, got {args.num_proc}: give the number of ranks to start.")
    hosts = parse_hosts(args.hosts) if args.hosts else [HostSlots("localhost", args.num_proc)]
    for host in hosts:
        if is_this_machine(host.name) is None:
            raise UsageError(
                f"host {host.name!r} in -H is not this machine: smddprun starts ranks on this machine only. "
                "Use localhost (or run multi-host jobs with `smddp local` or on SageMaker)."
            )
    return assign_ranks(hosts, args.num_proc)


def rank_specs(
    command: Sequence[str], base_env: dict[str, str], rank_envs: list[dict[str, str]], log_dir: str | None
) -> list[ProcessSpec]:
    """One ProcessSpec per rank: the same command, the base environment plus that rank's variables."""
    specs = []
    for env in rank_envs:
        rank = env["HOROVOD_RANK"]
        specs.append(
            ProcessSpec(
                argv=list(command),
                env={**base_env, **env},
                label=rank,
                log_path=os.path.join(log_dir, f"rank.{rank}.log") if log_dir else None,
                host=env.get("HOROVOD_HOSTNAME", "localhost"),
            )
        )
    return specs


def _mpirun_argv(num_proc: int, hosts: list[HostSlots], env_names: list[str], command: Sequence[str]) -> list[str]:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise UsageError(
            "--mpi needs mpirun, which is not on PATH: install Debian's openmpi-bin (setup.sh does) or use --gloo."
        )
    argv = [mpirun, "-np", str(num_proc), "-H", ",".join(f"localhost:{h.slots}" for h in hosts)]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["--bind-to", "none", "--map-by", "slot", "--tag-output", "--mca", "btl", "self,vader"]
    # Ranks share the CPU with their Horovod background threads and TensorFlow's pools: without yielding, a rank
    # waiting in an MPI call spins and takes the core its peer needs (bench: 64 MB allreduce 2.2x slower on 2 cores).
    argv += ["--mca", "mpi_yield_when_idle", "1"]
    for name in env_names:
        argv += ["-x", name]
    return argv + list(command)


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("smddprun needs a command to run, e.g. `smddprun -np 2 python train.py`.")
    return command


def _run(args: argparse.Namespace, command: list[str]) -> GroupResult:
    hosts = _resolve_hosts(args)
    crowded = oversubscription_warning(args.num_proc, usable_cores())
    if crowded:
        print(f"smddprun: warning: {crowded}", file=sys.stderr)
    base_env = with_shim_on_path(dict(os.environ), enabled=not args.no_shim)
    base_env.update(stall_env(args.stall_check_seconds, args.stall_shutdown_seconds))
    with stall_directory() as directory:
        base_env.update(stall_watchdog_env(args.stall_check_seconds, args.stall_shutdown_seconds, directory))
        return _launch(args, command, hosts, base_env)


def _launch(
    args: argparse.Namespace, command: list[str], hosts: list[HostSlots], base_env: dict[str, str]
) -> GroupResult:
    grace = args.grace if args.grace is not None else DEFAULT_GRACE_SECONDS
    if args.engine == "mpi":
        mpi_env = {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"}
        env = {**base_env, **mpi_env}
        names = sorted(n for n in env if n.startswith(("HOROVOD_", "PYTHONPATH", "TF_", "SM_", "SMDDP_")))
        spec = ProcessSpec(
            argv=_mpirun_argv(args.num_proc, hosts, names, command),
            env=env,
            label="mpirun",
            log_path=os.path.join(args.log_dir, "mpirun.log") if args.log_dir else None,
        )
        return run_process_group(_quiet([spec], args), timeout=args.timeout, grace=grace)
    gloo_timeout = args.gloo_timeout if args.gloo_timeout is not None else float(DEFAULT_GLOO_TIMEOUT_SECONDS)
    with HorovodRendezvous(hosts, timeout=gloo_timeout) as rendezvous:
        specs = rank_specs(command, base_env, rendezvous.rank_envs(), args.log_dir)
        return run_process_group(_quiet(specs, args), timeout=args.timeout, grace=grace)


def _quiet(specs: list[ProcessSpec], args: argparse.Namespace) -> list[ProcessSpec]:
    """``specs`` whose console output leaves out TensorFlow's C++ log lines, unless the user wants them."""
    return [dataclasses.replace(s, console_hides=tensorflow_log_filter(s.env, show=args.show_tf_logs)) for s in specs]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smddprun`` console script.

    With ``-np`` it starts the ranks; without it, under mpirun, it becomes this rank's command and never returns.

    Returns:
        0 when every rank succeeded, else the failed rank's exit code (124 on timeout, 128+N on signal N);
        2 for a usage error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        command = _command(args)
        if args.num_proc is None:
            if not launched_by_mpi(os.environ):
                raise UsageError(
                    "smddprun needs -np N (the number of ranks to start), e.g. `smddprun -np 2 python train.py`; "
                    "only a rank started by mpirun runs without it."
                )
            exec_rank(command, args)
        result = _run(args, command)
    except SmddpError as exc:
        print(f"smddprun: error: {exc}", file=sys.stderr)
        return 2
    if not result.ok:
        print(f"smddprun: job failed after {result.duration:.1f} s: {result.reason}", file=sys.stderr)
    return result.exit_code
