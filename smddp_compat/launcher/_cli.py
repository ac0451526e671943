"""``smddprun``: starts the ranks of a data-parallel job on this machine, like ``horovodrun`` and SMDDP's launcher.

    smddprun -np 2 python train.py --epochs 3
    smddprun -np 4 -H localhost:4 --timeout 600 python train.py
    mpirun -np 16 --host algo-1:8,algo-2:8 smddprun python -m mpi4py train.py    (as SageMaker runs it)

Each rank gets Horovod's environment (rank, size, local and cross rank, rendezvous), TensorFlow's (``TF_CONFIG`` of
a MultiWorkerMirroredStrategy worker, the ``DTENSOR_*`` variables of a DTensor client: one loopback port per rank),
the kit's job start-up and the ``smdistributed`` alias on ``PYTHONPATH`` (so an unchanged SMDDP script imports
smddp_compat, and Keras 3 fits under TensorFlow's strategies), and its output prefixed with ``[rank]``. With
``--parameter-servers P`` the job is a ParameterServerStrategy cluster instead: rank 0 the chief, the others its
workers, and P parameter servers. When a rank fails, the others are stopped within seconds and smddprun exits with
that rank's code.

Started by mpirun without ``-np``, smddprun is one rank: it prepares that rank and becomes the command
(see :mod:`smddp_compat.launcher._per_rank`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import tempfile
from typing import Sequence

from smddp_compat.cli_help import help_texts
from smddp_compat.errors import SmddpError, UsageError
from smddp_compat.launcher._console import release_stdout, tensorflow_log_filter
from smddp_compat.launcher._engine import choose_engine
from smddp_compat.launcher._hosts import (
    assign_ranks, is_this_machine, oversubscription_warning, parse_hosts, usable_cores)
from smddp_compat.launcher._mpi_group import run_mpi_group
from smddp_compat.launcher._option_types import positive_seconds, whole_number
from smddp_compat.launcher._own_network import job_network_choice
from smddp_compat.launcher._per_rank import exec_rank, launched_by_mpi
from smddp_compat.launcher._ports import reserve_ports
from smddp_compat.launcher._rank_settings import (
    stall_directory, stall_env, stall_watchdog_env, with_job_startup, with_shim_on_path)
from smddp_compat.cluster import HostSlots, assign, dtensor_environments, endpoints, mwms_tf_config, task_tf_configs
from smddp_compat.launcher._rendezvous import DEFAULT_GLOO_TIMEOUT_SECONDS, HorovodRendezvous
from smddp_compat.launcher._supervisor import (
    GroupResult, ProcessSpec, StopSignalled, run_process_group, stop_signals_raise)

#: Seconds between SIGTERM and SIGKILL when the ranks are stopped (``--grace``).
DEFAULT_GRACE_SECONDS = 5.0

__all__ = [
    "main", "build_parser", "check_log_dir", "rank_specs", "tensorflow_rank_environments", "with_shim_on_path",
    "stall_env", "stall_watchdog_env", "stall_directory",
]

#: Where the servers of TensorFlow's strategies listen: every rank runs on this machine.
LOOPBACK = "127.0.0.1"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``smddprun``."""
    parser = argparse.ArgumentParser(
        prog="smddprun",
        **help_texts(
            """
            Run a distributed TensorFlow job as N ranks on this machine, like horovodrun, SMDDP's launcher and
            torchrun: the SMDDP or Horovod API, or TensorFlow's own strategies. Each rank gets Horovod's
            environment (rank, size, local and cross rank, rendezvous), TF_CONFIG of a MultiWorkerMirroredStrategy
            worker and the DTENSOR_* variables of a DTensor client (one loopback port per rank), the smdistributed
            alias on PYTHONPATH (so an unchanged SMDDP script imports smddp_compat), the kit's start-up (Keras 3
            fits under TensorFlow's strategies), and its output prefixed with [rank]. --parameter-servers P makes
            the job a ParameterServerStrategy cluster: rank 0 is the chief (its exit ends the job), ranks 1..N-1
            its workers, and P parameter servers started by smddprun, all in a network of the job's own. When a
            rank fails, the others are stopped within seconds and smddprun exits with that rank's code.

            The engine is Horovod over MPI (one mpirun, shared memory) when every rank has an idle core, else
            Horovod over Gloo (TCP loopback); --gloo, --mpi or SMDDP_ENGINE=gloo|mpi choose. Started by mpirun
            without -np, smddprun is one rank: it prepares that rank and becomes COMMAND (as SageMaker runs SMDDP
            jobs). Multi-host jobs run with smddp local (on this machine) or on SageMaker.
            """,
            exit_codes=[
                ("0", "every rank succeeded"),
                ("2", "a usage error (nothing was started)"),
                ("124", "--timeout passed: every rank was stopped"),
                ("128+N", "interrupted by signal N (130: Ctrl-C)"),
                ("other", "the exit code of the rank that failed first"),
            ],
            examples=[
                ("2 ranks of an unchanged SMDDP or Horovod script", "smddprun -np 2 python train.py --epochs 3"),
                ("2 MultiWorkerMirroredStrategy workers (or 2 DTensor clients)", "smddprun -np 2 python main.py"),
                ("ParameterServerStrategy: a chief, 2 workers, 2 parameter servers",
                 "smddprun -np 3 --parameter-servers 2 python train.py"),
                ("4 ranks over Gloo, stopped after 10 minutes, each rank's log kept",
                 "smddprun -np 4 --gloo --timeout 600 --log-dir logs/ python train.py"),
                ("as SageMaker starts SMDDP jobs: one smddprun per rank under mpirun",
                 "mpirun -np 16 --host algo-1:8,algo-2:8 smddprun python -m mpi4py train.py"),
            ],
        ),
    )
    parser.add_argument("-np", "--num-proc", dest="num_proc", type=whole_number, default=None, metavar="N",
                        help="number of ranks to start (required, except for a rank started by mpirun)")
    parser.add_argument("-H", "--hosts", default=None, metavar="HOST:SLOTS[,HOST:SLOTS...]",
                        help="the ranks' hosts, which must be this machine's names (default localhost:N)")
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--gloo", dest="engine", action="store_const", const="gloo",
                        help="Horovod over Gloo (TCP loopback)")
    engine.add_argument("--mpi", dest="engine", action="store_const", const="mpi", help="Horovod over MPI via mpirun "
                        "(shared memory; the default when every rank has a core, see SMDDP_ENGINE)")

    def seconds(*names: str, text: str, **extra: str) -> None:
        # Each name its own action (--max-run beside --timeout), so that each name's errors name it alone.
        parser.add_argument(*names, type=positive_seconds, default=None, metavar="SECONDS", help=text, **extra)

    seconds("--timeout", text="the job's time limit: every rank is stopped after it, exit 124 (default: none)")
    seconds("--max-run", dest="timeout", text="the same as --timeout, as smddp local and smddp submit spell it")
    seconds("--grace",
            text=f"seconds between SIGTERM and SIGKILL when stopping ranks (default {DEFAULT_GRACE_SECONDS:g})")
    seconds("--stop-grace", dest="grace", text="the same as --grace, as smddp local spells it")
    seconds("--gloo-timeout",
            text=f"seconds a rank waits for its peers in Gloo before failing (default {DEFAULT_GLOO_TIMEOUT_SECONDS})")
    seconds("--stall-check-seconds",
            text="warn about ranks missing from a collective after this many seconds (default 60)")
    seconds("--stall-shutdown-seconds",
            text="end the job when a rank waits this many seconds in one collective (default: never)")
    parser.add_argument("--parameter-servers", type=whole_number, default=0, metavar="P",
                        help="a ParameterServerStrategy job: rank 0 the chief, ranks 1..N-1 its workers, and P "
                        "parameter servers (default 0: none)")
    parser.add_argument("--no-shim", action="store_true", help="do not put the smdistributed alias on PYTHONPATH")
    parser.add_argument("--log-dir", default=None, metavar="DIR",
                        help="also write each rank's output to DIR/rank.N.log (created when missing)")
    parser.add_argument("--show-tf-logs", action="store_true", help="show TensorFlow's C++ log lines on the console "
                        "(hidden by default, unless TF_CPP_MIN_LOG_LEVEL is set; --log-dir files always keep them)")
    # Internal: a rank of smddprun's own MPI engine reads its command and environment from DIR (_mpi_group).
    parser.add_argument("--rank-specs", metavar="DIR", default=None, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND ...",
                        help="the program to run in every rank, and its arguments")
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
    """One ProcessSpec per rank, in rank order: the same command, the base environment plus that rank's variables."""
    return [ProcessSpec(argv=list(command), env={**base_env, **env}, label=str(rank),
                        log_path=os.path.join(log_dir, f"rank.{rank}.log") if log_dir else None,
                        host=env.get("HOROVOD_HOSTNAME", "localhost"))
            for rank, env in enumerate(rank_envs)]


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("smddprun needs a command to run, e.g. `smddprun -np 2 python train.py`.")
    return command


