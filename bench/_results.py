"""What a measurement reports: rows of the table of ratios (with their goals) and its raw numbers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench._jobs import Job, JobRun
from bench._statistics import Summary

__all__ = ["Goal", "Row", "MeasurementResult", "RunsByJob"]


@dataclass(frozen=True)
class Goal:
    """A target for a ratio, e.g. ``Goal("<=", 1.02)``."""

    relation: str
    threshold: float

    def met(self, value: float) -> bool | None:
        """Whether ``value`` meets the goal (None when the value is unknown)."""
        if value is None or not math.isfinite(value):
            return None
        return value <= self.threshold if self.relation == "<=" else value >= self.threshold

    def text(self) -> str:
        """``<= 1.02``."""
        return f"{self.relation} {self.threshold:g}"


@dataclass
class Row:
    """One line of the table: a ratio of a variant to its baseline.

    Attributes:
        comparison: What is divided by what, e.g. ``CNN step: smddp_compat / horovod``.
        ratio: Median and spread of the ratio, or None when it could not be measured.
        goal: The issue's target for it, if any.
        detail: The absolute figures behind the ratio (or why it is n/a).
    """

    comparison: str
    ratio: Summary | None
    goal: Goal | None = None
    detail: str = ""

    @property
    def met(self) -> bool | None:
        """Whether the goal is met (None without goal or ratio)."""
        if self.goal is None or self.ratio is None or self.ratio.count == 0:
            return None
        return self.goal.met(self.ratio.median)

    def to_json(self) -> dict[str, Any]:
        """The row for results.json."""
        return {
            "comparison": self.comparison,
            "ratio": self.ratio.to_json() if self.ratio else None,
            "goal": self.goal.text() if self.goal else None,
            "met": self.met,
            "detail": self.detail,
        }


@dataclass
class MeasurementResult:
    """A measurement's rows and raw numbers.

    Attributes:
        name: Short name (``overhead``, ``bandwidth``...).
        title: The heading in the table.
        rows: The ratios.
        raw: Every number measured, for results.json.
        notes: Remarks printed under the table (n/a reasons, what a ratio means).
    """

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


RunsByJob = Callable[[Job], Sequence[JobRun]]
"""Gives the runs of a job (every round), looked up by the job's key."""
