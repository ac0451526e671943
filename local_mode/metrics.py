"""Training metrics as SageMaker reads them from a job's logs: ``MetricDefinitions`` in, ``FinalMetricDataList`` out.

A metric definition is a name and a regular expression (``{"Name": "loss", "Regex": "loss=([0-9.]+)"}``, the shape
of ``AlgorithmSpecification.MetricDefinitions`` and of the SDK's ``metric_definitions``). SageMaker "searches the
logs that your algorithm emits and finds logs that match the regular expression" and, once the job has ended,
reports "the metric values that it computes in its final iteration" (developer guide, "Monitor and Analyze Training
Jobs Using Metrics"): each metric's last value. Here each log line is searched; the value is the regex's first
group (the whole match when it has none), read as a number; text that is no finite number is no value (CloudWatch
takes no NaN or infinity). One reader, :class:`MetricWatch`, takes every whole line a job prints as it arrives, in
both backends (the twin's container logs; the process backend's output through :class:`MetricTap`).

Standard library only.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

from smddp_compat.local_mode.errors import ConfigurationError

__all__ = [
    "MAX_METRIC_DEFINITIONS",
    "MetricDefinition",
    "MetricWatch",
    "check_metric_definitions",
    "MetricTap",
    "metric_lines",
]

MAX_METRIC_DEFINITIONS = 40
"""SageMaker's limit on ``MetricDefinitions`` (botocore's ``MetricDefinitionList``: at most 40)."""

# SageMaker's MetricDefinition: Name 1-255 characters, Regex 1-500 (botocore's MetricName / MetricRegex).
_NAME_LIMIT = 255
_REGEX_LIMIT = 500
_EXAMPLE = "{'Name': 'loss', 'Regex': 'loss=([0-9.eE+-]+)'}"


@dataclass(frozen=True)
class MetricDefinition:
    """One metric: its name and the regular expression that finds its value in a log line.

    Attributes:
        name: ``Name``.
        regex: ``Regex``, as given.
        pattern: ``regex`` compiled (Python's ``re``, the dialect SageMaker's guide writes its examples in).
    """

    name: str
    regex: str
    pattern: re.Pattern[str] = field(compare=False, repr=False)

    @classmethod
    def compiled(cls, name: str, regex: str, where: str = "metric_definitions") -> "MetricDefinition":
        """The definition with its regex compiled.

        Raises:
            ConfigurationError: ``regex`` does not compile.
        """
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise ConfigurationError(
                f"{where}[{name!r}].Regex", regex, f"is not a regular expression ({exc})",
                "write a Python regular expression whose first group captures the value, e.g. loss=([0-9.eE+-]+)",
            ) from None
        return cls(name, regex, pattern)

    def value_in(self, line: str) -> float | None:
        """This metric's value in one log line, or None when the line holds none."""
        found = self.pattern.search(line)
        if found is None:
            return None
        text = found.group(1) if self.pattern.groups else found.group(0)
        if text is None:
            return None
        try:
            value = float(text.strip())
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    def as_request(self) -> dict[str, str]:
        """``{"Name": ..., "Regex": ...}``, as a request and the SDK write it."""
        return {"Name": self.name, "Regex": self.regex}


def check_metric_definitions(value: object, where: str = "metric_definitions") -> tuple[MetricDefinition, ...]:
    """Checks metric definitions as CreateTrainingJob checks them, and that each regex compiles.

    ``value``: None, or a list of ``{"Name": str, "Regex": str}`` (the SDK's ``metric_definitions``); ``where``, the
    field or option they were given as, is named in errors. Returns the definitions, in the order given.

    Raises:
        ConfigurationError: Not a list, more than 40, an entry that is not ``{"Name", "Regex"}``, a name or regex
            out of SageMaker's lengths, a name given twice, or a regex that does not compile.
    """
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ConfigurationError(where, value, "must be a list of {'Name', 'Regex'} entries", f"e.g. [{_EXAMPLE}]")
    if len(value) > MAX_METRIC_DEFINITIONS:
        raise ConfigurationError(
            where, f"{len(value)} definitions", f"has more than SageMaker's {MAX_METRIC_DEFINITIONS}",
            f"keep at most {MAX_METRIC_DEFINITIONS} metrics",
        )
    checked: list[MetricDefinition] = []
    for index, entry in enumerate(value):
        if not isinstance(entry, Mapping) or set(entry) != {"Name", "Regex"}:
            raise ConfigurationError(
                f"{where}[{index}]", entry, "must have exactly the keys 'Name' and 'Regex'", f"e.g. {_EXAMPLE}"
            )
        name, regex = entry["Name"], entry["Regex"]
        for key, text, limit in (("Name", name, _NAME_LIMIT), ("Regex", regex, _REGEX_LIMIT)):
            if not isinstance(text, str) or not 1 <= len(text) <= limit or "\n" in text:
                raise ConfigurationError(
                    f"{where}[{index}].{key}", text, f"must be a string of 1 to {limit} characters on one line",
                    f"e.g. {_EXAMPLE}",
                )
        if any(known.name == name for known in checked):
            raise ConfigurationError(
                f"{where}[{index}].Name", name, "names a metric already defined", "give each metric one definition"
            )
        checked.append(MetricDefinition.compiled(name, regex, where))
    return tuple(checked)


