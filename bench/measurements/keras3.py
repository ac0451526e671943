"""10. Keras 3 against tf-keras under MultiWorkerMirroredStrategy: the same model, data and global batch trained with
Keras ``fit`` on 2 workers (``smddp local --distribution mwms --instance-count 2``), Keras 3 through the kit's
adaptation of its trainer (docs/keras3-strategies.md) against tf-keras. Goal: Keras 3 at least 0.95 of tf-keras's
samples/s. The jobs are the strategy comparison's ``mwms_fit`` cells (shared when both measurements run).
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.measurements import strategies
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import summarise

__all__ = ["NAME", "TITLE", "GOAL", "jobs", "summarise_runs"]

NAME = "keras3"
TITLE = "10. Keras 3 fit against tf-keras fit under MultiWorkerMirroredStrategy, 2 workers"
GOAL = Goal(">=", 0.95)
_FIT = next(strategy for strategy in strategies.STRATEGIES if strategy.name == "mwms_fit")
_MODELS = {"cnn": "MNIST CNN", "mlp": "MLP 784-700-500-10"}


def _models(config: BenchConfig) -> tuple[str, ...]:
    return ("mlp",) if config.quick else tuple(_MODELS)  # quick: shares the comparison's Keras 3 MLP job


def _job(config: BenchConfig, keras: str, model: str) -> Job:
    return strategies.cell_job(config, strategies.Cell(_FIT, keras, model))


def jobs(config: BenchConfig) -> list[Job]:
    """The ``mwms_fit`` job of each flavour and model (the MLP only in quick mode)."""
    return [_job(config, keras, model) for model in _models(config) for keras in ("keras3", "tf-keras")]


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Per model: each Keras 3 window's samples/s over the median of tf-keras's (the two jobs run in turns)."""
    result = MeasurementResult(NAME, TITLE)
    for model in _models(config):
        comparison = f"{_MODELS[model]} fit samples/s under MWMS, 2 workers: Keras 3 / tf-keras"
        keras3, tf_keras = (strategies.cell_figures(list(runs(_job(config, keras, model))))
                            for keras in ("keras3", "tf-keras"))
        baseline = strategies.median_of(tf_keras["windows"])
        if not keras3["windows"] or baseline is None:
            reason = (keras3["failed"] or tf_keras["failed"] or ["not run"])[0]
            result.rows.append(Row(comparison, None, GOAL, f"n/a: {reason}"))
            continue
        ratio = summarise([value / baseline for value in keras3["windows"]])
        result.rows.append(Row(
            comparison, ratio, GOAL,
            f"{strategies.median_of(keras3['windows']):.0f} vs {baseline:.0f} samples/s; final held-out accuracy "
            f"{strategies.median_of(keras3['final_accuracy']):.3f} vs {strategies.median_of(tf_keras['final_accuracy']):.3f}"))
    result.notes.append(
        "Keras 3 fit: the strategy comparison's `mwms_fit` jobs (one `fit` per job, each step's end timed by a "
        "callback), Keras 3 against tf-keras in turns; each Keras 3 window over the median of tf-keras's.")
    return result
