"""Metric lines: what a training script prints so that SageMaker's ``metric_definitions`` (and local mode) read its
metrics from the log (no TensorFlow here).

`MetricLogger` prints ``name=value;`` lines (``epoch=1; step=120; loss=0.3100;``); `metric_regex` and
`metric_definitions` give the regular expressions that read them back, `parse_metric_line` the values of one line.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["MetricLogger", "metric_regex", "metric_definitions", "parse_metric_line"]

_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|nan|inf|-inf"
_PAIR = re.compile(r"(?:^|(?<=\s)|(?<=;))([A-Za-z_][A-Za-z0-9_]*)=(" + _NUMBER + r"|[^;\s]*);")


def metric_regex(name: str) -> str:
    """The regular expression (one capture group) that picks metric `name` out of a log line.

    ``loss`` does not match ``test_loss=``. Suitable for SageMaker ``metric_definitions``.
    """
    return r"(?:^|[^A-Za-z0-9_])" + re.escape(name) + r"=(" + _NUMBER + r");"


def metric_definitions(names: Sequence[str]) -> list[dict[str, str]]:
    """``[{"Name": name, "Regex": metric_regex(name)}, ...]`` for an estimator's ``metric_definitions``."""
    return [{"Name": name, "Regex": metric_regex(name)} for name in names]


def parse_metric_line(line: str) -> dict[str, str]:
    """Parses a ``name=value; name=value;`` line into a dict of strings (empty when the line holds none)."""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line.strip())}


def _format_value(value: object) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) or hasattr(value, "__float__"):
        number = float(value)  # type: ignore[arg-type]
        if not math.isfinite(number):
            return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
        if number != 0.0 and abs(number) < 1e-4:
            return f"{number:.4e}"
        return f"{number:.4f}"
    text = str(value)
    if re.search(r"[;\s=]", text):
        raise ValueError(f"metric value {text!r} contains ';', '=' or whitespace")
    return text


class MetricLogger:
    """Prints metrics as stable ``name=value;`` lines, plus a progress bar when the stream is a terminal.

    Lines look like ``epoch=1; step=120; loss=0.3100; accuracy=0.9100;`` (floats with 4 decimals), so that
    `metric_regex` / SageMaker ``metric_definitions`` can read them. A disabled logger (ranks other than 0)
    prints nothing.

    Args:
        enabled: Print anything at all.
        stream: Where to print (default: ``sys.stdout`` at call time).
    """

    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self._stream = stream
        self._bar_shown = False

    @property
    def stream(self) -> TextIO:
        """The output stream."""
        return self._stream if self._stream is not None else sys.stdout

    def _is_tty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def log(self, **metrics: object) -> str:
        """Prints one metrics line (in argument order) and returns it.

        Args:
            **metrics: name=value pairs; ints print as ints, floats (and numpy/TF scalars) with 4 decimals.

        Returns:
            The line, without the newline (also when the logger is disabled).
        """
        line = " ".join(f"{name}={_format_value(value)};" for name, value in metrics.items())
        if self.enabled:
            if self._bar_shown:
                self.stream.write("\r\033[K")
                self._bar_shown = False
            self.stream.write(line + "\n")
            self.stream.flush()
        return line

    def progress(self, current: int, total: int, **metrics: object) -> None:
        """Redraws a one-line progress bar, only when attached to a terminal (never in logs)."""
        if not self.enabled or not self._is_tty() or total <= 0:
            return
        width = 30
        done = min(width, int(width * current / total))
        extra = " ".join(f"{k}={_format_value(v)}" for k, v in metrics.items())
        self.stream.write(f"\r[{'=' * done}{' ' * (width - done)}] {current}/{total} {extra}\033[K")
        self.stream.flush()
        self._bar_shown = True