def _say(text: str) -> None:
    """Prints one of smddprun's own lines on standard error; a closed standard error must not end in a traceback
    (``smddprun ... 2>&1 | head -1``) nor change the exit code, which stays the job's."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def check_log_dir(log_dir: str) -> None:
    """Creates ``log_dir`` when missing and checks that files can be written in it, before any rank starts.

    Permission bits do not tell (root passes ``os.access`` anywhere, a read-only mount refuses even root), so a file
    is really created there and removed at once.

    Raises:
        UsageError: It is a file, lies under a file, or cannot be written.
    """
    try:
        os.makedirs(log_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=log_dir, prefix=".smddprun-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(
            f"--log-dir {log_dir}: the ranks' log files cannot be written there ({exc.strerror or exc}); give a folder "
            "you can write to (it is created when missing), or leave --log-dir out."
        ) from exc


def _run(args: argparse.Namespace, command: list[str]) -> GroupResult:
    hosts = _resolve_hosts(args)
    job_network_choice()  # a bad SMDDP_JOB_NETWORK is refused before anything starts
    if args.log_dir is not None:
        check_log_dir(args.log_dir)
    crowded = oversubscription_warning(args.num_proc, usable_cores())
    if crowded:
        _say(f"smddprun: warning: {crowded}")
    base_env = with_job_startup(with_shim_on_path(dict(os.environ), enabled=not args.no_shim))
    if "TF_CONFIG" in base_env:
        _say("smddprun: TF_CONFIG of this shell is replaced by the job's own (its ranks on loopback ports)")
    base_env.update(stall_env(args.stall_check_seconds, args.stall_shutdown_seconds))
    with stall_directory() as directory:
        base_env.update(stall_watchdog_env(args.stall_check_seconds, args.stall_shutdown_seconds, directory))
        if args.parameter_servers != 0:
            return _launch_parameter_servers(args, command, base_env, scratch=directory)
        return _launch(args, command, hosts, base_env, scratch=directory)


def tensorflow_rank_environments(hosts: Sequence[HostSlots]) -> list[dict[str, str]]:
    """Every rank's TensorFlow variables, in rank order: ``TF_CONFIG`` of a MultiWorkerMirroredStrategy worker and
    the ``DTENSOR_*`` variables of a DTensor client, over one free loopback port per rank (a process serves one of
    the two strategies, so both name the same port)."""
    placements = assign(hosts)
    workers = endpoints(placements, {host.name: LOOPBACK for host in hosts},
                        ports=reserve_ports([LOOPBACK] * len(placements)))
    return [{"TF_CONFIG": json.dumps(mwms_tf_config(workers, p.rank)), **dtensor}
            for p, dtensor in zip(placements, dtensor_environments(placements, workers))]


def _launch_parameter_servers(args: argparse.Namespace, command: list[str], base_env: dict[str, str],
                              scratch: str) -> GroupResult:
    """A ParameterServerStrategy job: rank 0 the chief, the other ranks its workers (the command in both), and
    ``--parameter-servers`` servers (:mod:`smddp_compat.parameter_server`, as SageMaker's toolkit runs them), each
    with its ``TF_CONFIG``, in a network of the job's own. The chief's exit ends the job: the workers and servers,
    which serve until stopped, are then stopped."""
    if args.parameter_servers < 0:
        raise UsageError(f"--parameter-servers must be 0 or more, got {args.parameter_servers}: give the number of "
                         "parameter servers to start (0: no ParameterServerStrategy cluster).")
    if args.num_proc < 2:
        raise UsageError(f"--parameter-servers {args.parameter_servers} needs a chief and at least one worker, but "
                         f"-np is {args.num_proc}: use -np 2 or more (rank 0 is the chief, the others its workers).")
    if args.engine is not None:
        raise UsageError(f"--{args.engine} chooses Horovod's engine, which a ParameterServerStrategy job does not use: "
                         "drop it, or drop --parameter-servers for a Horovod job.")
    ports = iter(reserve_ports([LOOPBACK] * (args.num_proc + args.parameter_servers)))
    cluster = {"chief": [f"{LOOPBACK}:{next(ports)}"],
               "worker": [f"{LOOPBACK}:{next(ports)}" for _ in range(args.num_proc - 1)],
               "ps": [f"{LOOPBACK}:{next(ports)}" for _ in range(args.parameter_servers)]}
    server = [sys.executable, "-m", "smddp_compat.parameter_server"]
    specs = []
    for rank, (job, index, env) in enumerate(task_tf_configs(cluster)):
        label = "chief" if job == "chief" else f"{job}:{index}"
        log = os.path.join(args.log_dir, f"{label.replace(':', '.')}.log") if args.log_dir else None
        specs.append(ProcessSpec(argv=server if job == "ps" else list(command), env={**base_env, **env},
                                 label=label, log_path=log, serves=job != "chief"))
    _say(f"smddprun: ParameterServerStrategy: the chief, {args.num_proc - 1} worker(s), {args.parameter_servers} "
         "parameter server(s) on loopback, in a network of the job's own")
    grace = args.grace if args.grace is not None else DEFAULT_GRACE_SECONDS
    return run_process_group(_quiet(specs, args), timeout=args.timeout, grace=grace, remove_if_killed=[scratch],
                             own_network=True)


def _launch(
    args: argparse.Namespace, command: list[str], hosts: list[HostSlots], base_env: dict[str, str], scratch: str
) -> GroupResult:
    grace = args.grace if args.grace is not None else DEFAULT_GRACE_SECONDS
    choice = choose_engine(args.num_proc, args.engine)
    _say(f"smddprun: {choice.describe()}")
    tensorflow = tensorflow_rank_environments(hosts)
    if choice.engine == "mpi":
        names = [{"HOROVOD_HOSTNAME": host.name, **tf_env}
                 for tf_env, host in zip(tensorflow, (host for host in hosts for _ in range(host.slots)))]
        specs = _quiet(rank_specs(command, base_env, names, args.log_dir), args)
        mpirun_log = os.path.join(args.log_dir, "mpirun.log") if args.log_dir else None
        return run_mpi_group(
            specs, timeout=args.timeout, grace=grace, mpirun_log=mpirun_log, console_hides=specs[0].console_hides,
            remove_if_killed=[scratch],
        )
    gloo_timeout = args.gloo_timeout if args.gloo_timeout is not None else float(DEFAULT_GLOO_TIMEOUT_SECONDS)
    with HorovodRendezvous(hosts, timeout=gloo_timeout) as rendezvous:
        rank_envs = [{**horovod, **tf_env} for horovod, tf_env in zip(rendezvous.rank_envs(), tensorflow)]
        specs = rank_specs(command, base_env, rank_envs, args.log_dir)
        return run_process_group(_quiet(specs, args), timeout=args.timeout, grace=grace, remove_if_killed=[scratch])


def _quiet(specs: list[ProcessSpec], args: argparse.Namespace) -> list[ProcessSpec]:
    """``specs`` whose console output leaves out TensorFlow's C++ log lines, unless the user wants them."""
    return [dataclasses.replace(s, console_hides=tensorflow_log_filter(s.env, show=args.show_tf_logs)) for s in specs]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smddprun`` console script.

    With ``-np`` it starts the ranks; without it, under mpirun, it becomes this rank's command and never returns.

    Returns:
        0 when every rank succeeded, else the failed rank's exit code (124 on timeout, 128+N on signal N);
        2 for a usage error. A closed console changes none of these.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with stop_signals_raise():
            return _main(args)
    finally:
        release_stdout()


def _main(args: argparse.Namespace) -> int:
    try:
        if args.rank_specs is not None:
            exec_rank([], args)
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
        _say(f"smddprun: error: {exc}")
        return 2
    except StopSignalled as stopped:
        # A stop signal outside the supervision (before the ranks start, or once they are reaped): none is running.
        _say(f"smddprun: interrupted by {signal.Signals(stopped.signum).name}")
        return 128 + stopped.signum
    except KeyboardInterrupt:
        _say("smddprun: interrupted")
        return 128 + signal.SIGINT
    if not result.ok:
        _say(f"smddprun: job failed after {result.duration:.1f} s: {result.reason}")
    return result.exit_code
