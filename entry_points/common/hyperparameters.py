"""A training script's hyperparameters as SageMaker passes them (`parse_hyperparameters`), and the argparse types of
their values (`boolean`, `positive_int`, `non_negative_int`, `positive_float`). No TensorFlow here; the accepted
forms: docs/training-scripts.md#what-a-run-reads-and-writes.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from smddp_compat import contract
from smddp_compat.entry_points.common.errors import HyperparameterError

__all__ = ["parse_hyperparameters", "boolean", "positive_int", "non_negative_int", "positive_float"]


def boolean(text: str) -> bool:
    """argparse type for SageMaker booleans: true/false, True/False, 1/0, yes/no."""
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes", "y", "on"):
        return True
    if lowered in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean; use true or false")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (also accepts ``"3.0"``, as JSON numbers sometimes arrive)."""
    return _integer(text, minimum=1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _integer(text, minimum=0)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def _integer(text: str, *, minimum: int) -> int:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    if number < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= {minimum}")
    return int(number)


def _unquote(value: str) -> str:
    # The SageMaker SDK JSON-encodes hyperparameter values; strings may reach the script still quoted.
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value


# The TensorFlow estimator's model_dir, and the objective's name SageMaker gives every training job of a tuning job.
_SDK_OWNED_OPTIONS = ("--model_dir", "--model-dir", f"--{contract.TUNING_OBJECTIVE_METRIC}")
_SDK_OPTION_PREFIXES = (f"--{contract.SAGEMAKER_PREFIX}", f"--{contract.SAGEMAKER_PREFIX.replace('_', '-')}")


def _normalise_argv(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    known = set(parser._option_string_actions)  # noqa: SLF001 - argparse offers no public accessor
    result: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and len(token) > 2:
            name, eq, inline = token.partition("=")
            sdk_owned = name.lower().startswith(_SDK_OPTION_PREFIXES) or name in _SDK_OWNED_OPTIONS
            spellings = {name, name.replace("_", "-"), name.replace("-", "_")}
            if sdk_owned and not spellings & known:
                # SDK-internal hyperparameters (sagemaker_program, sagemaker_mpi_enabled, ...) are not the script's;
                # neither is the TensorFlow estimator's model_dir (an S3 path for scripts that save there: these
                # scripts save to SM_MODEL_DIR, which SageMaker uploads), nor a tuning job's
                # _tuning_objective_metric.
                if not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                    i += 1
                i += 1
                continue
            if name not in known:
                for spelling in (name.replace("_", "-"), name.replace("-", "_")):
                    if spelling in known:
                        name = spelling
                        break
            result.append(name)
            if eq:
                result.append(_unquote(inline))
        else:
            result.append(_unquote(token))
        i += 1
    return result


def parse_hyperparameters(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses SageMaker-style hyperparameters (``--name value``, ``--name=value``, either case style, JSON-quoted
    strings; ``--sagemaker_*`` and an undefined ``--model_dir`` dropped; no abbreviations) with `parser`, whose options
    all have defaults. Unlike plain argparse it never exits.

    Args:
        argv: Arguments to parse (default: ``sys.argv[1:]``).

    Raises:
        HyperparameterError: An unknown hyperparameter, a malformed value or a value out of range, naming the value
            and the accepted ones.
    """
    tokens = _normalise_argv(parser, list(sys.argv[1:] if argv is None else argv))

    def fail(message: str) -> NoReturn:
        raise _parser_failure(message, tokens, parser.format_usage().strip())

    original_error, original_abbrev = parser.error, parser.allow_abbrev
    parser.error = fail  # type: ignore[method-assign]
    parser.allow_abbrev = False  # a misspelt hyperparameter must not silently match a longer one
    try:
        namespace, unknown = parser.parse_known_args(tokens)
    finally:
        parser.error = original_error  # type: ignore[method-assign]
        parser.allow_abbrev = original_abbrev
    if unknown:
        options = sorted(o for o in parser._option_string_actions if o.startswith("--") and o != "--help")  # noqa: SLF001
        raise HyperparameterError(
            "hyperparameters", unknown, "this script has no such hyperparameter", f"use the ones it accepts: {options}"
        )
    return namespace


_ARGPARSE_ARGUMENT = re.compile(r"^argument (?P<options>[^:]+): (?P<problem>.*)$", re.DOTALL)


def _parser_failure(message: str, tokens: Sequence[str], usage: str) -> HyperparameterError:
    """argparse's complaint as a `HyperparameterError` naming the hyperparameter (``argument --x: ...``) and its value."""
    fix = f"pass values this script accepts ({usage})"
    match = _ARGPARSE_ARGUMENT.match(message)
    if match is None:
        return HyperparameterError("hyperparameters", list(tokens), message, fix)
    spellings = match["options"].split("/")
    given = [tokens[i + 1] for i, token in enumerate(tokens[:-1]) if token in spellings]
    return HyperparameterError(spellings[0], given[-1] if given else None, match["problem"], fix)
