"""Argument types for the launchers' numeric options (``smddprun``, ``smddp local``): one place, one wording.

Each is an ``argparse`` ``type=``: it returns the number or raises :class:`argparse.ArgumentTypeError`, which
argparse prints as ``prog: error: argument --option: expected ..., got 'value': give ...`` and exits 2, before
anything starts. ``float()`` reads ``nan``, ``inf`` and ``1e400`` (infinity) as numbers; a time limit of NaN
compares false with everything and so meant "no limit", which is why every type here refuses what is not finite.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence

from smddp_compat.errors import ConfigurationError

__all__ = ["MAX_SECONDS", "is_positive_seconds", "positive_seconds", "finite_seconds", "positive_count",
           "whole_number", "environment_choice"]

#: The longest time any launcher option takes (one year). Horovod reads its timeouts as C ``int`` seconds and
#: ``threading`` waits refuse more than ``threading.TIMEOUT_MAX``; a year is far below both and far above any job.
MAX_SECONDS = 365 * 24 * 60 * 60

_SECONDS_RANGE = f"give a finite number > 0 and at most {MAX_SECONDS} (one year)"


def is_positive_seconds(value: object) -> bool:
    """Whether a value given to a launcher's Python API is a finite number of seconds > 0 (a bool is not)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def positive_seconds(text: str) -> float:
    """A number of seconds that is finite, > 0 and at most :data:`MAX_SECONDS` (``--timeout``, ``--grace``, ...);
    anything else (NaN, infinite, zero, negative, too large) raises ``argparse.ArgumentTypeError``, as every type
    below does for what it refuses."""
    value = _number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}: {_SECONDS_RANGE}")
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}: {_SECONDS_RANGE}")
    return value


def finite_seconds(text: str) -> float:
    """A finite number of seconds whose range the job model checks (``smddp local --max-run``).

    Zero or a negative value is left to the model the value goes to (:class:`~smddp_compat.local_mode.JobSpec`),
    which refuses it in the same words for the command line and the Python API.
    """
    value = _number(text)
    if value is None or not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds > 0, got {text!r}: give e.g. 3600 (NaN and infinity are not "
            "time limits)"
        )
    return value


def whole_number(text: str) -> int:
    """A whole number (not ``nan``, ``inf``, ``2.5``) whose range the model it goes to checks (``-np``, ...)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}: give e.g. 2") from None


def positive_count(text: str) -> int:
    """A whole number >= 1 (``smddp local --gpus-per-host``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}: give e.g. 1")
    return value


def environment_choice(variable: str, choices: Sequence[str], what: str, fix: str,
                       environ: Mapping[str, str] | None = None) -> str:
    """The value of the setting ``variable`` (case and spaces aside) in ``environ`` (default ``os.environ``): one of
    ``choices``, the first when unset or empty.

    Raises:
        ConfigurationError: The variable holds anything else (``what`` it is not; ``fix`` names the choices).
    """
    environ = os.environ if environ is None else environ
    value = environ.get(variable, "").strip().lower() or choices[0]
    if value not in choices:
        raise ConfigurationError(variable, environ[variable], f"is not {what}", fix)
    return value
