"""2. Allreduce bandwidth, 1 KB to 64 MB, 2 and 3 ranks: Horovod over Gloo, Horovod over MPI and TF's
MultiWorkerMirroredStrategy, each against a memory copy of the same size timed in turns in the same process.

Goal: the kit's default engine for 2 ranks reaches at least a quarter of the copy's bandwidth at 64 MB (the ceiling
analysis in bench/LATEST.md puts a Horovod-based engine near 0.2-0.3). The engines are also compared with each
other at every size from 1 KB to 64 MB, on 2 and 3 ranks: the evidence for each rank count's default engine.
"""

from __future__ import annotations

from typing import Any

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import ENGINE_NAMES, default_engine, horovod_engines, mpi_unavailable_reason
from smddp_compat.bench.jobs import Job, JobRun, Launcher
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import paired_ratios, summarise
from smddp_compat.bench.measurements._collectives_job import bandwidth_sizes, collectives_job, sweep_args

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs", "rank_counts", "size_text"]

NAME = "bandwidth"
TITLE = "2. Allreduce bandwidth vs. memory copy"
GOAL = Goal(">=", 0.25)
#: Sizes whose MPI / Gloo speed is shown in the table (every size is in results.json).
COMPARED_SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
#: Rank count whose jobs repeat every round and decide which engine is faster.
COMPARED_RANKS = 2


def rank_counts(config: BenchConfig) -> list[int]:
    """2 and 3 ranks (quick: 2)."""
    return [2] if config.quick else [2, 3]


def size_text(nbytes: int) -> str:
    """``64 MB``, ``256 KB``, ``1 KB``."""
    if nbytes >= 1 << 20:
        return f"{nbytes >> 20} MB"
    return f"{nbytes >> 10} KB"


def _mwms_job(config: BenchConfig, ranks: int) -> Job:
    return Job(program="mwms_allreduce.py", launcher=Launcher.MWMS, ranks=ranks, args=sweep_args(config, ranks))


def _engine_jobs(config: BenchConfig) -> dict[tuple[str, int], Job]:
    out: dict[tuple[str, int], Job] = {}
    for ranks in rank_counts(config):
        for engine in horovod_engines():
            out[(engine, ranks)] = collectives_job(config, engine, ranks, {"bandwidth"}, repeat=ranks == COMPARED_RANKS)
        out[("mwms", ranks)] = _mwms_job(config, ranks)
    return out


def jobs(config: BenchConfig) -> list[Job]:
    """One job per engine and rank count."""
    return list(_engine_jobs(config).values())


def _pooled(runs: list[JobRun], nbytes: int) -> dict[str, list[float]]:
    pooled: dict[str, list[float]] = {"allreduce": [], "copy": []}
    for run in runs:
        for rank in run.ranks:
            for variant, values in rank["bandwidth"][str(nbytes)].items():
                pooled[variant].extend(values)
    return pooled


def _per_round_median(runs: list[JobRun], nbytes: int) -> dict[int, float]:
    return {run.round: summarise(_pooled([run], nbytes)["allreduce"]).median for run in runs}


