"""The ``train.py`` jobs shared by the scaling, start-up and memory measurements.

All run the same script with the same arguments for a given number of processes on this machine, under tf-keras
(so that raw Horovod can run it too), and run every round: their results are compared across jobs.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import default_engine, engine_launcher
from smddp_compat.bench.jobs import Job, JobRun, Launcher

__all__ = ["smddprun_training", "local_mode_training", "horovodrun_training", "ranks_of", "LEGACY_KERAS",
           "FIRST_STEP_MARK"]

LEGACY_KERAS = (("TF_USE_LEGACY_KERAS", "1"),)

#: Rank 0's progress line when its first training step has ended (timed as it reaches the job's output).
FIRST_STEP_MARK = ("first step", r"bench: .* first step done")


def _args(config: BenchConfig, processes: int, api: str) -> tuple[str, ...]:
    warmup, steps = ("1", "3") if config.quick else ("3", "40")
    return ("--api", api, "--warmup", warmup, "--steps", steps, "--batch", "32",
            "--threads", str(config.threads_per_rank(processes)))


def smddprun_training(config: BenchConfig, ranks: int, api: str = "smddp_compat", repeat: bool = False,
                      env: tuple[tuple[str, str], ...] = ()) -> Job:
    """``smddprun -np ranks`` (its default engine for that many ranks) running train.py with ``api``, plus `env`."""
    return Job("train.py", engine_launcher(default_engine(ranks)), ranks, _args(config, ranks, api),
               LEGACY_KERAS + env, repeat=repeat)


def local_mode_training(config: BenchConfig, hosts: int, repeat: bool = False,
                        env: tuple[tuple[str, str], ...] = ()) -> Job:
    """``smddp local`` with ``hosts`` hosts x 1 process (distribution smddp) running train.py, plus ``env``."""
    return Job("train.py", Launcher.LOCAL_MODE, hosts, _args(config, hosts, "smddp_compat"), LEGACY_KERAS + env,
               repeat=repeat, marks=(FIRST_STEP_MARK,))


def horovodrun_training(config: BenchConfig, ranks: int, repeat: bool = False) -> Job:
    """A bare ``horovodrun -np ranks --gloo`` running train.py (smddp_compat API, like the local-mode job)."""
    return Job("train.py", Launcher.HOROVODRUN, ranks, _args(config, ranks, "smddp_compat"), LEGACY_KERAS,
               repeat=repeat, marks=(FIRST_STEP_MARK,))


def ranks_of(runs: list[JobRun]) -> list[tuple[int, dict]]:
    """(round, rank result) for every rank of every successful run."""
    return [(run.round, rank) for run in runs if run.ok for rank in run.ranks]
