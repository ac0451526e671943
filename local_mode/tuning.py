"""Hyperparameter tuning jobs on this machine, in SageMaker's terms: a CreateHyperParameterTuningJob request in,
trials run by the caller's ``run_trial``, DescribeHyperParameterTuningJob and ListTrainingJobsForHyperParameterTuningJob
answers out. No SageMaker SDK here: SDK v2's glue (:mod:`smddp_compat.estimators._local_tuning`) and any other
caller hand it the request and a way to run one training job.

SageMaker's semantics (developer guide, "How Hyperparameter Tuning Works" and "Define Hyperparameter Ranges"):

- ranges: ``ContinuousParameterRanges`` and ``IntegerParameterRanges`` (``MinValue``, ``MaxValue``, ``ScalingType``
  ``Linear``, ``Logarithmic`` (values > 0), ``ReverseLogarithmic`` (continuous, 0 <= values < 1) or ``Auto``,
  searched here as ``Linear``) and ``CategoricalParameterRanges`` (``Values``);
- ``Random``: each trial's values drawn independently (``RandomSeed`` makes the draws repeatable); ``Grid``:
  categorical ranges only, every combination once, in order, ``MaxNumberOfTrainingJobs`` defaulting to their count;
  ``Bayesian``: Optuna's TPE sampler (SageMaker's own Bayesian model is not public: the trials it picks differ);
  ``Hyperband``: Optuna's Hyperband pruner over randomly drawn values (SageMaker's own Hyperband is not public:
  which trials it stops differs), each value of the objective a trial prints one epoch (its resource), a trial
  stopped once it printed ``MaxResource`` values (given, or read from the static ``epochs``, ``numepochs``,
  ``n-epochs``, ``n_epochs`` or ``num_epochs``) and never before ``MinResource``;
- early stopping (``TrainingJobEarlyStoppingType`` ``Auto``, "Stop Training Jobs Early"): after each epoch (each value
  of the objective a trial prints), a trial whose value is worse than the median of the running averages of the
  ended trials' values up to that epoch is stopped (:mod:`~local_mode.early_stopping`);
- a trial stopped early (by either) ends ``Stopped`` and its last value is its objective;
- each trial gets the static and tuned hyperparameters and ``_tuning_objective_metric``; its objective is the
  objective metric's final value (``FinalMetricDataList``: the last value its ``MetricDefinitions`` regex found);
- a failed trial is counted (``TrainingJobStatusCounters.NonRetryableError``, ``ObjectiveStatusCounters.Failed``,
  as is a completed one without the metric) and the search goes on; the tuning job fails only when no trial gave an
  objective;
- at most ``MaxParallelTrainingJobs`` trials at once, fewer when this machine's cores cannot run that many.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

from smddp_compat import contract
from smddp_compat.launcher import StopSignalled, stop_signals_noted
from smddp_compat.local_mode.early_stopping import MedianStoppingRule, hyperband_resources
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.lifecycle import JobControl

__all__ = [
    "STRATEGIES", "ParameterRange", "parameter_ranges", "SearchStrategy", "search_strategy", "TuningJob",
    "tuning_job_arn", "TrialRunner", "ParentTuningJob", "WARM_START_TYPES",
]

STRATEGIES = ("Bayesian", "Random", "Grid", "Hyperband")
_SCALINGS = ("Auto", "Linear", "Logarithmic", "ReverseLogarithmic")
_RANGE_KINDS = {"ContinuousParameterRanges": "Continuous", "IntegerParameterRanges": "Integer",
                "CategoricalParameterRanges": "Categorical"}
_POLL_SECONDS = 1.0

#: Runs one training job: its name, its hyperparameters (strings, static ones, tuned ones and
#: ``_tuning_objective_metric``) and the control to run it with (:class:`~local_mode.lifecycle.JobControl`: the
#: tuning job stops it early, or on a stop signal, and hears its metrics through it) -> its DescribeTrainingJob
#: answer. An exception counts as a failed job.
TrialRunner = Callable[[str, Mapping[str, str], JobControl], Mapping[str, Any]]

#: CreateHyperParameterTuningJob's ``WarmStartConfig.WarmStartType`` values.
WARM_START_TYPES = ("IdenticalDataAndAlgorithm", "TransferLearning")


@dataclass(frozen=True)
class ParentTuningJob:
    """An earlier tuning job a warm start learns from: its name, its DescribeHyperParameterTuningJob answer and its
    trials (ListTrainingJobsForHyperParameterTuningJob's ``TrainingJobSummaries``)."""

    name: str
    description: Mapping[str, Any]
    training_jobs: Sequence[Mapping[str, Any]]


def tuning_job_arn(region: str, name: str) -> str:
    """A tuning job's ARN as SageMaker forms it (name in lower case)."""
    return f"arn:aws:sagemaker:{region}:{contract.LOCAL_ACCOUNT}:hyper-parameter-tuning-job/{name.lower()}"


def _number(text: Any, where: str, kind: str) -> float:
    try:
        value = int(text) if kind == "Integer" else float(text)
    except (TypeError, ValueError):
        raise ConfigurationError(where, text, f"is not {'an integer' if kind == 'Integer' else 'a number'}",
                                 "give e.g. MinValue='0.001', MaxValue='0.1'") from None
    if not math.isfinite(value):
        raise ConfigurationError(where, text, "is not finite", "give a finite bound")
    return value


@dataclass(frozen=True)
class ParameterRange:
    """One tuned hyperparameter: ``kind`` ``Continuous``, ``Integer`` or ``Categorical``; ``low``/``high`` and
    ``scaling`` for the first two, ``values`` for the last."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    scaling: str = "Linear"
    values: tuple[str, ...] = ()

    def from_unit(self, u: float) -> str:
        """The value at ``u`` in [0, 1] along the range's scale, as SageMaker passes it (a string)."""
        if self.kind == "Categorical":
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        low, high = self.low, self.high + (1 if self.kind == "Integer" else 0)  # an integer's top value is as wide
        if self.scaling == "Logarithmic":
            value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        elif self.scaling == "ReverseLogarithmic":
            value = 1 - math.exp(math.log(1 - low) + u * (math.log(1 - high) - math.log(1 - low)))
        else:
            value = low + u * (high - low)
        if self.kind == "Integer":
            return str(int(min(max(math.floor(value), self.low), self.high)))
        return repr(min(max(value, self.low), self.high))


def parameter_ranges(config: Mapping[str, Any]) -> list[ParameterRange]:
    """The ranges of ``HyperParameterTuningJobConfig.ParameterRanges``, checked as SageMaker checks them.

    Raises:
        ConfigurationError: No range, a duplicate name, a bound that is no number, min > max, an unknown scaling,
            a logarithmic range not above 0, a reverse-logarithmic one outside [0, 1) or on integers, an empty
            categorical list.
    """
    ranges: list[ParameterRange] = []
    for key, kind in _RANGE_KINDS.items():
        for entry in config.get(key) or []:
            name = str(entry["Name"])
            where = f"hyperparameter_ranges[{name!r}]"
            if kind == "Categorical":
                values = tuple(str(v) for v in entry.get("Values") or [])
                if not values:
                    raise ConfigurationError(where, entry, "has no values", "give at least one value")
                ranges.append(ParameterRange(name, kind, values=values))
                continue
            low, high = _number(entry["MinValue"], where, kind), _number(entry["MaxValue"], where, kind)
            scaling = entry.get("ScalingType") or "Auto"
            if scaling not in _SCALINGS:
                raise ConfigurationError(where, scaling, "is not a scaling type", f"use one of {', '.join(_SCALINGS)}")
            if low > high:
                raise ConfigurationError(where, entry, "has MinValue above MaxValue", "swap the bounds")
            if scaling == "Logarithmic" and low <= 0:
                raise ConfigurationError(where, entry, "is logarithmic with values not above 0",
                                         "give MinValue > 0 or scaling 'Linear'")
            if scaling == "ReverseLogarithmic" and (kind == "Integer" or low < 0 or high >= 1):
                raise ConfigurationError(where, entry, "is reverse-logarithmic outside 0 <= value < 1 (continuous "
                                         "ranges only)", "give 0 <= MinValue <= MaxValue < 1, or scaling 'Linear'")
            ranges.append(ParameterRange(name, kind, low, high, "Linear" if scaling == "Auto" else scaling))
    names = [r.name for r in ranges]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigurationError("hyperparameter_ranges", duplicates, "are tuned twice", "give each name one range")
    if not ranges:
        raise ConfigurationError("hyperparameter_ranges", config, "has no range", "give at least one range")
    return ranges


class SearchStrategy:
    """Picks the trials' values: :meth:`suggest` (None: nothing left to try), then :meth:`observe` each result; a
    trial is known by its number (1, 2, ...: two trials may have the same values)."""

    def __init__(self, ranges: Sequence[ParameterRange]) -> None:
        self.ranges = list(ranges)

    def suggest(self, number: int) -> dict[str, str] | None:
        """The values of trial ``number``, or None: nothing left to try."""
        raise NotImplementedError

    def observe(self, number: int, objective: float | None, stopped_early: bool = False) -> None:
        """Learns a trial's objective (None: the trial gave none; ``stopped_early``: its last value before a stop)."""

    def intermediate(self, number: int, epoch: int, value: float) -> str | None:
        """Learns a running trial's objective at ``epoch`` (1, 2, ...); returns why the strategy stops it, or None."""
        return None

    def learn(self, values: Mapping[str, str], objective: float) -> bool:
        """Learns an earlier tuning job's trial (warm start); returns whether it was taken (Random learns nothing:
        its trials are independent)."""
        return False


class RandomSearch(SearchStrategy):
    """Each value drawn uniformly along its range's scale, every trial independent of the others."""

    def __init__(self, ranges: Sequence[ParameterRange], seed: int | None) -> None:
        super().__init__(ranges)
        self._random = random.Random(seed)

    def suggest(self, number: int) -> dict[str, str]:
        return {r.name: r.from_unit(self._random.random()) for r in self.ranges}


class GridSearch(SearchStrategy):
    """Every combination of the categorical values once, in order (the first range varying slowest)."""

    def __init__(self, ranges: Sequence[ParameterRange]) -> None:
        other = [r.name for r in ranges if r.kind != "Categorical"]
        if other:
            raise ConfigurationError("strategy", "Grid", f"takes categorical ranges only ({', '.join(other)} are "
                                     "not)", "make them CategoricalParameter lists, or use strategy='Random'")
        super().__init__(ranges)
        self._combinations = iter(itertools.product(*(r.values for r in ranges)))

    @property
    def count(self) -> int:
        return math.prod(len(r.values) for r in self.ranges)

    def suggest(self, number: int) -> dict[str, str] | None:
        combination = next(self._combinations, None)
        return None if combination is None else dict(zip((r.name for r in self.ranges), combination))


def _optuna(strategy: str) -> Any:
    """Optuna, the Bayesian and Hyperband strategies' library (imported only when one is asked for: it is an extra)."""
    try:
        import optuna
    except ImportError:
        raise ConfigurationError("strategy", strategy, "needs Optuna, which is not installed",
                                 "pip install 'smddp-compat[tune]' (or bash setup.sh), or use strategy='Random'")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class BayesianSearch(SearchStrategy):
    """Optuna's TPE sampler over the ranges (log-scaled ones searched in log space; a reverse-logarithmic value x
    as 1 - x in log space); failed trials are told as failed."""

    _name = "Bayesian"

    def __init__(self, ranges: Sequence[ParameterRange], seed: int | None, maximize: bool) -> None:
        optuna = _optuna(self._name)
        super().__init__(ranges)
        self._optuna = optuna
        self._study = optuna.create_study(direction="maximize" if maximize else "minimize",
                                          sampler=self._sampler(seed), pruner=self._pruner())
        self._asked: dict[int, Any] = {}  # trial number -> Optuna's trial
        self._asked_lock = threading.Lock()

    def _sampler(self, seed: int | None) -> Any:
        return self._optuna.samplers.TPESampler(seed=seed)

    def _pruner(self) -> Any:
        return self._optuna.pruners.NopPruner()

    def suggest(self, number: int) -> dict[str, str]:
        trial = self._study.ask()
        values = {}
        for r in self.ranges:
            if r.kind == "Categorical":
                values[r.name] = str(trial.suggest_categorical(r.name, list(r.values)))
            elif r.scaling == "ReverseLogarithmic":
                values[r.name] = repr(1 - trial.suggest_float(r.name, 1 - r.high, 1 - r.low, log=True))
            elif r.kind == "Integer":
                values[r.name] = str(trial.suggest_int(r.name, int(r.low), int(r.high),
                                                       log=r.scaling == "Logarithmic"))
            else:
                values[r.name] = repr(trial.suggest_float(r.name, r.low, r.high, log=r.scaling == "Logarithmic"))
        with self._asked_lock:
            self._asked[number] = trial
        return values

    def _point(self, r: ParameterRange, text: str) -> tuple[Any, Any] | None:
        """An earlier trial's value of ``r`` as Optuna's distribution and parameter (as :meth:`suggest` asks for
        it), or None when it lies outside the range."""
        distributions = self._optuna.distributions
        if r.kind == "Categorical":
            return (distributions.CategoricalDistribution(list(r.values)), text) if text in r.values else None
        try:
            value = float(text)
        except ValueError:
            return None
        if not r.low <= value <= r.high:
            return None
        if r.scaling == "ReverseLogarithmic":
            return distributions.FloatDistribution(1 - r.high, 1 - r.low, log=True), 1 - value
        if r.kind == "Integer":
            return (distributions.IntDistribution(int(r.low), int(r.high), log=r.scaling == "Logarithmic"),
                    int(value)) if value.is_integer() else None
        return distributions.FloatDistribution(r.low, r.high, log=r.scaling == "Logarithmic"), value

    def learn(self, values: Mapping[str, str], objective: float) -> bool:
        points = {r.name: self._point(r, values[r.name]) for r in self.ranges if r.name in values}
        if len(points) != len(self.ranges) or None in points.values():
            return False  # tuned otherwise, or outside today's ranges: nothing the sampler can place
        self._study.add_trial(self._optuna.trial.create_trial(
            params={name: point[1] for name, point in points.items()},  # type: ignore[index]
            distributions={name: point[0] for name, point in points.items()}, value=objective))  # type: ignore[index]
        return True

    def observe(self, number: int, objective: float | None, stopped_early: bool = False) -> None:
        with self._asked_lock:
            trial = self._asked.pop(number, None)
        if trial is None:
            return
        if stopped_early:
            self._study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)
        elif objective is None:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, objective)


