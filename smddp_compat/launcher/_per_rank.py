"""``smddprun`` as one rank of an ``mpirun`` job: prepare this process, then become the command.

SageMaker's training toolkit (``sagemaker_training.smdataparallel``) starts SMDDP jobs as

    mpirun --host algo-1:8,algo-2:8 -np 16 ... -x SMDATAPARALLEL_USE_HOMOGENEOUS=1 ... \\
        smddprun python -m mpi4py train.py --epochs 3

so ``smddprun`` runs once per rank, under mpirun, without ``-np``. It then starts no ranks: it gives this rank what
the launcher gives its ranks (the ``smdistributed`` alias on ``PYTHONPATH``, the stall watchdog, Horovod on the MPI
controller) and replaces itself with the command (``execvpe``), so mpirun supervises the real process and its exit
code and signals reach mpirun unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Mapping, NoReturn, Sequence

from smddp_compat.cluster import GLOO_RANK_VARIABLES, horovod_mpi_environment
from smddp_compat.errors import UsageError
from smddp_compat.launcher._mpi_group import load_rank_spec, record_process_group
from smddp_compat.launcher._rank_settings import stall_env, stall_watchdog_env, with_job_startup, with_shim_on_path

__all__ = [
    "MPI_RANK_MARKERS", "MPI_THREAD_LEVEL_VARIABLE", "launched_by_mpi", "mpi_job_directory", "mpi_rank",
    "rank_environment", "exec_rank", "ALLREDUCE_RULES", "allreduce_rules_environment",
]

#: Variables an MPI launcher gives each process it starts: Open MPI (``mpirun``), MPICH/Intel MPI (Hydra's PMI).
MPI_RANK_MARKERS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")
# Prefixes of the variables through which an MPI launcher reaches its ranks (kept when a rank spec replaces the
# rest of the environment).
_MPI_VARIABLE_PREFIXES = ("OMPI_", "PMIX_", "OPAL_", "PMI_", "HYDRA_", "MPI_LOCAL")

#: glibc's tunables variable; the wrapper asks glibc to back large allocations with transparent huge pages unless
#: the user set tunables of their own. A fresh allreduce output (64 MB) then faults in 2 MB pages instead of 4 KB
#: ones: bench (profile) measured a 64 MB Horovod/MPI allreduce 0.79x as long with it.
MALLOC_TUNABLES_VARIABLE = "GLIBC_TUNABLES"
MALLOC_HUGE_PAGES = "glibc.malloc.hugetlb=1"

#: Open MPI's allreduce algorithm by message size (``coll_tuned`` dynamic rules, Open MPI 4.1's file format): on 2
#: and 3 ranks from 4 MB up the segmented ring (algorithm 5) in 1 MB segments, below 4 MB Open MPI's own choice
#: (algorithm 0); from 4 ranks up Open MPI's own choice at every size (not measured here). Open MPI's own choice for
#: a large 2-rank allreduce is the unsegmented ring: each half goes through memory whole (32 MB, beyond the caches),
#: where 1 MB segments are reduced while they are still in the cache. bench (bandwidth, "Open MPI's own allreduce
#: algorithm" row) measured a 64 MB 2-rank Horovod/MPI allreduce about 1.4x faster with it under load (MPI alone
#: 2x); 1 KB is unchanged (below the threshold).
ALLREDUCE_RULES = """\
1
2
2
2
2
0 0 0 0
4194304 5 0 1048576
4
1
0 0 0 0
"""
# ^ 1 collective; its id (2: allreduce); 2 communicator sizes. From 2 ranks: 2 message sizes, each line: from this
#   many bytes, algorithm, fan-in/out (0: default), segment bytes (0: none). From 4 ranks: 1 message size.
_COLL_TUNED_PREFIX = "OMPI_MCA_coll_tuned_"

#: mpi4py's setting of the thread level it asks MPI_Init_thread for. Horovod's MPI controller runs collectives on
#: its own background thread, so when mpi4py initializes MPI first (``python -m mpi4py``) it must ask for
#: MPI_THREAD_MULTIPLE (mpi4py's default; a user's ``serialized``/``single`` would crash Horovod later).
MPI_THREAD_LEVEL_VARIABLE = "MPI4PY_RC_THREAD_LEVEL"

# Options of smddprun that belong to a launch (-np); under mpirun, mpirun's own options do these jobs.
_LAUNCH_ONLY_OPTIONS = {
    "hosts": ("-H", "mpirun --host"),
    "timeout": ("--timeout", "the job's own time limit (SageMaker's max_run, or `timeout` around mpirun)"),
    "grace": ("--grace", "mpirun's signal forwarding"),
    "gloo_timeout": ("--gloo-timeout", "nothing: ranks under mpirun use the MPI controller, not Gloo"),
    "log_dir": ("--log-dir", "mpirun --output-filename DIR"),
}


def launched_by_mpi(environ: Mapping[str, str]) -> bool:
    """True when this process is a rank started by an MPI launcher (Open MPI's mpirun, or a PMI launcher)."""
    return any(marker in environ for marker in MPI_RANK_MARKERS)


def mpi_job_directory(environ: Mapping[str, str]) -> str | None:
    """A folder the ranks of this MPI job on this host share, which the MPI launcher removes when the job ends.

    Open MPI gives every job a session directory (``/tmp/ompi.<host>.<uid>/pid.<mpirun pid>``), the same for all
    ranks on a host; the stall watchdog's status files go there, so nothing is left behind.

    Returns:
        That directory, or None when the launcher gives none (then the watchdog runs without naming missing ranks).
    """
    session = environ.get("OMPI_MCA_orte_jobfam_session_dir")
    job_id = environ.get("OMPI_MCA_ess_base_jobid")
    if session and job_id and os.path.isdir(session):
        return os.path.join(session, f"smddp-stall-{job_id}")
    return None


def allreduce_rules_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The Open MPI variables that give this rank the kit's allreduce algorithms (:data:`ALLREDUCE_RULES`).

    The rules go into a file in the job's Open MPI session directory (the same on every rank of a host, removed by
    mpirun at the end; every rank writes the same bytes, atomically). Nothing is set when the user chose collective
    settings of their own (any ``OMPI_MCA_coll_tuned_*`` variable, also what ``mpirun --mca coll_tuned_...`` passes
    to its ranks), or when no Open MPI launcher started this rank (no session directory: the variables would not
    apply).

    Returns:
        ``OMPI_MCA_coll_tuned_use_dynamic_rules`` and ``OMPI_MCA_coll_tuned_dynamic_rules_filename``, or nothing.
    """
    if any(name.startswith(_COLL_TUNED_PREFIX) for name in environ):
        return {}
    session = environ.get("OMPI_MCA_orte_jobfam_session_dir")
    job_id = environ.get("OMPI_MCA_ess_base_jobid", "job")
    if not session or not os.path.isdir(session):
        return {}
    path = os.path.join(session, f"smddp-allreduce-rules-{job_id}.conf")
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="ascii") as handle:
        handle.write(ALLREDUCE_RULES)
    os.replace(temporary, path)
    return {f"{_COLL_TUNED_PREFIX}use_dynamic_rules": "1", f"{_COLL_TUNED_PREFIX}dynamic_rules_filename": path}


def _reject_launch_options(args: argparse.Namespace) -> None:
    for attribute, (option, instead) in _LAUNCH_ONLY_OPTIONS.items():
        if getattr(args, attribute) is not None:
            raise UsageError(
                f"{option} {getattr(args, attribute)} applies when smddprun starts the ranks itself (with -np); "
                f"here mpirun started this rank (OMPI_COMM_WORLD_RANK/PMI_RANK is set). Remove {option} or use "
                f"{instead}."
            )
    if args.parameter_servers:
        raise UsageError(
            f"--parameter-servers {args.parameter_servers} applies when smddprun starts the job itself (with -np); "
            "here mpirun started this rank. Start a ParameterServerStrategy job with `smddprun -np N "
            "--parameter-servers P ...`, or with SageMaker's parameter_server distribution.")
    if args.engine == "gloo":
        raise UsageError(
            "--gloo was given, but mpirun started this rank: ranks under mpirun use Horovod's MPI controller. "
            "Remove --gloo, or start the job with `smddprun -np N --gloo ...` instead of mpirun."
        )


def rank_environment(
    environ: Mapping[str, str], args: argparse.Namespace, *, stream: IO[str] = sys.stderr
) -> dict[str, str]:
    """The environment this rank's command runs with: ``environ`` (set by mpirun) without any Gloo launch variable,
    with Horovod's MPI controller and CPU operations, the rank variables (HOROVOD_RANK, _SIZE, _LOCAL_RANK,
    _LOCAL_SIZE) as MPI numbered this rank, large allocations on huge pages (``GLIBC_TUNABLES``, unless set), Open
    MPI's allreduce algorithms of :data:`ALLREDUCE_RULES` (unless the user set ``coll_tuned`` settings), the
    ``smdistributed`` alias first on ``PYTHONPATH`` (unless a real SMDDP is installed, or ``--no-shim``; a note about
    a real one goes to ``stream``) and the kit's job start-up before it (:func:`with_job_startup`), mpi4py asking for MPI_THREAD_MULTIPLE, and the stall settings of ``args``.

    Raises:
        UsageError: A launch-only option was given, or mpi4py is set to a thread level Horovod cannot use, or the
            stall limits contradict each other.
    """
    _reject_launch_options(args)
    thread_level = environ.get(MPI_THREAD_LEVEL_VARIABLE, "multiple").strip().lower()
    if thread_level != "multiple":
        raise UsageError(
            f"{MPI_THREAD_LEVEL_VARIABLE}={environ[MPI_THREAD_LEVEL_VARIABLE]!r}: Horovod's MPI controller calls MPI "
            "from its own thread and needs MPI_THREAD_MULTIPLE; unset it or set it to 'multiple'."
        )
    env = {name: value for name, value in environ.items() if name not in GLOO_RANK_VARIABLES}
    env.update(horovod_mpi_environment(environ))
    env[MPI_THREAD_LEVEL_VARIABLE] = "multiple"
    env.setdefault(MALLOC_TUNABLES_VARIABLE, MALLOC_HUGE_PAGES)
    env.update(allreduce_rules_environment(environ))
    env = with_shim_on_path(env, enabled=not args.no_shim, stream=stream)
    env = with_job_startup(env)
    env.update(stall_env(args.stall_check_seconds, args.stall_shutdown_seconds))
    directory = environ.get("SMDDP_STALL_DIR") or mpi_job_directory(environ)
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
        env.update(stall_watchdog_env(args.stall_check_seconds, args.stall_shutdown_seconds, directory))
    return env


def mpi_rank(environ: Mapping[str, str]) -> int:
    """This process's rank in the MPI job (``OMPI_COMM_WORLD_RANK`` or ``PMI_RANK``).

    Raises:
        UsageError: No MPI launcher started this process.
    """
    for marker in MPI_RANK_MARKERS:
        if environ.get(marker, "").isdigit():
            return int(environ[marker])
    raise UsageError(
        "--rank-specs is for ranks started by mpirun (OMPI_COMM_WORLD_RANK or PMI_RANK must be set); "
        "start jobs with `smddprun -np N --mpi ...`."
    )


def exec_rank(command: Sequence[str], args: argparse.Namespace) -> NoReturn:
    """Prepares this rank and replaces this process with ``command`` (never returns).

    With ``--rank-specs DIR`` (smddprun's own MPI engine), the command, environment and working directory are
    this rank's spec in DIR, plus the variables through which mpirun reaches the rank.

    Raises:
        UsageError: As :func:`rank_environment`, or the command cannot be run (not found, not executable).
    """
    environ: Mapping[str, str] = os.environ
    cwd = None
    if args.rank_specs:
        rank = mpi_rank(os.environ)
        command, spec_env, cwd = load_rank_spec(args.rank_specs, rank)
        record_process_group(args.rank_specs, rank)
        environ = {**spec_env, **{k: v for k, v in os.environ.items() if k.startswith(_MPI_VARIABLE_PREFIXES)}}
    env = rank_environment(environ, args)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if cwd:
            os.chdir(cwd)
        os.execvpe(command[0], list(command), env)
    except OSError as exc:
        raise UsageError(
            f"smddprun could not run {command[0]!r} on rank {os.environ.get('OMPI_COMM_WORLD_RANK', '?')}: "
            f"{exc.strerror or exc}. Check the command after smddprun (e.g. `smddprun python -m mpi4py train.py`)."
        ) from exc
