"""1. Compat overhead: training-step time on smddp_compat vs. the same loop on raw ``horovod.tensorflow``.

Both run in one 2-rank job under tf-keras (raw Horovod fails on Keras 3), in blocks of two steps taken in turns
(A B B A...); the ratio is computed block by block, so each pair of blocks saw the same load. One job per engine
(Horovod over Gloo, over MPI). Goal on both: at most 1.02. The engines' step times are also compared (a real
training step, the workload the default engine is chosen for).
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import ENGINE_NAMES, default_engine, engine_launcher, horovod_engines
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import paired_ratios, summarise

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs", "MODEL_NAMES"]

NAME = "overhead"
TITLE = "1. Compat overhead: smddp_compat / raw Horovod step time (tf-keras)"
GOAL = Goal("<=", 1.02)
RANKS = 2
MODEL_NAMES = {"cnn": "MNIST CNN", "mlp": "MLP 784-700-500-10"}


def _job(config: BenchConfig, engine: str) -> Job:
    steps, blocks = ("2", "3") if config.quick else ("2", "30")
    return Job(
        program="overhead.py",
        launcher=engine_launcher(engine),
        ranks=RANKS,
        args=("--steps", steps, "--blocks", blocks, "--threads", str(config.threads_per_rank(RANKS))),
        env=(("TF_USE_LEGACY_KERAS", "1"),),
    )


def jobs(config: BenchConfig) -> list[Job]:
    """One 2-rank job per engine."""
    return [_job(config, engine) for engine in horovod_engines()]


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Per engine and model: the block-by-block ratio of step times, pooled over ranks; then the engines' steps."""
    result = MeasurementResult(NAME, TITLE)
    default = default_engine(RANKS)
    step_medians: dict[str, dict[str, float]] = {}
    for engine in horovod_engines():
        name = ENGINE_NAMES[engine] + (" (default)" if engine == default else "")
        step_medians[engine] = _summarise_engine(result, list(runs(_job(config, engine))), engine, name)
    if all(step_medians.get(engine) for engine in ("gloo", "mpi")):
        for model, name in MODEL_NAMES.items():
            gloo, mpi = step_medians["gloo"][model], step_medians["mpi"][model]
            result.rows.append(Row(
                f"{name} step time (smddp_compat), Horovod/Gloo / Horovod/MPI, {RANKS} ranks", summarise([gloo / mpi]),
                None, f"{gloo * 1e3:.1f} ms vs {mpi * 1e3:.1f} ms (>1: MPI faster)",
            ))
    return result


def _summarise_engine(result: MeasurementResult, all_runs: list, engine: str, engine_name: str) -> dict[str, float]:
    """Adds one engine's rows; returns its median smddp_compat step time per model (empty when it did not run)."""
    ok = [run for run in all_runs if run.ok]
    if not ok:
        reason = all_runs[0].reason if all_runs else "not run"
        for name in MODEL_NAMES.values():
            result.rows.append(Row(f"{name} step: smddp_compat / horovod, {engine_name}", None, GOAL, f"n/a: {reason}"))
        return {}
    medians: dict[str, float] = {}
    raw: dict = result.raw.setdefault(engine, {})
    for model, name in MODEL_NAMES.items():
        blocks: dict[str, list[float]] = {"horovod": [], "smddp_compat": []}
        steps: dict[str, list[float]] = {"horovod": [], "smddp_compat": []}
        for run in ok:
            for rank in run.ranks:
                for api in blocks:
                    blocks[api].extend(rank["models"][model]["block_seconds"][api])
                    steps[api].extend(rank["models"][model]["step_seconds"][api])
        ratio = paired_ratios(blocks["smddp_compat"], blocks["horovod"])
        detail = (f"{summarise(steps['smddp_compat']).median * 1e3:.1f} ms vs "
                  f"{summarise(steps['horovod']).median * 1e3:.1f} ms per step")
        result.rows.append(Row(f"{name} step: smddp_compat / horovod, {engine_name}", ratio, GOAL, detail))
        raw[model] = {"block_seconds": blocks, "step_seconds": steps}
        medians[model] = summarise(steps["smddp_compat"]).median
    raw["keras"] = ok[0].ranks[0]["keras"]
    raw["runs"] = [run.to_json() for run in all_runs]
    return medians
