"""When a tuning job stops a trial before its end, in SageMaker's documented terms.

- ``TrainingJobEarlyStoppingType: Auto`` (developer guide, "Stop Training Jobs Early"): after each epoch, the
  trial's objective is compared with the median, over the earlier trials, of each one's running average of the
  objective up to that same epoch; a worse value (lower when maximizing, higher when minimizing) stops the trial.
  An epoch here is one value of the objective metric in the trial's log (its ``MetricDefinitions`` regex matching
  a line), so a script that prints its objective once per epoch is judged per epoch, as on SageMaker. The earlier
  trials are those that have ended; with none that reached the epoch, the trial goes on.
- ``Strategy: Hyperband`` (API reference, ``HyperbandStrategyConfig``): ``MaxResource`` epochs at most (given, or read
  from the static hyperparameters ``epochs``, ``numepochs``, ``n-epochs``, ``n_epochs`` or ``num_epochs``; at most
  20,000), never stopped before ``MinResource`` epochs (default 1), and early stopping must be ``Off``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.name_values import decode_value

__all__ = ["MedianStoppingRule", "hyperband_resources", "EPOCH_KEYS", "MAX_RESOURCE_LIMIT"]

#: The static hyperparameters Hyperband reads ``MaxResource`` from when it is not given, in SageMaker's order.
EPOCH_KEYS = ("epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs")
MAX_RESOURCE_LIMIT = 20_000


class MedianStoppingRule:
    """SageMaker's ``Auto`` early stopping (see the module docstring) for an objective to maximize or minimize."""

    def __init__(self, maximize: bool) -> None:
        self.maximize = maximize

    def should_stop(self, values: Sequence[float], earlier: Sequence[Sequence[float]]) -> bool:
        """Whether a trial whose objective was ``values`` (one per epoch so far) stops now, given the objective
        values of the earlier trials (each one's per-epoch values)."""
        epoch = len(values)
        if epoch == 0:
            return False
        averages = [statistics.fmean(series[:epoch]) for series in earlier if len(series) >= epoch]
        if not averages:
            return False
        median = statistics.median(averages)
        return values[-1] < median if self.maximize else values[-1] > median


def _whole_number(where: str, value: Any) -> int:
    decoded = decode_value(value) if isinstance(value, str) else value  # a static hyperparameter is JSON text
    try:
        if isinstance(decoded, bool) or float(str(decoded)) != int(float(str(decoded))):
            raise ValueError
        number = int(float(str(decoded)))
    except (ValueError, OverflowError):
        raise ConfigurationError(where, value, "is not a whole number", "give e.g. 10") from None
    if not 1 <= number <= MAX_RESOURCE_LIMIT:
        raise ConfigurationError(where, value, f"is outside 1 to {MAX_RESOURCE_LIMIT}",
                                 f"give a number of epochs from 1 to {MAX_RESOURCE_LIMIT}")
    return number


def hyperband_resources(config: Mapping[str, Any], static: Mapping[str, str]) -> tuple[int, int]:
    """Hyperband's ``(MinResource, MaxResource)`` for a ``HyperParameterTuningJobConfig`` whose training jobs get the
    static hyperparameters ``static``.

    Raises:
        ConfigurationError: Early stopping ``Auto`` with Hyperband, no ``MaxResource`` and no epochs hyperparameter to
            read it from, a resource that is no whole number from 1 to 20,000, or ``MinResource`` above
            ``MaxResource``.
    """
    if config.get("TrainingJobEarlyStoppingType", "Off") != "Off":
        raise ConfigurationError("early_stopping_type", config["TrainingJobEarlyStoppingType"],
                                 "is not 'Off' with strategy 'Hyperband' (Hyperband stops trials itself)",
                                 "leave early_stopping_type 'Off' with Hyperband")
    given = ((config.get("StrategyConfig") or {}).get("HyperbandStrategyConfig")) or {}
    where = "HyperbandStrategyConfig.MaxResource"
    maximum = given.get("MaxResource")
    if maximum is None:
        key = next((key for key in EPOCH_KEYS if key in static), None)
        if key is None:
            raise ConfigurationError(
                "HyperbandStrategyConfig.MaxResource", "not given", "cannot be read from the static hyperparameters "
                f"(none of {', '.join(EPOCH_KEYS)})", "pass strategy_config with HyperbandStrategyConfig("
                "max_resource=...) (smddp tune: --max-resource), or a static 'epochs' hyperparameter")
        where, maximum = f"static hyperparameter {key!r} (Hyperband's MaxResource)", static[key]
    max_resource = _whole_number(where, maximum)
    min_resource = _whole_number("HyperbandStrategyConfig.MinResource", given.get("MinResource", 1))
    if min_resource > max_resource:
        raise ConfigurationError("HyperbandStrategyConfig.MinResource", min_resource,
                                 f"is above MaxResource ({max_resource})", "give MinResource <= MaxResource")
    return min_resource, max_resource
