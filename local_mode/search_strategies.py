"""The search strategies of local tuning, in SageMaker's terms: a ``HyperParameterTuningJobConfig``'s parameter ranges
and strategy (``Random``, ``Grid``, ``Bayesian``, ``Hyperband``) turned into the values of each next trial. The
tuning job that runs the trials is :mod:`~local_mode.tuning`; SageMaker's semantics of each strategy are listed
there.
"""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smddp_compat.local_mode.early_stopping import hyperband_resources
from smddp_compat.local_mode.errors import ConfigurationError

__all__ = ["STRATEGIES", "ParameterRange", "parameter_ranges", "SearchStrategy", "RandomSearch", "GridSearch",
           "BayesianSearch", "HyperbandSearch", "search_strategy"]

STRATEGIES = ("Bayesian", "Random", "Grid", "Hyperband")
_SCALINGS = ("Auto", "Linear", "Logarithmic", "ReverseLogarithmic")
_RANGE_KINDS = {"ContinuousParameterRanges": "Continuous", "IntegerParameterRanges": "Integer",
                "CategoricalParameterRanges": "Categorical"}


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
