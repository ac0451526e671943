"""Median and spread of repeated measurements, and ratios between compared variants."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["MIN_SAMPLES_FOR_SPREAD", "Summary", "summarise", "paired_ratios"]

#: Below this many values an interquartile range says nothing about the spread: such a summary shows its median and
#: says that the samples are too few, and no goal is judged on it.
MIN_SAMPLES_FOR_SPREAD = 5


@dataclass(frozen=True)
class Summary:
    """Median of a sample with its spread (``low``, ``high``: the 25th and 75th percentiles) and size (``count``)."""

    median: float
    low: float
    high: float
    count: int

    def to_json(self) -> dict[str, float]:
        """The fields as a dict, for the JSON report."""
        return asdict(self)

    @property
    def has_spread(self) -> bool:
        """Whether there are enough values (:data:`MIN_SAMPLES_FOR_SPREAD`) for the interquartile range to mean
        something."""
        return self.count >= MIN_SAMPLES_FOR_SPREAD

    def text(self, digits: int = 2) -> str:
        """``median [low-high]``, e.g. ``1.01 [0.98-1.04]``; ``0.99 (too few samples for an IQR)`` below
        :data:`MIN_SAMPLES_FOR_SPREAD` values; ``n/a`` without any."""
        if self.count == 0:
            return "n/a"
        if not self.has_spread:
            return f"{self.median:.{digits}f} (too few samples for an IQR)"
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}]"


def summarise(values: Sequence[float]) -> Summary:
    """The median and interquartile range of ``values`` (NaN fields and count 0 when empty)."""
    data = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if data.size == 0:
        return Summary(float("nan"), float("nan"), float("nan"), 0)
    low, median, high = np.percentile(data, [25, 50, 75])
    return Summary(float(median), float(low), float(high), int(data.size))


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> Summary:
    """Summary of ``numerators[i] / denominators[i]``: the ratio of two variants timed in turns, pair by pair.

    Pairs taken at the same moment cancel the machine's slow phases, so their ratios spread less than the times.
    """
    count = min(len(numerators), len(denominators))
    ratios = [numerators[i] / denominators[i] for i in range(count) if denominators[i] > 0]
    return summarise(ratios)