def _engine_raw(runs: list[JobRun], sizes: list[int]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for nbytes in sizes:
        pooled = _pooled(runs, nbytes)
        allreduce, copy = summarise(pooled["allreduce"]), summarise(pooled["copy"])
        fraction = paired_ratios(pooled["copy"], pooled["allreduce"])
        raw[str(nbytes)] = {
            "allreduce_seconds": allreduce.to_json(),
            "copy_seconds": copy.to_json(),
            "allreduce_gbps": nbytes / allreduce.median / 1e9,
            "copy_gbps": nbytes / copy.median / 1e9,
            "fraction_of_copy": fraction.to_json(),
            "samples": pooled,
        }
    return raw


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """The fraction of the copy bandwidth per engine at the largest size, and the engines compared."""
    result = MeasurementResult(NAME, TITLE)
    sizes = bandwidth_sizes(config)
    largest = sizes[-1]
    defaults = {ranks: default_engine(ranks) for ranks in rank_counts(config)}
    default = defaults[COMPARED_RANKS]
    result.raw = {"sizes": sizes, "default_engine": default, "default_engines": defaults, "engines": {}}
    if mpi_unavailable_reason():
        result.notes.append(f"Horovod/MPI: n/a, {mpi_unavailable_reason()}.")
    medians: dict[tuple[str, int], dict[int, dict[int, float]]] = {}
    for (engine, ranks), job in _engine_jobs(config).items():
        name = f"{ENGINE_NAMES[engine]}{' (default)' if engine == defaults[ranks] else ''}, {ranks} ranks"
        comparison = f"{size_text(largest)} allreduce / copy bandwidth: {name}"
        goal = GOAL if engine == default and ranks == COMPARED_RANKS else None
        all_runs = list(runs(job))
        ok = [run for run in all_runs if run.ok]
        result.raw["engines"][f"{engine}-{ranks}"] = {
            "engine": engine, "ranks": ranks, "runs": [run.to_json() for run in all_runs],
            "sizes": _engine_raw(ok, sizes) if ok else {},
        }
        if not ok:
            reason = all_runs[0].reason if all_runs else "not run"
            result.rows.append(Row(comparison, None, goal, f"n/a: {reason}"))
            continue
        at_largest = result.raw["engines"][f"{engine}-{ranks}"]["sizes"][str(largest)]
        fraction = paired_ratios(*(_pooled(ok, largest)[v] for v in ("copy", "allreduce")))
        detail = (f"{at_largest['allreduce_gbps']:.2f} GB/s vs copy {at_largest['copy_gbps']:.2f} GB/s "
                  f"({at_largest['allreduce_seconds']['median'] * 1e3:.0f} ms)")
        result.rows.append(Row(comparison, fraction, goal, detail))
        medians[(engine, ranks)] = {size: _per_round_median(ok, size) for size in sizes}
    _compare_engines(result, medians, sizes, defaults)
    return result


def _compare_engines(result: MeasurementResult, medians: dict[tuple[str, int], dict[int, dict[int, float]]],
                     sizes: list[int], defaults: dict[int, str]) -> None:
    """Rows of the engines' speed relative to Horovod/Gloo, per size and rank count (ratio of per-round medians)."""
    largest = sizes[-1]
    shown = [size for size in sizes if size in COMPARED_SIZES] or sizes
    for ranks in sorted({r for _, r in medians}):
        base = medians.get(("gloo", ranks))
        if base is None:
            continue
        for engine in ("mpi", "mwms"):
            other = medians.get((engine, ranks))
            if other is None:
                continue
            for size in shown if engine == "mpi" else [largest]:
                rounds = sorted(set(base[size]) & set(other[size]))  # MWMS and 3-rank jobs run in the first round
                if not rounds:
                    continue
                speed = summarise([base[size][r] / other[size][r] for r in rounds])
                label = f"{size_text(size)} allreduce speed, {ENGINE_NAMES[engine]} / Horovod/Gloo, {ranks} ranks"
                times = (f"{summarise([other[size][r] for r in rounds]).median * 1e3:.2f} ms vs "
                         f"{summarise([base[size][r] for r in rounds]).median * 1e3:.2f} ms")
                result.rows.append(Row(label, speed, None, f"{times} (>1: {ENGINE_NAMES[engine]} faster)"))
                if engine == "mpi" and size == largest and ranks == COMPARED_RANKS:
                    result.raw["faster_at_largest"] = "mpi" if speed.median > 1 else "gloo"
    described = ", ".join(f"{ranks} ranks: {ENGINE_NAMES[engine]}" for ranks, engine in sorted(defaults.items()))
    result.notes.append(f"smddprun's default engine on this machine ({described}); `smddprun` prints its choice.")
