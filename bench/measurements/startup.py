"""6. Start-up: from starting ``smddp local`` (2 hosts x 1) to the end of the first training step, vs. a bare
``horovodrun -np 2`` of the same script.

Both clocks are the machine's wall clock: the bench notes when it starts the launcher, rank 0 when its first step
ended. The split (launcher until the script started; script until its first step) shows where the time goes.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job, JobRun
from smddp_compat.bench.results import MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import summarise
from smddp_compat.bench.measurements._training_jobs import horovodrun_training, local_mode_training

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs"]

NAME = "startup"
TITLE = "6. Start-up: launch to first training step"


def _jobs(config: BenchConfig) -> dict[str, Job]:
    return {"smddp local": local_mode_training(config, 2, repeat=True),
            "horovodrun": horovodrun_training(config, 2, repeat=True)}


def jobs(config: BenchConfig) -> list[Job]:
    """train.py in local mode (2 hosts) and under horovodrun (2 ranks)."""
    return list(_jobs(config).values())


def _timings(runs: list[JobRun]) -> dict[int, dict[str, float]]:
    out = {}
    for run in runs:
        if not run.ok:
            continue
        first = run.ranks[0]
        out[run.round] = {
            "to_first_step": first["first_step_done"] - run.started,
            "launcher": min(rank["process_started"] for rank in run.ranks) - run.started,
            "script": first["first_step_done"] - first["process_started"],
        }
    return out


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Local mode's start-up over horovodrun's, round by round."""
    result = MeasurementResult(NAME, TITLE)
    layouts = _jobs(config)
    timings = {name: _timings(list(runs(job))) for name, job in layouts.items()}
    result.raw = {name: {"timings": values, "runs": [run.to_json() for run in runs(layouts[name])]}
                  for name, values in timings.items()}
    local, bare = timings["smddp local"], timings["horovodrun"]
    rounds = sorted(set(local) & set(bare))
    comparison = "start to first step: smddp local (2 hosts x 1) / horovodrun -np 2"
    if not rounds:
        failed = next((run.reason for job in layouts.values() for run in runs(job) if not run.ok), "not run")
        result.rows.append(Row(comparison, None, None, f"n/a: {failed}"))
        return result
    ratio = summarise([local[r]["to_first_step"] / bare[r]["to_first_step"] for r in rounds])

    def median(values: dict[int, dict[str, float]], key: str) -> float:
        return summarise([v[key] for v in values.values()]).median

    detail = (f"{median(local, 'to_first_step'):.1f} s vs {median(bare, 'to_first_step'):.1f} s "
              f"(launcher {median(local, 'launcher'):.1f} vs {median(bare, 'launcher'):.1f} s, "
              f"script {median(local, 'script'):.1f} vs {median(bare, 'script'):.1f} s)")
    result.rows.append(Row(comparison, ratio, None, detail))
    return result
