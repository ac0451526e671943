"""Jobs the measurements ask for, and what running one gave back.

A :class:`Job` is one rank program started by one launcher with a number of ranks. Measurements that need the same
job share it: their requests are merged (the union of their ``parts``) and the job runs once per round.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Launcher", "Job", "JobRun", "merge_jobs", "MAIN_JOB"]

MAIN_JOB = "main-job"
"""The program of a LOCAL_MODE or TWIN job that is the README's main job: ``smddp local`` with no entry point (2 hosts,
the SMDDP MNIST script on the offline data), its ``local_options`` added."""


class Launcher(str, enum.Enum):
    """How a job's processes are started."""

    SMDDPRUN_GLOO = "smddprun-gloo"
    SMDDPRUN_MPI = "smddprun-mpi"
    HOROVODRUN = "horovodrun"
    LOCAL_MODE = "smddp-local"
    TWIN = "smddp-local-docker"
    MWMS = "tf-mwms"


@dataclass(frozen=True)
class Job:
    """One run of a rank program.

    Attributes:
        program: File name in ``bench/programs``.
        launcher: How the ranks are started.
        ranks: Number of processes (for LOCAL_MODE: hosts, one process each).
        args: Program arguments (without ``--parts``).
        env: Extra environment variables, as sorted (name, value) pairs.
        parts: The program's parts to run (passed as ``--parts a,b``; empty: the program has no parts).
        repeat: Run in every round (its result is compared with another job's), not only in the first.
        repeat_parts: The parts to run again in later rounds (empty: all of ``parts``).
        local_options: For LOCAL_MODE and TWIN: ``smddp local`` options, e.g. ``("--distribution", "mwms")``
            (default distribution: smddp).
        marks: Output lines to time: (name, regular expression) pairs; the run records when a line matching each
            first appeared in the job's output (``JobRun.marks``).
        rank_results: Whether every rank writes ``rank<N>.json`` (a TWIN job's ranks write inside its containers,
            so it is judged by its exit code and its marks instead).
    """

    program: str
    launcher: Launcher
    ranks: int
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    parts: frozenset[str] = field(default_factory=frozenset)
    repeat: bool = False
    repeat_parts: frozenset[str] = field(default_factory=frozenset)
    local_options: tuple[str, ...] = ()
    marks: tuple[tuple[str, str], ...] = ()
    rank_results: bool = True

    @property
    def key(self) -> tuple[Any, ...]:
        """What identifies the job (parts and repeat left out: they are merged)."""
        return (self.program, self.launcher, self.ranks, self.args, self.env, self.local_options, self.marks)

    @property
    def label(self) -> str:
        """A short unique-enough name for logs, e.g. ``collectives-smddprun-gloo-2``."""
        tag = "-".join(value.replace(",", "+") for name, value in self.args_dict().items()
                       if name in ("--api", "--variant", "--strategy", "--model", "--models"))
        if ("TF_USE_LEGACY_KERAS", "0") in self.env:
            tag += "-keras3"
        for name, value in self.env:  # settings that make it a variant of another job
            if name.startswith("HOROVOD_"):
                tag += f"-{name.removeprefix('HOROVOD_').lower()}-{value}"
            elif name == "SMDDP_HOST_VIEW":
                tag += f"-{value}-view"
        if "--short-toolkit-waits" in self.local_options:
            tag += "-short-waits"
        if "--mlflow" in self.local_options:
            tag += "-tracked"
        base = f"{self.program.removesuffix('.py')}-{self.launcher.value}-{self.ranks}"
        tag = tag.strip("-")
        return f"{base}-{tag}" if tag else base

    def args_dict(self) -> dict[str, str]:
        """``args`` read as ``--name value`` pairs."""
        return {self.args[i]: self.args[i + 1] for i in range(0, len(self.args) - 1, 2)}

    def for_round(self, round_index: int) -> Job:
        """The job as it runs in ``round_index``: later rounds run only ``repeat_parts`` when there are some."""
        if round_index == 0 or not self.repeat_parts:
            return self
        return replace(self, parts=self.repeat_parts)

    def program_argv(self) -> list[str]:
        """The program's arguments, ``--parts`` included."""
        parts = ["--parts", ",".join(sorted(self.parts))] if self.parts else []
        return [*self.args, *parts]


@dataclass
class JobRun:
    """What one run of a job gave.

    Attributes:
        round: The round it ran in (0-based).
        ok: Every rank succeeded and wrote its result.
        reason: Why not, when not ok.
        started: ``time.time()`` just before the launcher was started.
        duration: Seconds until the launcher exited.
        ranks: Each rank's result (its ``rank<N>.json``), in rank order.
        log_path: The job's output.
        marks: ``time.time()`` at which a line matching each of the job's marks first appeared in its output.
    """

    job: Job
    round: int
    ok: bool
    reason: str
    started: float
    duration: float
    ranks: list[dict[str, Any]]
    log_path: str
    marks: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The run's metadata and rank results, for results.json."""
        return {
            "job": self.job.label,
            "round": self.round,
            "ok": self.ok,
            "reason": self.reason,
            "duration": round(self.duration, 2),
            "log": self.log_path,
            **({"marks": {name: round(at - self.started, 2) for name, at in self.marks.items()}} if self.marks else {}),
        }


def merge_jobs(jobs: Iterable[Job]) -> list[Job]:
    """Merges jobs with the same key, keeping first-seen order.

    The merged job runs the union of the parts; it repeats if any request repeats, and then runs again only the
    parts of the requests that repeat.
    """
    merged: dict[tuple[Any, ...], Job] = {}
    for job in jobs:
        again = job.parts if job.repeat else frozenset()
        seen = merged.get(job.key)
        if seen is None:
            merged[job.key] = replace(job, repeat_parts=again)
        else:
            merged[job.key] = replace(seen, parts=seen.parts | job.parts, repeat=seen.repeat or job.repeat,
                                      repeat_parts=seen.repeat_parts | again)
    return list(merged.values())
