"""The ``collectives.py`` job shared by the bandwidth, small-tensor and compression measurements.

Its arguments depend only on the configuration, so the three measurements' requests for one engine and rank count
merge into one job that runs their parts back to back.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import engine_launcher
from smddp_compat.bench.jobs import Job

__all__ = ["collectives_job", "bandwidth_sizes", "sweep_args"]

_MB = 1 << 20


def bandwidth_sizes(config: BenchConfig) -> list[int]:
    """Message sizes of the bandwidth sweep: 1 KB to 64 MB in steps of 4x (quick: 1 KB to 1 MB in steps of 32x)."""
    if config.quick:
        return [1 << 10, 32 << 10, 1 << 20]
    return [1 << (10 + 2 * i) for i in range(9)]


def sweep_args(config: BenchConfig, ranks: int) -> tuple[str, ...]:
    """Arguments of the bandwidth sweep, the same for every engine's program (fewer repetitions on 3 ranks, which
    only serve the curve, not the engine comparison)."""
    sizes = ",".join(str(size) for size in bandwidth_sizes(config))
    if config.quick:
        return ("--sizes", sizes, "--bytes-per-size", str(4 * _MB), "--min-reps", "2", "--max-reps", "4")
    fewest, most = ("10", "15") if ranks == 2 else ("5", "8")  # 2 ranks: the goal's row, 10 samples of 64 MB a round
    return ("--sizes", sizes, "--bytes-per-size", str(320 * _MB), "--min-reps", fewest, "--max-reps", most)


def _part_args(config: BenchConfig) -> tuple[str, ...]:
    if config.quick:
        return ("--small-count", "16", "--small-reps", "2", "--small-eager-reps", "1",
                "--fp16-sizes", str(_MB), "--fp16-reps", "2")
    return ("--small-count", "160", "--small-reps", "15", "--small-eager-reps", "3",
            "--fp16-sizes", f"{4 * _MB},{64 * _MB}", "--fp16-reps", "7")


def collectives_job(config: BenchConfig, engine: str, ranks: int, parts: set[str], repeat: bool = False) -> Job:
    """The collectives job of ``engine`` (gloo or mpi) on ``ranks`` ranks, running ``parts``."""
    return Job(
        program="collectives.py",
        launcher=engine_launcher(engine),
        ranks=ranks,
        args=sweep_args(config, ranks) + _part_args(config),
        parts=frozenset(parts),
        repeat=repeat,
    )
