"""2. Allreduce bandwidth, 1 KB to 64 MB, 2 and 3 ranks: Horovod over Gloo, Horovod over MPI and TF's
MultiWorkerMirroredStrategy, each against a memory copy of the same size timed in turns in the same process.

How it works: ``docs/performance.md``, "The bandwidth measurement".
"""

from __future__ import annotations

from typing import Any

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import (
    ENGINE_NAMES, default_engine, engine_launcher, horovod_engines, mpi_unavailable_reason)
from smddp_compat.bench.jobs import Job, JobRun, Launcher
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob, not_measured, ok_runs, pooled_samples
from smddp_compat.bench.stats import paired_ratios, summarise
from smddp_compat.bench.measurements._collectives_job import bandwidth_sizes, collectives_job, sweep_args

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs", "rank_counts", "size_text", "MPI_VARIANTS", "variant_job",
           "variant_names"]

NAME = "bandwidth"
TITLE = "2. Allreduce bandwidth vs. memory copy"
GOAL = Goal(">=", 0.25)
#: Sizes whose MPI / Gloo speed is shown in the table (every size is in results.json).
COMPARED_SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
#: Rank count whose jobs repeat every round and decide which engine is faster.
COMPARED_RANKS = 2

_SEGMENTED_4MB = (("OMPI_MCA_coll_tuned_allreduce_algorithm", "5"),
                  ("OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize", str(4 << 20)),
                  ("OMPI_MCA_coll_tuned_use_dynamic_rules", "1"))
#: Alternatives to the kit's Horovod/MPI settings: name -> (what it is, the environment that gives it). A user's own
#: ``OMPI_MCA_coll_tuned_*`` variable replaces the kit's allreduce rules, so the first two run without them.
MPI_VARIANTS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "openmpi-choice": ("Open MPI's own allreduce algorithm (before: unsegmented ring)",
                       (("OMPI_MCA_coll_tuned_use_dynamic_rules", "0"),)),
    "segments-4mb": ("segmented ring, 4 MB segments", _SEGMENTED_4MB),
    "no-single-copy": ("no CMA single copy (btl_vader_single_copy_mechanism none)",
                       (("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),)),
    "no-huge-pages": ("no huge pages (glibc.malloc.hugetlb=0)", (("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0"),)),
    "bfc-allocator": ("TensorFlow's BFC allocator (TF_CPU_ALLOCATOR_USE_BFC)", (("TF_CPU_ALLOCATOR_USE_BFC", "true"),)),
    "cycle-0.1ms": ("Horovod cycle time 0.1 ms (default 1 ms)", (("HOROVOD_CYCLE_TIME", "0.1"),)),
}
KIT_VARIANT = "kit"


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


def variant_names(config: BenchConfig) -> list[str]:
    """The kit's settings first, then the alternatives tried (none without mpirun, none in a --quick run: its tiny
    sizes say nothing about them)."""
    if config.quick or "mpi" not in horovod_engines():
        return []
    return [KIT_VARIANT, *MPI_VARIANTS]


def variant_job(config: BenchConfig, name: str) -> Job:
    """The 2-rank Horovod/MPI job of variant ``name`` (``kit``: the kit's own settings): 1 KB and 64 MB."""
    sizes, reps = (f"{1 << 10},{1 << 20}", "3") if config.quick else (f"{1 << 10},{64 << 20}", "10")
    env = () if name == KIT_VARIANT else MPI_VARIANTS[name][1]
    return Job(program="collectives.py", launcher=engine_launcher("mpi"), ranks=COMPARED_RANKS,
               args=("--sizes", sizes, "--min-reps", reps, "--max-reps", reps, "--variant", name),
               env=env, parts=frozenset({"bandwidth"}), repeat=True)


def jobs(config: BenchConfig) -> list[Job]:
    """One job per engine and rank count, and one per variant of the default engine's settings."""
    return list(_engine_jobs(config).values()) + [variant_job(config, name) for name in variant_names(config)]


def _pooled(runs: list[JobRun], nbytes: int) -> dict[str, list[float]]:
    return pooled_samples(runs, ("bandwidth", str(nbytes)), ("allreduce", "copy"))


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
        ok = ok_runs(runs, job)
        result.raw["engines"][f"{engine}-{ranks}"] = {
            "engine": engine, "ranks": ranks, "runs": [run.to_json() for run in runs(job)],
            "sizes": _engine_raw(ok, sizes) if ok else {},
        }
        if not ok:
            result.rows.append(Row(comparison, None, goal, not_measured(runs, job)))
            continue
        at_largest = result.raw["engines"][f"{engine}-{ranks}"]["sizes"][str(largest)]
        fraction = paired_ratios(*(_pooled(ok, largest)[v] for v in ("copy", "allreduce")))
        detail = (f"{at_largest['allreduce_gbps']:.2f} GB/s vs copy {at_largest['copy_gbps']:.2f} GB/s "
                  f"({at_largest['allreduce_seconds']['median'] * 1e3:.0f} ms)")
        result.rows.append(Row(comparison, fraction, goal, detail))
        medians[(engine, ranks)] = {size: _per_round_median(ok, size) for size in sizes}
    _compare_engines(result, medians, sizes, defaults)
    _compare_variants(config, result, runs)
    return result


def _compare_variants(config: BenchConfig, result: MeasurementResult, runs: RunsByJob) -> None:
    """Rows of the default engine's settings side by side: each variant's 64 MB fraction of the copy, and its 1 KB
    time over the kit's in the same round."""
    names = variant_names(config)
    if not names:
        return
    ok = {name: ok_runs(runs, variant_job(config, name)) for name in names}
    large, small = (1 << 20, 1 << 10) if config.quick else (64 << 20, 1 << 10)
    kit_small = _per_round_median(ok[KIT_VARIANT], small) if ok[KIT_VARIANT] else {}
    raw = result.raw.setdefault("variants", {})
    for name in names:
        label = "kit settings (default)" if name == KIT_VARIANT else MPI_VARIANTS[name][0]
        comparison = f"{size_text(large)} allreduce / copy bandwidth: Horovod/MPI, {label}, {COMPARED_RANKS} ranks"
        if not ok[name]:
            result.rows.append(Row(comparison, None, None, not_measured(runs, variant_job(config, name))))
            continue
        pooled = _pooled(ok[name], large)
        fraction = paired_ratios(pooled["copy"], pooled["allreduce"])
        small_times = _per_round_median(ok[name], small)
        rounds = sorted(set(small_times) & set(kit_small))
        latency = summarise([small_times[r] / kit_small[r] for r in rounds])
        detail = (f"{summarise(pooled['allreduce']).median * 1e3:.1f} ms vs copy {summarise(pooled['copy']).median * 1e3:.1f}"
                  f" ms; {size_text(small)}: {summarise(_pooled(ok[name], small)['allreduce']).median * 1e3:.2f} ms")
        if name != KIT_VARIANT and rounds:
            detail += f", {latency.median:.2f}x the kit's"
        result.rows.append(Row(comparison, fraction, None, detail))
        raw[name] = {"label": label, "env": dict(variant_job(config, name).env), "fraction_of_copy": fraction.to_json(),
                     "small_over_kit": latency.to_json(), "samples": {str(large): pooled,
                                                                      str(small): _pooled(ok[name], small)}}


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