class MetricWatch:
    """The kit's one reader of metrics in log lines: each metric's last value, with when it was seen, and (asked
    for) every value in the order printed, as CloudWatch keeps a job's series. Thread-safe: one watch takes the lines
    of every host's log. Lines of several hosts come in no fixed order, so a metric's final value is the last one of
    the first host that printed it (``algo-1``'s, where rank 0 and the chief print, when it printed one).

    Args:
        definitions: The metrics to watch.
        keep_series: Also keep every value seen (:attr:`series`).
        on_value: Called with ``(metric name, value)`` for each value that becomes the metric's current one (the
            leading host's, as the final value is chosen), as it is read: a tuning job's early stopping listens here.

    Attributes:
        series: ``(when, metric name, value)`` for every value seen, in order (empty unless ``keep_series``).
    """

    def __init__(self, definitions: Sequence[MetricDefinition], *, keep_series: bool = False,
                 on_value: Callable[[str, float], None] | None = None) -> None:
        self.definitions = tuple(definitions)
        self.on_value = on_value
        self.series: list[tuple[datetime, str, float]] = []
        self._keep_series = keep_series
        self._latest: dict[str, tuple[float, datetime, int]] = {}
        self._lock = threading.Lock()

    def observe(self, line: str, when: datetime | None = None, host: str | None = None) -> None:
        """Reads one whole log line of ``host`` (``algo-N``): a metric it holds replaces that metric's earlier value,
        unless that one came from a host before ``host``."""
        if not self.definitions:
            return
        found = [(d.name, v) for d in self.definitions if (v := d.value_in(line)) is not None]
        if found:
            seen = when or datetime.now(timezone.utc)
            order = int(host.rpartition("-")[2]) if host and host.rpartition("-")[2].isdigit() else 0
            current = []
            with self._lock:
                for name, value in found:
                    if name not in self._latest or order <= self._latest[name][2]:
                        self._latest[name] = (value, seen, order)
                        current.append((name, value))
                    if self._keep_series:
                        self.series.append((seen, name, value))
            if self.on_value is not None:
                for name, value in current:
                    self.on_value(name, value)

    def values(self) -> dict[str, float]:
        """Metric name -> its last value, in the definitions' order (metrics never seen are left out)."""
        with self._lock:
            return {d.name: self._latest[d.name][0] for d in self.definitions if d.name in self._latest}

    def final_metric_data(self) -> list[dict[str, Any]]:
        """``FinalMetricDataList``: ``{"MetricName", "Value", "Timestamp"}`` for each metric seen, in the
        definitions' order; the time in whole seconds, as SageMaker reports it."""
        with self._lock:
            latest = dict(self._latest)
        return [
            {"MetricName": d.name, "Value": latest[d.name][0], "Timestamp": latest[d.name][1].replace(microsecond=0)}
            for d in self.definitions
            if d.name in latest
        ]


class MetricTap:
    """A text stream that passes everything on to ``target`` and gives every whole line a process printed (``[algo-N,i]
    text``, as the process backend shows it) to ``watch``, as CloudWatch reads a job's metrics from its log lines
    as they arrive. Local mode's own lines (``[local_mode] ...``, the summary) are not the job's output.

    Args:
        target: Where the text goes.
        watch: The job's metric reader.
    """

    _PROCESS_LINE = re.compile(r"^\[(algo-\d+),\d+\] (.*)$")

    def __init__(self, target: IO[str], watch: MetricWatch) -> None:
        self.target = target
        self.watch = watch
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        """Reads the whole lines in ``text`` (keeping a partial one for the next write), then passes it on."""
        with self._lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
            for line in lines:
                found = self._PROCESS_LINE.match(line.rstrip("\r"))
                if found is not None:
                    self.watch.observe(found.group(2), host=found.group(1))
        return self.target.write(text)

    def flush(self) -> None:
        """Flushes the target."""
        self.target.flush()


def metric_lines(values: Iterable[tuple[str, float]]) -> list[str]:
    """``name = value`` for a person to read, one metric each."""
    return [f"{name} = {value:.6g}" for name, value in values]


def watchable_definitions(value: object, where: str) -> tuple[tuple[MetricDefinition, ...], list[str]]:
    """The definitions of a request SageMaker's API model already accepted, each regex compiled; one that Python
    cannot compile (SageMaker's service reads Java's dialect: ``(?<name>...)``, possessive quantifiers) is left out.

    Args:
        value: ``AlgorithmSpecification.MetricDefinitions`` (None for none).
        where: Its path in the request, for the messages.

    Returns:
        The definitions, and one line for each left out (it will have no value in ``FinalMetricDataList``).
    """
    definitions: list[MetricDefinition] = []
    left_out: list[str] = []
    for index, entry in enumerate(value if isinstance(value, Sequence) and not isinstance(value, str) else ()):
        if not isinstance(entry, Mapping):
            continue
        name, regex = str(entry.get("Name", "")), str(entry.get("Regex", ""))
        try:
            definitions.append(MetricDefinition.compiled(name, regex, where))
        except ConfigurationError as exc:
            left_out.append(f"{where}[{index}] ({name}): {exc.problem}; it gets no value in FinalMetricDataList")
    return tuple(definitions), left_out
