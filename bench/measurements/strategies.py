"""9. Strategies: the same model, data and global batch trained under each strategy a TensorFlow user can pick, 2
hosts x 1 process each, started by ``smddp local`` as SageMaker's distribution of that strategy starts it (and so
with the engine it uses by default).

How it works: ``docs/performance.md``, "The strategy measurement".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job, JobRun, Launcher
from smddp_compat.bench.results import MeasurementResult, Row, RunsByJob
from smddp_compat.bench.stats import summarise

__all__ = ["NAME", "TITLE", "STRATEGIES", "KERAS_FLAVOURS", "Cell", "cells", "jobs", "summarise_runs",
           "TARGET_ACCURACY", "cell_job", "cell_figures", "median_of"]

NAME = "strategies"
TITLE = "9. Strategies on one model: 2 hosts x 1 process, each strategy's default engine"
HOSTS = 2
TARGET_ACCURACY = 0.92


@dataclass(frozen=True)
class Strategy:
    """A strategy as the bench runs it.

    Attributes:
        name: ``--strategy`` of the rank program.
        label: Its name in the table.
        distribution: ``smddp local --distribution``.
        engine: What moves the gradients, as that distribution starts it on 2 hosts of this machine.
        keras: The flavours it runs on (``keras3``, ``tf-keras``; ``none`` for a program without Keras).
        why_not: Flavour -> why the strategy cannot run with it (listed without running).
        models: The models it trains (others are listed with ``why_not_model``).
        why_not_model: Why a model is not trained.
        local_options: Further ``smddp local`` options.
        trainer: Its trainer in the rank program (the Horovod-style strategies share one, each importing its own
            module); ``--quick`` runs the first strategy of each trainer.
    """

    name: str
    label: str
    distribution: str
    engine: str
    keras: tuple[str, ...]
    why_not: tuple[tuple[str, str], ...] = ()
    models: tuple[str, ...] = ("mlp", "cnn")
    why_not_model: str = ""
    local_options: tuple[str, ...] = ()
    trainer: str = ""

    def __post_init__(self) -> None:
        if not self.trainer:
            object.__setattr__(self, "trainer", self.name)


STRATEGIES = (
    Strategy("smddp", "SMDDP face (smdistributed.dataparallel)", "smddp",
             "Horovod/Gloo (smddp local's choice for 2 hosts on one machine)", ("keras3", "tf-keras"),
             trainer="horovod"),
    Strategy("horovod_face", "Horovod face (smddp_compat.horovod)", "mpi", "Horovod/MPI (mpirun)",
             ("keras3", "tf-keras"), trainer="horovod"),
    Strategy("horovod", "raw Horovod 0.28.1", "mpi", "Horovod/MPI (mpirun)", ("tf-keras",),
             why_not=(("keras3", "Horovod 0.28.1's TensorFlow integration does not support Keras 3; use the "
                                 "kit's Horovod face, or tf-keras: TF_USE_LEGACY_KERAS=1"),), trainer="horovod"),
    Strategy("mwms", "MultiWorkerMirroredStrategy (custom loop)", "mwms", "TF collective ops (ring over gRPC)",
             ("keras3", "tf-keras")),
    Strategy("mwms_fit", "MultiWorkerMirroredStrategy (Keras fit)", "mwms", "TF collective ops (ring over gRPC)",
             ("keras3", "tf-keras")),
    Strategy("dtensor", "DTensor data parallel (Core API)", "dtensor", "DTensor collectives over gRPC", ("none",),
             models=("mlp",), why_not_model="the DTensor program is the Core-API MLP (DVariables, no Keras layers)",
             local_options=("--devices-per-process", "1")),
    Strategy("parameter_server", "ParameterServerStrategy (SageMaker's layout: 1 worker, 2 ps)", "parameter_server",
             "gRPC to the parameter servers (asynchronous)", ("keras3", "tf-keras")),
)
KERAS_FLAVOURS = {"keras3": "Keras 3", "tf-keras": "tf-keras", "none": "no Keras"}
MODEL_NAMES = {"mlp": "MLP 784-700-500-10", "cnn": "MNIST CNN"}


@dataclass(frozen=True)
class Cell:
    """One strategy x Keras flavour x model."""

    strategy: Strategy
    keras: str
    model: str

    @property
    def label(self) -> str:
        """``SMDDP face (...), Keras 3``."""
        return f"{self.strategy.label}, {KERAS_FLAVOURS[self.keras]}"

    @property
    def why_not(self) -> str:
        """Why the cell cannot run ('' when it runs)."""
        if self.model not in self.strategy.models:
            return self.strategy.why_not_model
        return dict(self.strategy.why_not).get(self.keras, "")


def _models(config: BenchConfig) -> tuple[str, ...]:
    return ("mlp",) if config.quick else ("mlp", "cnn")


def _strategies(config: BenchConfig) -> list[Strategy]:
    """Every strategy; quick mode: the first of each trainer (a smoke test of the rank program's loops: the other
    Horovod-style strategies differ in the module imported, and the kit's faces have tests of their own)."""
    if not config.quick:
        return list(STRATEGIES)
    firsts: dict[str, Strategy] = {}
    for strategy in STRATEGIES:
        firsts.setdefault(strategy.trainer, strategy)
    return list(firsts.values())


def cells(config: BenchConfig) -> list[Cell]:
    """Every cell of the comparison, those that cannot run included. Quick mode: the MLP, one flavour each, one
    strategy per trainer."""
    out = []
    for model in _models(config):
        for strategy in _strategies(config):
            flavours = [*strategy.keras, *(flavour for flavour, _ in strategy.why_not)]
            if config.quick:
                flavours = flavours[:1]
            out += [Cell(strategy, flavour, model) for flavour in flavours]
    return out


def _args(config: BenchConfig, cell: Cell) -> tuple[str, ...]:
    if config.quick:
        loop = ("--steps", "40", "--warmup", "2", "--window", "5", "--eval-every", "20")
    else:
        loop = ("--steps", "300", "--warmup", "10", "--window", "20", "--eval-every", "25")
    return ("--strategy", cell.strategy.name, "--model", cell.model, *loop, "--batch", "64",
            "--target", str(TARGET_ACCURACY), "--threads", str(config.threads_per_rank(HOSTS)))


def cell_job(config: BenchConfig, cell: Cell) -> Job:
    legacy = "0" if cell.keras == "keras3" else "1"
    return Job("strategies.py", Launcher.LOCAL_MODE, HOSTS, _args(config, cell), (("TF_USE_LEGACY_KERAS", legacy),),
               repeat=True, local_options=("--distribution", cell.strategy.distribution,
                                           *cell.strategy.local_options))


def jobs(config: BenchConfig) -> list[Job]:
    """One job per cell that can run."""
    return [cell_job(config, cell) for cell in cells(config) if not cell.why_not]


def cell_figures(runs: list[JobRun]) -> dict[str, Any]:
    """The cell's figures over its successful runs."""
    ok = [run for run in runs if run.ok]
    reporters = [(run, next(rank for rank in run.ranks if rank.get("rank") == 0)) for run in ok]
    windows = [value for _, rank in reporters for value in rank["window_samples_per_second"]]
    return {
        "windows": windows,
        "to_target": [rank["seconds_to_target"] for _, rank in reporters],
        "first_step": [rank["first_step_done"] - run.started for run, rank in reporters],
        "peak_rss": [max(rank["peak_rss_bytes"] for rank in run.ranks) for run in ok],
        "final_accuracy": [rank["final_accuracy"] for _, rank in reporters],
        "processes": reporters[0][1]["processes"] if reporters else None,
        "failed": [run.reason for run in runs if not run.ok],
    }


def median_of(values: list[Any]) -> float | None:
    known = [value for value in values if value is not None]
    return summarise(known).median if known else None


def _detail(figures: dict[str, Any]) -> str:
    speed = median_of(figures["windows"])
    reached = [value for value in figures["to_target"] if value is not None]
    to_target = (f"{TARGET_ACCURACY:.2f} held-out after {median_of(reached):.1f} s of training"
                 if len(reached) == len(figures["to_target"]) else
                 f"{TARGET_ACCURACY:.2f} held-out not reached in {len(figures['to_target']) - len(reached)} of "
                 f"{len(figures['to_target'])} runs (final {median_of(figures['final_accuracy']):.3f})")
    return (f"{speed:.0f} samples/s; {to_target}; first step {median_of(figures['first_step']):.1f} s after launch; "
            f"peak RSS {median_of(figures['peak_rss']) / 2**20:.0f} MiB per process")


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """One row per cell: samples/s over the fastest cell's of the same model, and the cell's other figures."""
    result = MeasurementResult(NAME, TITLE)
    table: dict[str, list[dict[str, Any]]] = {}
    for model in _models(config):
        model_cells = [cell for cell in cells(config) if cell.model == model]
        figures = {cell: cell_figures(list(runs(cell_job(config, cell)))) for cell in model_cells if not cell.why_not}
        speeds = {cell: median_of(values["windows"]) for cell, values in figures.items() if values["windows"]}
        fastest = max(speeds, key=lambda cell: speeds[cell]) if speeds else None
        table[model] = []
        for cell in model_cells:
            comparison = f"{MODEL_NAMES[model]} samples/s: {cell.label} / fastest"
            entry: dict[str, Any] = {"strategy": cell.strategy.name, "label": cell.strategy.label,
                                     "keras": cell.keras, "engine": cell.strategy.engine}
            if cell.why_not:
                result.rows.append(Row(comparison, None, None, f"cannot run: {cell.why_not}"))
                table[model].append({**entry, "why_not": cell.why_not})
                continue
            values = figures[cell]
            if cell not in speeds or fastest is None:
                reason = values["failed"][0] if values["failed"] else "not run"
                result.rows.append(Row(comparison, None, None, f"n/a: {reason}"))
                table[model].append({**entry, "failed": reason})
                continue
            ratio = summarise([value / speeds[fastest] for value in values["windows"]])
            tag = " (the fastest)" if cell == fastest else ""
            result.rows.append(Row(comparison, ratio, None, _detail(values) + tag))
            table[model].append({**entry, "ratio": ratio.to_json(), "samples_per_second": speeds[cell],
                                 "seconds_to_target": median_of(values["to_target"]),
                                 "reached_target": sum(value is not None for value in values["to_target"]),
                                 "runs": len(values["to_target"]),
                                 "first_step_seconds": median_of(values["first_step"]),
                                 "peak_rss_mib": median_of(values["peak_rss"]) / 2**20,
                                 "final_accuracy": median_of(values["final_accuracy"]),
                                 "processes": values["processes"], "fastest": cell == fastest})
    result.raw = {"target_accuracy": TARGET_ACCURACY, "hosts": HOSTS, "models": table}
    result.notes.append(
        f"Strategies: one job per strategy x Keras flavour x model, `smddp local --instance-count {HOSTS}` with the "
        "strategy's distribution, global batch 64, Adam 0.001, 4,000 real MNIST digits; samples/s over windows of "
        "steps (evaluations excluded), time to target from the end of the first step. The parameter-server job "
        "runs SageMaker's layout on 2 hosts: the coordinator and 1 worker run the script, each host a ps "
        "(their memory is not counted).")
    return result
