"""What a measurement reports: rows of the table of ratios (with their goals) and its raw numbers."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from smddp_compat.bench.jobs import Job, JobRun
from smddp_compat.bench.stats import Summary

__all__ = ["Goal", "Verdict", "Row", "MeasurementResult", "RunsByJob", "pooled_samples", "first_failure", "ok_runs",
           "not_measured"]


class Verdict(enum.Enum):
    """What a measured ratio says about its goal.

    A goal counts as met only when the whole interquartile range lies on the goal's side of the threshold, and as
    not met only when the whole range lies on the other side; a range that spans the threshold settles nothing.
    """

    MET = "met"
    NOT_MET = "not met"
    UNRESOLVED = "unresolved: the IQR spans the goal"
    TOO_FEW_SAMPLES = "too few samples"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Goal:
    """A target for a ratio, e.g. ``Goal("<=", 1.02)``."""

    relation: str
    threshold: float

    def holds(self, value: float) -> bool | None:
        """Whether one ``value`` is on the goal's side of the threshold (None when the value is unknown)."""
        if value is None or not math.isfinite(value):
            return None
        return value <= self.threshold if self.relation == "<=" else value >= self.threshold

    def judge(self, ratio: Summary | None) -> Verdict:
        """The verdict on a measured ratio: met only when its whole interquartile range meets the goal.

        Args:
            ratio: The ratio's summary, or None when it could not be measured.

        Returns:
            :attr:`Verdict.NOT_MEASURED` without values, :attr:`Verdict.TOO_FEW_SAMPLES` when there are too few for
            an interquartile range, else met / not met / unresolved by where the range lies.
        """
        if ratio is None or ratio.count == 0:
            return Verdict.NOT_MEASURED
        if not ratio.has_spread:
            return Verdict.TOO_FEW_SAMPLES
        low, high = self.holds(ratio.low), self.holds(ratio.high)
        if low is None or high is None:
            return Verdict.NOT_MEASURED
        if low and high:
            return Verdict.MET
        if not low and not high:
            return Verdict.NOT_MET
        return Verdict.UNRESOLVED

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
    def verdict(self) -> Verdict | None:
        """The verdict on the goal (None without a goal); see :meth:`Goal.judge`."""
        return self.goal.judge(self.ratio) if self.goal is not None else None

    @property
    def met(self) -> bool | None:
        """True when the goal is met, False when it is not, None without a goal or when the figures do not
        decide (not measured, too few samples, or an interquartile range that spans the goal)."""
        return {Verdict.MET: True, Verdict.NOT_MET: False}.get(self.verdict)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The row for results.json."""
        return {
            "comparison": self.comparison,
            "ratio": self.ratio.to_json() if self.ratio else None,
            "goal": self.goal.text() if self.goal else None,
            "met": self.met,
            "verdict": self.verdict.value if self.verdict else None,
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


def pooled_samples(runs: Sequence[JobRun], path: Sequence[str], variants: Sequence[str] = ()) -> dict[str, list[float]]:
    """Each variant's samples, pooled over every rank of every run: ``rank[path[0]][path[1]]...`` maps variant ->
    values in each rank's result. `variants` are present even without samples."""
    pooled: dict[str, list[float]] = {variant: [] for variant in variants}
    for run in runs:
        for rank in run.ranks:
            node = rank
            for key in path:
                node = node[key]
            for variant, values in node.items():
                pooled.setdefault(variant, []).extend(values)
    return pooled


def first_failure(runs: RunsByJob, jobs: Sequence[Job]) -> str:
    """Why the first failed run of `jobs` failed, or ``not run`` when none failed (a row's ``n/a:`` reason)."""
    return next((run.reason for job in jobs for run in runs(job) if not run.ok), "not run")


def ok_runs(runs: RunsByJob, job: Job, part: str | None = None) -> list[JobRun]:
    """The runs of `job` that succeeded and, given `part`, ran it (later rounds may skip a part)."""
    return [run for run in runs(job) if run.ok and (part is None or part in run.ranks[0])]


def not_measured(runs: RunsByJob, job: Job) -> str:
    """A row's detail when `job` gave no usable run: ``n/a:`` and its first run's reason (``not run`` without one)."""
    return f"n/a: {next((run.reason for run in runs(job)), 'not run')}"