class HyperbandSearch(BayesianSearch):
    """Hyperband: values drawn at random (Optuna's random sampler), trials stopped by Optuna's Hyperband pruner from
    their objective at each epoch, between ``min_resource`` and ``max_resource`` epochs (successive halving in
    brackets, reduction factor 3)."""

    _name = "Hyperband"

    def __init__(self, ranges: Sequence[ParameterRange], seed: int | None, maximize: bool, min_resource: int,
                 max_resource: int) -> None:
        self.min_resource, self.max_resource = min_resource, max_resource
        super().__init__(ranges, seed, maximize)

    def _sampler(self, seed: int | None) -> Any:
        return self._optuna.samplers.RandomSampler(seed=seed)

    def _pruner(self) -> Any:
        return self._optuna.pruners.HyperbandPruner(min_resource=self.min_resource, max_resource=self.max_resource)

    def intermediate(self, number: int, epoch: int, value: float) -> str | None:
        with self._asked_lock:
            trial = self._asked.get(number)
        if trial is not None:
            trial.report(value, epoch)
            if epoch >= self.min_resource and trial.should_prune():
                return f"Hyperband at epoch {epoch}"
        if epoch >= self.max_resource:
            return f"MaxResource ({self.max_resource} epochs) reached"
        return None


def search_strategy(config: Mapping[str, Any], static: Mapping[str, str] | None = None) -> SearchStrategy:
    """The strategy of a ``HyperParameterTuningJobConfig`` (``Strategy``, ``ParameterRanges``, ``RandomSeed``,
    ``StrategyConfig``), ``static`` the training job definition's ``StaticHyperParameters`` (Hyperband's epochs).

    Raises:
        ConfigurationError: A strategy other than Bayesian, Random, Grid or Hyperband, a range refused by
            :func:`parameter_ranges`, or Hyperband's resources refused by
            :func:`~local_mode.early_stopping.hyperband_resources`.
    """
    name = config.get("Strategy", "Bayesian")
    if name not in STRATEGIES:
        raise ConfigurationError("strategy", name, "is not run by local tuning", f"use one of {', '.join(STRATEGIES)}")
    ranges = parameter_ranges(config.get("ParameterRanges") or {})
    seed = config.get("RandomSeed")
    if name == "Grid":
        return GridSearch(ranges)
    if name == "Random":
        return RandomSearch(ranges, seed)
    maximize = (config.get("HyperParameterTuningJobObjective") or {}).get("Type", "Maximize") == "Maximize"
    if name == "Hyperband":
        return HyperbandSearch(ranges, seed, maximize, *hyperband_resources(config, static or {}))
    return BayesianSearch(ranges, seed, maximize)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class TuningJob:
    """A tuning job run here: :meth:`run` its trials, then :meth:`describe` and :meth:`training_job_summaries`
    answer as SageMaker's DescribeHyperParameterTuningJob and ListTrainingJobsForHyperParameterTuningJob do.

    Args:
        request: The CreateHyperParameterTuningJob request (``HyperParameterTuningJobName``,
            ``HyperParameterTuningJobConfig``, ``TrainingJobDefinition``).
        region: The region its ARNs name.
        processes_per_trial: How many processes one trial starts (caps the trials run at once by this machine's
            cores).

    Raises:
        ConfigurationError: A request local tuning cannot run (its strategy, ranges, objective or limits).
    """

    def __init__(self, request: Mapping[str, Any], *, region: str, processes_per_trial: int = 1,
                 parents: Sequence[ParentTuningJob] = ()) -> None:
        self.request = copy.deepcopy(dict(request))
        self.name = str(self.request["HyperParameterTuningJobName"])
        self.region = region
        config = self.request["HyperParameterTuningJobConfig"]
        objective = config.get("HyperParameterTuningJobObjective") or {}
        self.objective_name = objective.get("MetricName")
        self.maximize = objective.get("Type", "Maximize") == "Maximize"
        definition = self.request.get("TrainingJobDefinition") or {}
        metrics = [d.get("Name") for d in definition.get("AlgorithmSpecification", {}).get("MetricDefinitions") or []]
        if not self.objective_name or self.objective_name not in metrics:
            raise ConfigurationError("objective_metric_name", self.objective_name,
                                     f"has no metric definition ({', '.join(map(str, metrics)) or 'none given'})",
                                     "pass metric_definitions=[{'Name': <objective>, 'Regex': ...}] to the tuner")
        if self.request.get("Autotune"):
            raise ConfigurationError("autotune", self.request["Autotune"], "is not run by local tuning",
                                     "tune without autotune here (SageMaker runs it)")
        self.strategy = search_strategy(config, definition.get("StaticHyperParameters") or {})
        self.warm_start = self.request.get("WarmStartConfig") or None
        self.parents = list(parents)
        self.learned = self._learn_from_parents() if self.warm_start else 0
        limits = config.get("ResourceLimits") or {}
        self.max_jobs = limits.get("MaxNumberOfTrainingJobs")
        if isinstance(self.strategy, GridSearch):
            self.max_jobs = min(self.max_jobs or self.strategy.count, self.strategy.count)
        requested = limits.get("MaxParallelTrainingJobs", 1)
        for field, value in (("max_jobs", self.max_jobs), ("max_parallel_jobs", requested)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(field, value, "must be a whole number >= 1", f"pass e.g. {field}=4")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.parallel = max(1, min(requested, cores // max(1, processes_per_trial)))
        self.capped_note = (f"max_parallel_jobs={requested}: this machine runs {self.parallel} trial(s) at once "
                            f"({cores} core(s), {processes_per_trial} process(es) a trial)"
                            if self.parallel < requested else None)
        early = config.get("TrainingJobEarlyStoppingType", "Off")
        if early not in ("Off", "Auto"):
            raise ConfigurationError("early_stopping_type", early, "is not an early stopping type",
                                     "use 'Off' or 'Auto'")
        self.early_stopping = MedianStoppingRule(self.maximize) if early == "Auto" else None
        self.max_runtime = limits.get("MaxRuntimeInSeconds")
        self.created = _now()
        self.ended: datetime | None = None
        self.status = "InProgress"
        self.failure_reason: str | None = None
        self._trials: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        #: Per trial: its objective's value at each epoch so far; why it was stopped early; its control.
        self._epochs: dict[str, list[float]] = {}
        self._stopped_early: dict[str, str] = {}
        self._controls: dict[str, JobControl] = {}
        self._numbers: dict[str, int] = {}
        self._outcomes: dict[str, Mapping[str, Any] | BaseException] = {}
        self._durations: list[float] = []

    def _learn_from_parents(self) -> int:
        """Checks a warm start as SageMaker does (1 to 5 parents, each ended, each with this objective) and tells the
        strategy every parent trial that gave the objective; returns how many it took."""
        config = self.warm_start
        names = [p.get("HyperParameterTuningJobName") for p in config.get("ParentHyperParameterTuningJobs") or []]
        if not 1 <= len(names) <= 5:
            raise ConfigurationError("warm_start_config", names, "needs 1 to 5 parent tuning jobs",
                                     "name at most 5 earlier tuning jobs")
        if config.get("WarmStartType") not in WARM_START_TYPES:
            raise ConfigurationError("warm_start_config", config.get("WarmStartType"), "is not a warm start type",
                                     f"use one of {', '.join(WARM_START_TYPES)}")
        if isinstance(self.strategy, GridSearch):
            raise ConfigurationError("warm_start_config", names, "is not run by local tuning with strategy 'Grid'",
                                     "use strategy='Bayesian' (or tune without warm start)")
        if sorted(p.name for p in self.parents) != sorted(names):
            raise ConfigurationError("warm_start_config", names, "names tuning jobs that were not found",
                                     "name tuning jobs run here, into the same output folder")
        objective = {"MetricName": self.objective_name, "Type": "Maximize" if self.maximize else "Minimize"}
        learned = 0
        for parent in self.parents:
            status = parent.description.get("HyperParameterTuningJobStatus")
            if status not in ("Completed", "Stopped", "Failed"):
                raise ConfigurationError(f"warm_start_config[{parent.name!r}]", status, "has not ended",
                                         "warm-start from tuning jobs that have ended")
            theirs = (parent.description.get("HyperParameterTuningJobConfig") or {}).get(
                "HyperParameterTuningJobObjective") or {}
            if {key: theirs.get(key) for key in objective} != objective:
                raise ConfigurationError(f"warm_start_config[{parent.name!r}]", theirs, "tuned another objective "
                                         f"than {objective}", "warm-start from tuning jobs of the same objective")
            for trial in parent.training_jobs:
                metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric")
                if metric is not None:
                    learned += self.strategy.learn(trial.get("TunedHyperParameters") or {}, float(metric["Value"]))
        return learned

    def overall_best(self) -> dict[str, Any] | None:
        """An IDENTICAL_DATA_AND_ALGORITHM warm start's ``OverallBestTrainingJob``: the best of this job's trials and
        its parents' best ones (None for other jobs, or when none gave the objective)."""
        if not self.warm_start or self.warm_start.get("WarmStartType") != WARM_START_TYPES[0]:
            return None
        sign = 1 if self.maximize else -1
        candidates = [c for c in [self.best(), *(p.description.get("BestTrainingJob") for p in self.parents)]
                      if c and c.get("FinalHyperParameterTuningJobObjectiveMetric")]
        return max(candidates, key=lambda c: sign * float(c["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]),
                   default=None)

    # -- running ------------------------------------------------------------------------------------------------

    def _trial_name(self, index: int, values: Mapping[str, str]) -> str:
        digest = hashlib.sha1(json.dumps(dict(values), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name[:50]}-{index:03d}-{digest}"

    def _summary(self, name: str, values: Mapping[str, str]) -> dict[str, Any]:
        return {"TrainingJobName": name, "TrainingJobArn": contract.training_job_arn(self.region, name),
                "TuningJobName": self.name, "CreationTime": _now(), "TrainingJobStatus": "InProgress",
                "TunedHyperParameters": dict(values), "ObjectiveStatus": "Pending"}

    def _finish(self, summary: dict[str, Any], described: Mapping[str, Any] | BaseException) -> None:
        if isinstance(described, BaseException):
            described = {"TrainingJobStatus": "Failed", "FailureReason": f"{type(described).__name__}: {described}"}
        for key in ("TrainingStartTime", "TrainingEndTime", "FailureReason"):
            if described.get(key) is not None:
                summary[key] = described[key]
        summary["TrainingJobStatus"] = described.get("TrainingJobStatus", "Failed")
        summary.setdefault("TrainingEndTime", _now())
        final = {m["MetricName"]: m["Value"] for m in described.get("FinalMetricDataList") or []}
        ended_well = summary["TrainingJobStatus"] == "Completed" or (
            summary["TrainingJobStatus"] == "Stopped" and summary["TrainingJobName"] in self._stopped_early)
        if ended_well and self.objective_name in final:
            summary["ObjectiveStatus"] = "Succeeded"
            summary["FinalHyperParameterTuningJobObjectiveMetric"] = {
                "Type": "Maximize" if self.maximize else "Minimize", "MetricName": self.objective_name,
                "Value": float(final[self.objective_name])}
        else:
            summary["ObjectiveStatus"] = "Failed"

    def best(self) -> dict[str, Any] | None:
        """The summary of the trial with the best objective so far (the first one on a tie), or None."""
        scored = [t for t in self._trials if t["ObjectiveStatus"] == "Succeeded"]
        if not scored:
            return None
        sign = 1 if self.maximize else -1
        return max(scored, key=lambda t: (sign * t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"],
                                          -self._trials.index(t)))

    def _progress(self, summary: Mapping[str, Any], out: IO[str]) -> None:
        values = " ".join(f"{k}={v}" for k, v in summary["TunedHyperParameters"].items())
        index = self._trials.index(summary) + 1
        metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        result = (f"{self.objective_name}={metric['Value']:g}" if metric else
                  f"{summary['TrainingJobStatus']}, no {self.objective_name}"
                  + (f" ({' | '.join(summary['FailureReason'][:160].splitlines())})" if summary.get("FailureReason") else ""))
        early = self._stopped_early.get(summary["TrainingJobName"])
        if early is not None:
            result += f" (stopped early: {early})"
        best = self.best()
        best_text = (f"best {best['FinalHyperParameterTuningJobObjectiveMetric']['Value']:g} "
                     f"({best['TrainingJobName']})" if best else "no best yet")
        out.write(f"[tuning {self.name}] trial {index}/{self.max_jobs} {summary['TrainingJobName']}: {values} -> "
                  f"{result}; {best_text}{self._time_left()}\n")
        out.flush()

    def _time_left(self) -> str:
        """``; ~N min left`` from the trials' mean time so far and the trials still to run, ``parallel`` at once
        (empty when nothing is left or no trial ended yet)."""
        with self._lock:
            left = (self.max_jobs or 0) - len(self._durations)
            durations = list(self._durations)
        if left <= 0 or not durations:
            return ""
        seconds = statistics.fmean(durations) * math.ceil(left / self.parallel)
        return f"; ~{seconds / 60:.1f} min left" if seconds >= 60 else f"; ~{seconds:.0f} s left"

    def _heard(self, trial: str, number: int, control: JobControl, metric: str, value: float) -> None:
        """A value of one of a running trial's metrics: each value of the objective is an epoch, which the strategy
        (Hyperband), ``MaxResource`` or the early-stopping rule may stop the trial at."""
        if metric != self.objective_name or not math.isfinite(value):
            return
        with self._lock:
            epochs = self._epochs.setdefault(trial, [])
            epochs.append(value)
            mine = list(epochs)
            ended = [list(self._epochs.get(t["TrainingJobName"], ())) for t in self._trials
                     if t["TrainingJobStatus"] != "InProgress"]
        why = self.strategy.intermediate(number, len(mine), value)
        if why is None and self.early_stopping is not None and self.early_stopping.should_stop(mine, ended):
            why = f"epoch {len(mine)}: {value:g} is worse than the median of the earlier trials' running averages"
        if why is not None and trial not in self._stopped_early:
            with self._lock:
                self._stopped_early[trial] = why
            control.stop()

    def _start(self, pool: ThreadPoolExecutor, run_trial: TrialRunner, static: Mapping[str, str], number: int,
               values: Mapping[str, str]) -> tuple[Future[Any], dict[str, Any]]:
        """Starts trial ``number`` in ``pool``: its summary recorded, its control made (stopped early through it)."""
        summary = self._summary(self._trial_name(number, values), values)
        name = summary["TrainingJobName"]
        control = JobControl()
        control.on_metric = lambda metric, value: self._heard(name, number, control, metric, value)
        with self._lock:
            self._trials.append(summary)
            self._controls[name] = control
            self._numbers[name] = number
        hyperparameters = {**static, **values, contract.TUNING_OBJECTIVE_METRIC: self.objective_name}
        return pool.submit(self._timed, run_trial, name, hyperparameters, control), summary

    def _timed(self, run_trial: TrialRunner, name: str, hyperparameters: Mapping[str, str],
               control: JobControl) -> None:
        """Runs one trial in a worker thread; its DescribeTrainingJob (or what it raised) is kept for :meth:`_ended`."""
        started = time.monotonic()
        outcome: Mapping[str, Any] | BaseException
        try:
            outcome = run_trial(name, hyperparameters, control)
        except BaseException as exc:  # noqa: BLE001 - a failed trial (even SystemExit), counted as SageMaker counts it
            outcome = exc
        with self._lock:
            self._durations.append(time.monotonic() - started)
            self._outcomes[name] = outcome

    def _interrupted(self, running: Mapping[Future[Any], dict[str, Any]], signum: int, out: IO[str]) -> None:
        """A stop signal: every running trial is asked to stop and recorded once it stopped (each within its grace
        period); one that had not started yet is dropped."""
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.status, self.failure_reason = "Stopped", f"interrupted ({name}): the running trials were stopped"
        out.write(f"[tuning {self.name}] interrupted ({name}): stopping {len(running)} running trial(s); the ended "
                  "ones are kept\n")
        out.flush()
        for future, summary in running.items():
            if future.cancel():
                with self._lock:
                    self._trials.remove(summary)
            else:
                self._controls[summary["TrainingJobName"]].stop()
        for future in wait([future for future in running if not future.cancelled()]).done:
            self._ended(running[future], out)

    def _ended(self, summary: dict[str, Any], out: IO[str]) -> None:
        """Records an ended trial, tells the strategy, and prints its line."""
        with self._lock:
            self._finish(summary, self._outcomes[summary["TrainingJobName"]])
            del self._outcomes[summary["TrainingJobName"]]
        metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        self.strategy.observe(self._numbers[summary["TrainingJobName"]], metric["Value"] if metric else None,
                              stopped_early=summary["TrainingJobName"] in self._stopped_early)
        self._progress(summary, out)

    def run(self, run_trial: TrialRunner, stream: IO[str] | None = None) -> None:
        """Runs the trials: up to ``max_jobs``, ``parallel`` at once, each given its values by the strategy and
        told to it when it ends; a line per ended trial on ``stream`` (None: standard output). A trial that fails
        or raises is counted and the search goes on. The job ends ``Completed`` (``Failed`` when no trial gave an
        objective). A stop signal (Ctrl-C, SIGTERM, a closed terminal's SIGHUP, SIGQUIT: heard between two steps of
        the loop when this runs in the main thread, so that no trial is half recorded) stops the running trials
        (each ends ``Stopped``, its artifacts stored), keeps the ended ones and ends the job ``Stopped``; then
        KeyboardInterrupt is raised for Ctrl-C, :class:`~smddp_compat.launcher.StopSignalled` for the others."""
        out = stream if stream is not None else sys.stdout
        static = dict(self.request.get("TrainingJobDefinition", {}).get("StaticHyperParameters") or {})
        if self.capped_note:
            out.write(f"[tuning {self.name}] {self.capped_note}\n")
        if self.warm_start:
            parents = ", ".join(p.name for p in self.parents)
            learned = (f"the search learned {self.learned} trial(s) of {parents}" if isinstance(
                self.strategy, BayesianSearch) else f"Random search draws each trial on its own: {parents} inform "
                "the overall best only")
            out.write(f"[tuning {self.name}] warm start ({self.warm_start['WarmStartType']}): {learned}\n")
        deadline = self.created.timestamp() + self.max_runtime if self.max_runtime else None
        running: dict[Future[Any], dict[str, Any]] = {}
        exhausted = False
        # The stop signals are noted only while the loop runs; they are back to what they were (a Ctrl-C raises)
        # while the pool waits for its threads on the way out.
        with ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix=f"tuning-{self.name}") as pool, \
                stop_signals_noted() as signals:
            try:
                while (running or not exhausted) and not signals:
                    while not exhausted and len(running) < self.parallel and len(self._trials) < self.max_jobs:
                        if deadline is not None and _now().timestamp() >= deadline:
                            exhausted = True
                            break
                        number = len(self._trials) + 1
                        values = self.strategy.suggest(number)
                        if values is None:
                            exhausted = True
                            break
                        future, summary = self._start(pool, run_trial, static, number, values)
                        running[future] = summary
                    exhausted = exhausted or len(self._trials) >= self.max_jobs
                    if not running:
                        break
                    done, _ = wait(list(running), timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        self._ended(running.pop(future), out)
                if signals:
                    self._interrupted(running, signals[0], out)
                    raise KeyboardInterrupt if signals[0] == signal.SIGINT else StopSignalled(signals[0])
            finally:
                self.ended = _now()
        if self.status == "InProgress":
            self.status = "Completed" if self.best() else "Failed"
            if self.status == "Failed":
                self.failure_reason = (f"no training job gave the objective metric {self.objective_name!r} "
                                       f"({len(self._trials)} ran): see their FailureReason and logs")

    # -- the end's table and chart ----------------------------------------------------------------------------------

    def table(self, folder: str) -> str:
        """The trials as a table, oldest first, the best one marked ``*``, then the best trial's model (in ``folder``,
        the tuning job's), the parents' better one (a warm start) and the job's end."""
        trials = self.training_job_summaries()[::-1]
        best = self.best()
        names = sorted({name for trial in trials for name in trial["TunedHyperParameters"]})
        rows = [["", "trial", *names, "status", self.objective_name or "objective"]]
        for trial in trials:
            metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric")
            rows.append(["*" if best is not None and trial["TrainingJobName"] == best["TrainingJobName"] else "",
                         trial["TrainingJobName"], *(str(trial["TunedHyperParameters"].get(n, "")) for n in names),
                         trial["TrainingJobStatus"], f"{metric['Value']:g}" if metric else "-"])
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        if best is not None:
            value = best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
            lines.append(f"best trial {best['TrainingJobName']}: {self.objective_name}={value:g}; its model: "
                         f"{os.path.join(folder, best['TrainingJobName'], 'output', 'model.tar.gz')}")
        overall = self.overall_best()
        if overall is not None and overall["TrainingJobName"] != (best or {}).get("TrainingJobName"):
            value = overall["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
            lines.append(f"best of the parents' (better): {overall['TrainingJobName']} of "
                         f"{overall.get('TuningJobName')}: {self.objective_name}={value:g}")
        lines.append(f"tuning job {self.name}: {self.status}" + (f": {self.failure_reason}" if self.failure_reason
                                                                   else ""))
        return "\n".join(lines) + "\n"

    def write_chart(self, path: str) -> bool:
        """Writes a PNG of the objective of each trial (in start order; a hollow mark for a trial stopped early) and
        the best so far; returns False, writing nothing, when no trial gave the objective."""
        trials = self.training_job_summaries()[::-1]
        points = [(i, t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], t["TrainingJobName"] in
                   self._stopped_early) for i, t in enumerate(trials, 1)
                  if t.get("FinalHyperParameterTuningJobObjectiveMetric")]
        if not points:
            return False
        import matplotlib  # a plotting library is a heavy import: only when a chart is drawn
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        figure = Figure(figsize=(7, 4))
        axes = figure.subplots()
        pick = max if self.maximize else min
        best, bests = None, []
        for _, value, _ in points:
            best = value if best is None else pick(best, value)
            bests.append(best)
        full = [(i, v) for i, v, early in points if not early]
        early = [(i, v) for i, v, stopped in points if stopped]
        if full:
            axes.scatter(*zip(*full), label="trial")
        if early:
            axes.scatter(*zip(*early), facecolors="none", edgecolors="tab:blue", label="trial stopped early")
        axes.step([i for i, _, _ in points], bests, where="post", color="tab:orange", label="best so far")
        axes.set_xlabel("trial")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(f"{self.objective_name} ({'maximize' if self.maximize else 'minimize'})")
        strategy = self.request["HyperParameterTuningJobConfig"].get("Strategy", "Bayesian")
        axes.set_title(f"tuning job {self.name} ({strategy})")
        axes.legend()
        figure.tight_layout()
        figure.savefig(path)
        return True

    # -- answers ------------------------------------------------------------------------------------------------

    def training_job_summaries(self) -> list[dict[str, Any]]:
        """ListTrainingJobsForHyperParameterTuningJob's ``TrainingJobSummaries``, newest first (SageMaker's
        default order, by creation time)."""
        with self._lock:
            return copy.deepcopy(self._trials[::-1])

    def describe(self) -> dict[str, Any]:
        """DescribeHyperParameterTuningJob's answer."""
        with self._lock:
            trials = copy.deepcopy(self._trials)
            best = copy.deepcopy(self.best())
        status = [t["TrainingJobStatus"] for t in trials]
        objective = [t["ObjectiveStatus"] for t in trials]
        answer: dict[str, Any] = {
            "HyperParameterTuningJobName": self.name,
            "HyperParameterTuningJobArn": tuning_job_arn(self.region, self.name),
            "HyperParameterTuningJobConfig": copy.deepcopy(self.request["HyperParameterTuningJobConfig"]),
            "HyperParameterTuningJobStatus": self.status,
            "CreationTime": self.created,
            "LastModifiedTime": self.ended or _now(),
            "TrainingJobStatusCounters": {
                "Completed": status.count("Completed"), "InProgress": status.count("InProgress"),
                "RetryableError": 0, "NonRetryableError": status.count("Failed"), "Stopped": status.count("Stopped"),
            },
            "ObjectiveStatusCounters": {key: objective.count(key) for key in ("Succeeded", "Pending", "Failed")},
            "ConsumedResources": {"RuntimeInSeconds": int(((self.ended or _now()) - self.created).total_seconds())},
        }
        for key in ("TrainingJobDefinition", "TrainingJobDefinitions", "WarmStartConfig", "Autotune"):
            if key in self.request:
                answer[key] = copy.deepcopy(self.request[key])
        if self.ended is not None:
            answer["HyperParameterTuningEndTime"] = self.ended
        if best is not None:
            answer["BestTrainingJob"] = best
        overall = self.overall_best()
        if overall is not None:
            answer["OverallBestTrainingJob"] = copy.deepcopy(overall)
        if self.failure_reason:
            answer["FailureReason"] = self.failure_reason
        return answer
