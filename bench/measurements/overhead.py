"""1. Compat overhead: training-step time on smddp_compat vs. the same loop on raw ``horovod.tensorflow``.

How it works: ``docs/performance.md``, "The compat overhead measurement".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import engine_label, engine_launcher, horovod_engines
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import Summary, summarise

__all__ = ["NAME", "TITLE", "engines", "jobs", "summarise_runs", "MODEL_NAMES", "GROUPS", "grouped_ratios",
           "collective_ops"]

NAME = "overhead"
TITLE = "1. Compat overhead: smddp_compat / raw Horovod step time (tf-keras)"
GOAL = Goal("<=", 1.02)
RANKS = 2
MODEL_NAMES = {"cnn": "MNIST CNN", "mlp": "MLP 784-700-500-10"}
#: Groups of consecutive step pairs per model; each gives one ratio of the two APIs' median steps.
GROUPS = 10


def _job(config: BenchConfig, engine: str, model: str) -> Job:
    blocks = "10" if config.quick else "3200"  # 10 groups of 320 pairs: with 160, a group ratio still varied by +-1.5 %
    return Job(
        program="overhead.py",
        launcher=engine_launcher(engine),
        ranks=RANKS,
        args=("--models", model, "--steps", "1", "--blocks", blocks,
              "--threads", str(config.threads_per_rank(RANKS))),
        env=(("TF_USE_LEGACY_KERAS", "1"),),
    )


def _engine_jobs(config: BenchConfig, engine: str) -> dict[str, Job]:
    """The job timing each model on ``engine``: one per model (each its own process start); ``--quick``: one job
    timing both (a smoke test of the code needs one start-up, not two)."""
    if config.quick:
        return dict.fromkeys(MODEL_NAMES, _job(config, engine, ",".join(MODEL_NAMES)))
    return {model: _job(config, engine, model) for model in MODEL_NAMES}


def engines(config: BenchConfig) -> list[str]:
    """The engines timed: each Horovod engine of this machine; ``--quick``: Gloo, which every machine has and whose
    job costs least (overhead.py is the same program on either: MPI's launcher runs in the collectives job)."""
    return ["gloo"] if config.quick else horovod_engines()


def jobs(config: BenchConfig) -> list[Job]:
    """One 2-rank job per engine and model (``--quick``: one job, Gloo, both models)."""
    return [job for engine in engines(config) for job in dict.fromkeys(_engine_jobs(config, engine).values())]


def grouped_ratios(numerators: list[float], denominators: list[float], groups: int = GROUPS) -> Summary:
    """The ratio of paired step times, one per group of consecutive pairs: median of the numerators' steps in the
    group over the median of the denominators' steps (pair ``i`` is ``numerators[i]``, ``denominators[i]``, taken
    next to each other).

    Args:
        numerators: Step times of the variant, in the order taken.
        denominators: Step times of the baseline, pair by pair with ``numerators``.
        groups: How many groups (fewer when there are fewer pairs: then one pair a group).

    Returns:
        The summary of the groups' ratios.
    """
    count = min(len(numerators), len(denominators))
    size = max(1, count // max(1, groups))
    ratios = []
    for start in range(0, count - size + 1, size):
        below = float(np.median(denominators[start:start + size]))
        if below > 0:
            ratios.append(float(np.median(numerators[start:start + size])) / below)
    return summarise(ratios)


def collective_ops(graph_ops: dict[str, int]) -> int:
    """How many Horovod collective ops a step graph holds (a grouped allreduce counts once: one negotiation)."""
    return sum(count for op, count in graph_ops.items() if op.startswith("Horovod"))


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Per engine and model: CPU and wall time per step, grouped pair ratios; then the engines' steps."""
    result = MeasurementResult(NAME, TITLE)
    step_medians: dict[str, dict[str, float]] = {}
    for engine in engines(config):
        name = engine_label(engine, RANKS)
        by_model = {model: list(runs(job)) for model, job in _engine_jobs(config, engine).items()}
        step_medians[engine] = _summarise_engine(result, by_model, engine, name)
    if all(step_medians.get(engine) for engine in ("gloo", "mpi")):
        for model, name in MODEL_NAMES.items():
            if not all(model in step_medians[engine] for engine in ("gloo", "mpi")):
                continue
            gloo, mpi = step_medians["gloo"][model], step_medians["mpi"][model]
            result.rows.append(Row(
                f"{name} step time (smddp_compat), Horovod/Gloo / Horovod/MPI, {RANKS} ranks", summarise([gloo / mpi]),
                None, f"{gloo * 1e3:.1f} ms vs {mpi * 1e3:.1f} ms (>1: MPI faster)",
            ))
    result.notes.append(
        "Compat overhead: judged on CPU time per step (the work a step costs), steps of the two APIs in turns, "
        f"{GROUPS} groups of consecutive pairs per model, each the ratio of the groups' median steps; wall time "
        "beside it without a goal (it varies with the machine's load by far more than 2 %); the collective ops "
        "per step of each API's graph in the detail."
    )
    return result


def _per_step(ok: list, model: str, kind: str, api: str) -> list[float]:
    """The step times of ``api`` averaged over the ranks, step by step, run after run."""
    out: list[float] = []
    for run in ok:
        series = [rank["models"][model][kind][api] for rank in run.ranks]
        length = min(len(values) for values in series)
        out += [float(np.mean([values[i] for values in series])) for i in range(length)]
    return out


def _summarise_engine(result: MeasurementResult, runs_by_model: dict[str, list], engine: str,
                      engine_name: str) -> dict[str, float]:
    """Adds one engine's rows; returns its median smddp_compat step time per model that ran."""
    cpu_label = "{name} step CPU time: smddp_compat / horovod, {engine}"
    wall_label = "{name} step wall time: smddp_compat / horovod, {engine} (not judged: the machine's load)"
    medians: dict[str, float] = {}
    raw: dict[str, Any] = result.raw.setdefault(engine, {})
    for model, name in MODEL_NAMES.items():
        all_runs = runs_by_model[model]
        ok = [run for run in all_runs if run.ok]
        if not ok:
            reason = all_runs[0].reason if all_runs else "not run"
            result.rows.append(Row(cpu_label.format(name=name, engine=engine_name), None, GOAL, f"n/a: {reason}"))
            continue
        cpu = {api: _per_step(ok, model, "cpu_seconds", api) for api in ("smddp_compat", "horovod")}
        wall = {api: _per_step(ok, model, "step_seconds", api) for api in ("smddp_compat", "horovod")}
        graph_ops = ok[0].ranks[0]["models"][model].get("graph_ops", {})
        collectives = {api: collective_ops(graph_ops.get(api, {})) for api in ("smddp_compat", "horovod")}
        ops = {api: sum(graph_ops.get(api, {}).values()) for api in ("smddp_compat", "horovod")}
        cpu_ratio = grouped_ratios(cpu["smddp_compat"], cpu["horovod"])
        detail = (f"{np.median(cpu['smddp_compat']) * 1e3:.2f} ms vs {np.median(cpu['horovod']) * 1e3:.2f} ms CPU "
                  f"per step; graph: {collectives['smddp_compat']} vs {collectives['horovod']} collective ops, "
                  f"{ops['smddp_compat']} vs {ops['horovod']} ops")
        result.rows.append(Row(cpu_label.format(name=name, engine=engine_name), cpu_ratio, GOAL, detail))
        wall_ratio = grouped_ratios(wall["smddp_compat"], wall["horovod"])
        result.rows.append(Row(
            wall_label.format(name=name, engine=engine_name), wall_ratio, None,
            f"{np.median(wall['smddp_compat']) * 1e3:.1f} ms vs {np.median(wall['horovod']) * 1e3:.1f} ms per step",
        ))
        raw[model] = {"cpu_seconds": cpu, "step_seconds": wall, "graph_ops": graph_ops, "keras": ok[0].ranks[0]["keras"],
                      "cpu_ratio": cpu_ratio.to_json(), "wall_ratio": wall_ratio.to_json(),
                      "runs": [run.to_json() for run in all_runs]}
        medians[model] = float(np.median(wall["smddp_compat"]))
    return medians
