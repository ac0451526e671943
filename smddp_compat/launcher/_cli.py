"""``smddprun``: starts the ranks of a data-parallel job on this machine, like ``horovodrun`` and SMDDP's launcher.

    smddprun -np 2 python train.py --epochs 3
    smddprun -np 4 -H localhost:4 --timeout 600 python train.py

Each rank gets Horovod's environment (rank, size, local and cross rank, rendezvous), the ``smdistributed`` alias on
``PYTHONPATH`` (so an unchanged SMDDP script imports smddp_compat), and its output prefixed with ``[rank]``.
When a rank fails, the others are stopped within seconds and smddprun exits with that rank's code.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
from typing import Iterator, Sequence

from smddp_compat import smdistributed_shim
from smddp_compat.errors import SmddpError, UsageError
from smddp_compat.launcher._console import tensorflow_log_filter
from smddp_compat.launcher._hosts import (
    assign_ranks,
    is_this_machine,
    oversubscription_warning,
    parse_hosts,
    usable_cores,
)
from smddp_compat.launcher._rendezvous import DEFAULT_GLOO_TIMEOUT_SECONDS, HorovodRendezvous, HostSlots
from smddp_compat.launcher._supervisor import GroupResult, ProcessSpec, run_process_group

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
    parser.add_argument("-np", "--num-proc", dest="num_proc", type=int, required=True, help="number of ranks")
    parser.add_argument(
        "-H", "--hosts", default=None, help="host:slots[,host:slots...] (hosts must be this machine; default localhost:N)"
    )
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--gloo", dest="engine", action="store_const", const="gloo", help="Gloo controller (default)")
    engine.add_argument("--mpi", dest="engine", action="store_const", const="mpi", help="MPI controller via mpirun")
    parser.add_argument("--timeout", type=_positive_float, default=None, help="stop the job after this many seconds")
    parser.add_argument(
        "--grace", type=_positive_float, default=5.0, help="seconds between SIGTERM and SIGKILL when stopping ranks"
    )
    parser.add_argument(
        "--gloo-timeout",
        type=_positive_float,
        default=float(DEFAULT_GLOO_TIMEOUT_SECONDS),
        help="seconds a rank waits for its peers in Gloo before failing",
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
    parser.set_defaults(engine="gloo")
    return parser


def with_shim_on_path(env: dict[str, str], *, enabled: bool = True, stream=sys.stderr) -> dict[str, str]:
    """Returns ``env`` with the smdistributed alias first on PYTHONPATH, unless a real SMDDP is installed."""
    if not enabled:
        return env
    existing = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    real = smdistributed_shim.real_smddp_location(existing + sys.path)
    if real:
        print(
            f"smddprun: a real smdistributed.dataparallel is installed at {real}; using it "
            "(the smddp_compat alias is not put on PYTHONPATH).",
            file=stream,
        )
        return env
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([smdistributed_shim.path(), *existing])
    return out


def stall_env(check_seconds: float | None, shutdown_seconds: float | None) -> dict[str, str]:
    """Horovod's stall-inspector variables for the given limits (empty when both are None)."""
    env: dict[str, str] = {}
    if check_seconds is not None:
        env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(int(max(1, check_seconds)))
    if shutdown_seconds is not None:
        if check_seconds is None:
            env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(int(max(1, shutdown_seconds / 2)))
        env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = str(int(max(1, shutdown_seconds)))
    return env


def stall_watchdog_env(
    check_seconds: float | None, shutdown_seconds: float | None, directory: str
) -> dict[str, str]:
    """The variables of smddp_compat's stall watchdog (see smddp_compat.tensorflow._stall) for every rank.

    Horovod's own stall inspector is inert under the Gloo controller (Horovod 0.28.1), so the watchdog does the
    warning and the shutdown; the HOROVOD_STALL_* variables are still set (they work under ``--mpi``).

    Args:
        check_seconds: Warn after this many seconds in one collective (None: the watchdog's default, 60).
        shutdown_seconds: End a rank after this many seconds in one collective (None: never).
        directory: The status directory shared by the ranks.

    Returns:
        SMDDP_STALL_DIR, and SMDDP_STALL_WARNING_SECONDS / SMDDP_STALL_TIMEOUT_SECONDS when given.

    Raises:
        UsageError: ``shutdown_seconds`` is shorter than ``check_seconds``.
    """
    if check_seconds is not None and shutdown_seconds is not None and shutdown_seconds < check_seconds:
        raise UsageError(
            f"--stall-shutdown-seconds {shutdown_seconds:g} is shorter than --stall-check-seconds {check_seconds:g}: "
            "the warning comes first; raise --stall-shutdown-seconds or lower --stall-check-seconds."
        )
    env = {"SMDDP_STALL_DIR": directory}
    if check_seconds is not None:
        env["SMDDP_STALL_WARNING_SECONDS"] = f"{check_seconds:g}"
    elif shutdown_seconds is not None:
        env["SMDDP_STALL_WARNING_SECONDS"] = f"{shutdown_seconds / 2:g}"
    if shutdown_seconds is not None:
        env["SMDDP_STALL_TIMEOUT_SECONDS"] = f"{shutdown_seconds:g}"
    return env


@contextlib.contextmanager
def stall_directory() -> Iterator[str]:
    """A fresh status directory for the stall watchdog, removed with everything in it at the end."""
    directory = tempfile.mkdtemp(prefix="smddp-stall-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


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


def _run(args: argparse.Namespace) -> GroupResult:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("smddprun needs a command to run, e.g. `smddprun -np 2 python train.py`.")
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
        return run_process_group(_quiet([spec], args), timeout=args.timeout, grace=args.grace)
    with HorovodRendezvous(hosts, timeout=args.gloo_timeout) as rendezvous:
        specs = rank_specs(command, base_env, rendezvous.rank_envs(), args.log_dir)
        return run_process_group(_quiet(specs, args), timeout=args.timeout, grace=args.grace)


def _quiet(specs: list[ProcessSpec], args: argparse.Namespace) -> list[ProcessSpec]:
    """``specs`` whose console output leaves out TensorFlow's C++ log lines, unless the user wants them."""
    return [dataclasses.replace(s, console_hides=tensorflow_log_filter(s.env, show=args.show_tf_logs)) for s in specs]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smddprun`` console script.

    Returns:
        0 when every rank succeeded, else the failed rank's exit code (124 on timeout, 128+N on signal N).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = _run(args)
    except SmddpError as exc:
        print(f"smddprun: error: {exc}", file=sys.stderr)
        return 2
    if not result.ok:
        print(f"smddprun: job failed after {result.duration:.1f} s: {result.reason}", file=sys.stderr)
    return result.exit_code
