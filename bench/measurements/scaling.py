"""5. Scaling: samples/s of the MNIST CNN on 1 rank, 2 ranks (smddprun) and 2 hosts x 1 process (``smddp local``).

Each rank trains on its own batch of 32 (weak scaling) with the machine's cores split between the ranks, so on this
2-core machine the ideal ratio is about 1: the processes share the same two cores.

Beside them, what a shorter Horovod cycle costs a training step: 2 ranks with ``HOROVOD_CYCLE_TIME=0.1`` (ms) against
Horovod's default (1 ms, the kit's). The bandwidth measurement shows what it gains (a 1 KB allreduce's latency).
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job, JobRun
from smddp_compat.bench.results import MeasurementResult, Row, RunsByJob, first_failure
from smddp_compat.bench.stats import summarise
from smddp_compat.bench.measurements._training_jobs import local_mode_training, ranks_of, smddprun_training

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs"]

NAME = "scaling"
TITLE = "5. Scaling: MNIST CNN samples/s"
#: The variant of the 2-rank job that the last row compares with the kit's defaults.
SHORT_CYCLE = "2 ranks, HOROVOD_CYCLE_TIME=0.1"


def _jobs(config: BenchConfig) -> dict[str, Job]:
    """The layouts; ``--quick`` leaves out the short cycle (the 2-rank job again with one variable changed)."""
    layouts = {
        "1 rank": smddprun_training(config, 1, repeat=True),
        "2 ranks": smddprun_training(config, 2, repeat=True),
        "2 hosts x 1 (smddp local)": local_mode_training(config, 2, repeat=True),
    }
    if not config.quick:
        layouts[SHORT_CYCLE] = smddprun_training(config, 2, repeat=True, env=(("HOROVOD_CYCLE_TIME", "0.1"),))
    return layouts


def jobs(config: BenchConfig) -> list[Job]:
    """train.py on 1 rank, 2 ranks and in local mode on 2 hosts (and 2 ranks with a short cycle, not in --quick)."""
    return list(_jobs(config).values())


def _per_round(runs: list[JobRun]) -> dict[int, float]:
    # Samples/s of the whole job: every rank reports the global figure, rank 0's is used.
    return {round_: rank["samples_per_second"] for round_, rank in ranks_of(runs) if rank["rank"] == 0}


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Samples/s of each layout over 1 rank's, round by round."""
    result = MeasurementResult(NAME, TITLE)
    layouts = _jobs(config)
    per_round = {name: _per_round(list(runs(job))) for name, job in layouts.items()}
    result.raw = {name: {"samples_per_second": values, "runs": [run.to_json() for run in runs(layouts[name])]}
                  for name, values in per_round.items()}
    for name, base_name in (("2 ranks", "1 rank"), ("2 hosts x 1 (smddp local)", "1 rank"), (SHORT_CYCLE, "2 ranks")):
        if name not in layouts:
            continue
        values, base = per_round[name], per_round[base_name]
        comparison = f"samples/s {name} / {base_name}"
        if not values or not base:
            failed = first_failure(runs, [layouts[name], layouts[base_name]])
            result.rows.append(Row(comparison, None, None, f"n/a: {failed}"))
            continue
        # Same-round pairs when both ran in a round; runs of later rounds against the baseline's median.
        reference = summarise(list(base.values())).median
        ratio = summarise([value / base.get(round_, reference) for round_, value in values.items()])
        detail = f"{summarise(list(values.values())).median:.0f} vs {reference:.0f} samples/s"
        result.rows.append(Row(comparison, ratio, None, detail))
    return result
