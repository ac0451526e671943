"""The bench's configuration: which measurements, how many rounds, where the results go, and the time limits."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from smddp_compat.bench.errors import BenchUsageError

__all__ = ["BenchConfig", "REPO_ROOT", "PROGRAMS_DIR", "DEFAULT_OUT_DIR"]

REPO_ROOT = Path(__file__).resolve().parent.parent
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class BenchConfig:
    """What one bench run does.

    Attributes:
        out_dir: Folder for results.json, bandwidth.png, report.md and the jobs' logs.
        measurements: Names of the measurements to run, in order.
        quick: Tiny workloads (a smoke test of the code, not a measurement).
        rounds: How many times each job whose result is compared with another job's runs (in turns).
        job_timeout: Seconds one job may take before it is stopped.
        budget: Seconds the whole bench may take; jobs that would start later are skipped (reported as n/a).
        cores: CPU cores of this machine (sets the threads per rank).
    """

    out_dir: Path
    measurements: tuple[str, ...]
    quick: bool = False
    rounds: int = 2
    job_timeout: float = 240.0
    budget: float = 3000.0
    cores: int = os.cpu_count() or 1

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise BenchUsageError(f"--rounds must be at least 1, got {self.rounds}.")
        if self.job_timeout <= 0:
            raise BenchUsageError(f"--job-timeout must be a positive number of seconds, got {self.job_timeout}.")
        if self.budget <= 0:
            raise BenchUsageError(f"--budget must be a positive number of seconds, got {self.budget}.")
        if not self.measurements:
            raise BenchUsageError("no measurement selected: name at least one with --only, or leave --only out.")

    def threads_per_rank(self, ranks_on_machine: int) -> int:
        """TF intra-op threads for each of ``ranks_on_machine`` processes sharing this machine's cores."""
        return max(1, self.cores // max(1, ranks_on_machine))
