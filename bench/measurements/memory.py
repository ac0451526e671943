"""7. Peak resident memory per rank: train.py on smddp_compat vs. on raw ``horovod.tensorflow`` (2 ranks, same
launcher, tf-keras). Goal: at most 1.1x.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job, JobRun
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob, first_failure
from smddp_compat.bench.stats import summarise
from smddp_compat.bench.measurements._training_jobs import smddprun_training

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs"]

NAME = "memory"
TITLE = "7. Peak resident memory per rank"
GOAL = Goal("<=", 1.1)
RANKS = 2


def _jobs(config: BenchConfig) -> dict[str, Job]:
    return {api: smddprun_training(config, RANKS, api, repeat=True) for api in ("smddp_compat", "horovod")}


def jobs(config: BenchConfig) -> list[Job]:
    """train.py on 2 ranks with each API."""
    return list(_jobs(config).values())


def _peaks(runs: list[JobRun]) -> dict[tuple[int, int], int]:
    return {(run.round, rank["rank"]): rank["peak_rss_bytes"] for run in runs if run.ok for rank in run.ranks}


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Compat's peak RSS over raw Horovod's, rank by rank and round by round."""
    result = MeasurementResult(NAME, TITLE)
    layouts = _jobs(config)
    peaks = {api: _peaks(list(runs(job))) for api, job in layouts.items()}
    result.raw = {api: {f"round{r}-rank{k}": v for (r, k), v in values.items()} for api, values in peaks.items()}
    result.raw["compat_loaded_in_raw_run"] = any(
        rank.get("smddp_compat_loaded") for run in runs(layouts["horovod"]) if run.ok for rank in run.ranks
    )
    compat, raw = peaks["smddp_compat"], peaks["horovod"]
    keys = sorted(set(compat) & set(raw))
    comparison = f"peak RSS per rank: smddp_compat / horovod ({RANKS} ranks)"
    if not keys:
        result.rows.append(Row(comparison, None, GOAL, f"n/a: {first_failure(runs, list(layouts.values()))}"))
        return result
    ratio = summarise([compat[k] / raw[k] for k in keys])
    detail = (f"{summarise(list(compat.values())).median / 2**20:.0f} MiB vs "
              f"{summarise(list(raw.values())).median / 2**20:.0f} MiB")
    result.rows.append(Row(comparison, ratio, GOAL, detail))
    return result
