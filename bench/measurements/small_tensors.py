"""3. Many small gradients: 160 tensors from 64 KB to 1 MB (like a ResNet's), reduced SMDDP-style with
``allreduce(t, param_index, num_params)`` per tensor inside one ``tf.function``, vs. one ``grouped_allreduce``.

Goal: the per-tensor calls take at most 1.2x the grouped call. Separate eager calls are shown for reference.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import default_engine, engine_label
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob, not_measured, ok_runs, pooled_samples
from smddp_compat.bench.stats import paired_ratios, summarise
from smddp_compat.bench.measurements._collectives_job import collectives_job

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs"]

NAME = "small_tensors"
TITLE = "3. Many small tensors: per-tensor allreduce in tf.function vs. grouped_allreduce"
GOAL = Goal("<=", 1.2)
RANKS = 2


def _jobs(config: BenchConfig) -> dict[str, Job]:
    engine = default_engine(RANKS)
    return {engine: collectives_job(config, engine, RANKS, {NAME})}


def jobs(config: BenchConfig) -> list[Job]:
    """The 2-rank collectives job of the default engine, with this part."""
    return list(_jobs(config).values())


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Per-tensor (tf.function) / grouped, and eager per-tensor / grouped, per engine."""
    result = MeasurementResult(NAME, TITLE)
    default = default_engine(RANKS)
    for engine, job in _jobs(config).items():
        ok = ok_runs(runs, job, NAME)
        name = engine_label(engine, RANKS)
        goal = GOAL if engine == default else None
        if not ok:
            result.rows.append(Row(f"per-tensor in tf.function / grouped: {name}", None, goal, not_measured(runs, job)))
            continue
        part = ok[0].ranks[0][NAME]
        pooled = pooled_samples(ok, (NAME, "seconds"))
        grouped_ms = summarise(pooled["grouped"]).median * 1e3
        per_tensor = paired_ratios(pooled["per_tensor_function"], pooled["grouped"])
        result.rows.append(Row(
            f"{part['count']} tensors ({part['total_bytes'] / 2**20:.0f} MB) per-tensor in tf.function / grouped: {name}",
            per_tensor, goal,
            f"{summarise(pooled['per_tensor_function']).median * 1e3:.0f} ms vs {grouped_ms:.0f} ms",
        ))
        if "per_tensor_eager" in pooled and "grouped_beside_eager" in pooled:  # timed in turns with each other
            result.rows.append(Row(
                f"{part['count']} separate eager allreduce calls / grouped: {name}",
                paired_ratios(pooled["per_tensor_eager"], pooled["grouped_beside_eager"]), None,
                f"{summarise(pooled['per_tensor_eager']).median * 1e3:.0f} ms vs "
                f"{summarise(pooled['grouped_beside_eager']).median * 1e3:.0f} ms (reference)",
            ))
        result.raw[engine] = {"count": part["count"], "total_bytes": part["total_bytes"], "seconds": pooled,
                              "runs": [run.to_json() for run in runs(job)]}
    return result
