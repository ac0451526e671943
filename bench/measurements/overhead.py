"""1. Compat overhead: training-step time on smddp_compat vs. the same loop on raw ``horovod.tensorflow``.

Both run in one 2-rank job on the default engine under tf-keras (raw Horovod fails on Keras 3), in blocks of two
steps taken in turns (A B B A...); the ratio is computed block by block, so each pair of blocks saw the same load.
Goal: at most 1.02.
"""

from __future__ import annotations

from bench._config import BenchConfig
from bench._engines import default_engine, engine_launcher
from bench._jobs import Job
from bench._results import Goal, MeasurementResult, Row, RunsByJob
from bench._statistics import paired_ratios, summarise

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs", "MODEL_NAMES"]

NAME = "overhead"
TITLE = "1. Compat overhead: smddp_compat / raw Horovod step time (tf-keras)"
GOAL = Goal("<=", 1.02)
RANKS = 2
MODEL_NAMES = {"cnn": "MNIST CNN", "mlp": "MLP 784-700-500-10"}


def _job(config: BenchConfig) -> Job:
    steps, blocks = ("2", "3") if config.quick else ("2", "40")
    return Job(
        program="overhead.py",
        launcher=engine_launcher(default_engine()),
        ranks=RANKS,
        args=("--steps", steps, "--blocks", blocks, "--threads", str(config.threads_per_rank(RANKS))),
        env=(("TF_USE_LEGACY_KERAS", "1"),),
    )


def jobs(config: BenchConfig) -> list[Job]:
    """One 2-rank job."""
    return [_job(config)]


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Per model: the block-by-block ratio of step times, pooled over ranks."""
    result = MeasurementResult(NAME, TITLE)
    all_runs = list(runs(_job(config)))
    ok = [run for run in all_runs if run.ok]
    if not ok:
        reason = all_runs[0].reason if all_runs else "not run"
        for name in MODEL_NAMES.values():
            result.rows.append(Row(f"{name} step: smddp_compat / horovod", None, GOAL, f"n/a: {reason}"))
        return result
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
        result.rows.append(Row(f"{name} step: smddp_compat / horovod", ratio, GOAL, detail))
        result.raw[model] = {"block_seconds": blocks, "step_seconds": steps}
    result.raw["keras"] = ok[0].ranks[0]["keras"]
    result.raw["runs"] = [run.to_json() for run in all_runs]
    return result
