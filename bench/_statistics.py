"""Median and spread of repeated measurements, and ratios between compared variants."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Summary", "summarise", "paired_ratios", "ratio_of_medians"]


@dataclass(frozen=True)
class Summary:
    """Median of a sample with its spread (the 25th and 75th percentiles) and size.

    Attributes:
        median: The median.
        low: 25th percentile.
        high: 75th percentile.
        count: Number of values.
    """

    median: float
    low: float
    high: float
    count: int

    def to_json(self) -> dict[str, float]:
        """The fields as a dict, for the JSON report."""
        return asdict(self)

    def text(self, digits: int = 2) -> str:
        """``median [low-high]``, e.g. ``1.01 [0.98-1.04]``."""
        if self.count == 0:
            return "n/a"
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


def ratio_of_medians(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """``median(numerators) / median(denominators)`` (NaN when either is empty or the denominator is 0)."""
    top, bottom = summarise(numerators).median, summarise(denominators).median
    if not np.isfinite(top) or not np.isfinite(bottom) or bottom == 0:
        return float("nan")
    return top / bottom
