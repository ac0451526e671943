"""A request checked against SageMaker's own API model: botocore's service definition of ``sagemaker``.

The twin accepts what CreateTrainingJob accepts and refuses what it refuses, with the same field: every member's
type, the required members, string lengths, patterns and enumerations, number ranges and list sizes are read from
the shapes botocore ships (``botocore/data/sagemaker/*/service-2.json``), the definition the SDKs validate against.
botocore itself checks only types, required members and minimums on the client side (the service checks the rest);
this module checks the rest too, so that a request the service would refuse fails here, before anything starts.

Patterns are the service's (Java regular expressions, matched against the whole value); the few Java-only classes
they use (``\\p{Alnum}``, ``\\p{L}``, ``\\p{N}``, ``\\p{Z}``) are translated to Python's nearest equivalent.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from collections.abc import Mapping
from typing import Any

from smddp_compat.local_mode.errors import ConfigurationError

__all__ = ["check_member", "check_request", "check_response", "describe_only_fields", "response_members"]

_SERVICE = "sagemaker"
_JAVA_CLASSES = {r"\p{Alnum}": "A-Za-z0-9", r"\p{L}": r"\w", r"\p{N}": r"\w", r"\p{Z}": r"\s"}


@functools.lru_cache(maxsize=1)
def _service_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(_SERVICE)


@functools.lru_cache(maxsize=None)
def _pattern(java_pattern: str) -> re.Pattern[str]:
    translated = java_pattern
    for java, python in _JAVA_CLASSES.items():
        translated = translated.replace(java, python)
    return re.compile(translated)


def describe_only_fields(operation: str = "CreateTrainingJob", answer: str = "DescribeTrainingJob") -> frozenset[str]:
    """The members of ``answer``'s output that ``operation`` does not take (a job's life, not its definition)."""
    model = _service_model()
    taken = set(model.operation_model(operation).input_shape.members)
    return frozenset(set(model.operation_model(answer).output_shape.members) - taken)


def check_request(
    params: Mapping[str, Any], operation: str = "CreateTrainingJob", examples: Mapping[str, str] | None = None
) -> None:
    """Checks a request against the operation's input shape, as the service does.

    ``examples``: member path -> an example of a good value, added to the fix of a refusal of that member.

    Raises:
        ConfigurationError: The first member that the service would refuse, named by its path in the request
            (``CheckpointConfig.LocalPath``, ``InputDataConfig[0].ChannelName``, ``Environment['A B']``), with the
            rule it breaks and the fix.
    """
    _Checker(operation, examples or {}).check(params, _service_model().operation_model(operation).input_shape, "")


def check_member(name: str, value: Any, operation: str = "CreateTrainingJob") -> None:
    """Checks one top-level member of a request (``MlflowConfig``, say) against its shape, as the service does.

    Raises:
        ConfigurationError: The member, or one of its members, that the service would refuse, named by its path
            (``MlflowConfig.MlflowResourceArn``), with the rule it breaks and the fix.
    """
    members = _service_model().operation_model(operation).input_shape.members
    if name not in members:
        raise ConfigurationError(name, value, f"is not a member of {operation}'s request",
                                 f"use one of: {', '.join(sorted(members))}")
    _Checker(operation, {}).check(value, members[name], name)


def response_members(operation: str = "DescribeTrainingJob") -> frozenset[str]:
    """The members of ``operation``'s output (what its answer may hold)."""
    return frozenset(_service_model().operation_model(operation).output_shape.members)


def check_response(answer: Mapping[str, Any], operation: str = "DescribeTrainingJob") -> None:
    """Checks an answer against the operation's output shape, as :func:`check_request` checks a request.

    The twin's DescribeTrainingJob answer must be one the service could give: every member known, the required ones
    there, each value of its shape's type, length, pattern, enumeration and range (timestamps as ``datetime``).

    Raises:
        ConfigurationError: The first member out of the shape, named by its path.
    """
    _Checker(operation, {}).check(answer, _service_model().operation_model(operation).output_shape, "")


def _member_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Checker:
    """One walk of a request along its shape; each ``_<type>`` method checks a value of that shape type."""

    def __init__(self, operation: str, examples: Mapping[str, str]) -> None:
        self.operation = operation
        self.examples = examples

    def refuse(self, path: str, value: Any, problem: str, fix: str) -> ConfigurationError:
        example = self.examples.get(path)
        return ConfigurationError(path or "request", value, problem, f"{fix} (e.g. {example})" if example else fix)

    def check(self, value: Any, shape: Any, path: str) -> None:
        method = getattr(self, f"_{shape.type_name}", None)
        if method is not None:  # blob and any future type: left to the service
            method(value, shape, path)

    def _structure(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            raise self.refuse(path, value, "must be an object", f"give {shape.name}'s members as an object")
        for name in shape.required_members:
            if value.get(name) is None:
                raise self.refuse(_member_path(path, name), None, "is required", f"add it, as {self.operation} needs")
        for name, member in value.items():
            if name not in shape.members:
                raise self.refuse(
                    _member_path(path, str(name)), member, f"is not a member of {shape.name}",
                    f"remove it, or use one of: {', '.join(sorted(shape.members))}",
                )
            if member is not None:
                self.check(member, shape.members[name], _member_path(path, name))

    def _size(self, value: Any, shape: Any, path: str, unit: str) -> None:
        low, high = shape.metadata.get("min", 0), shape.metadata.get("max")
        if len(value) < low or (high is not None and len(value) > high):
            allowed = f"{low} to {high}" if high is not None else f"at least {low}"
            raise self.refuse(path, value, f"has {len(value)} {unit}", f"give {allowed} {unit}")

    def _list(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, (list, tuple)):
            raise self.refuse(path, value, "must be a list", "give a list (a JSON array)")
        self._size(value, shape, path, "items")
        for index, item in enumerate(value):
            self.check(item, shape.member, f"{path}[{index}]")

    def _map(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            raise self.refuse(path, value, "must be an object", "give an object of names and values")
        self._size(value, shape, path, "entries")
        for key, item in value.items():
            self.check(key, shape.key, f"{path} name {key!r}")
            self.check(item, shape.value, f"{path}[{key!r}]")

    def _string(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, str):
            raise self.refuse(path, value, "must be a string", "give it as a string (the SDK encodes values so)")
        self._size(value, shape, path, "characters")
        enum = shape.metadata.get("enum")
        if enum and value not in enum:
            shown = ", ".join(enum) if len(enum) <= 12 else ", ".join(enum[:12]) + f", ... ({len(enum)} in all)"
            raise self.refuse(path, value, f"is not one of {shown}", f"use one of {shape.name}'s values")
        pattern = shape.metadata.get("pattern")
        if pattern and not _pattern(pattern).fullmatch(value):
            raise self.refuse(path, value, f"does not match the pattern {pattern}", "give a value the pattern allows")

    def _integer(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.refuse(path, value, "must be an integer", "give a whole number")
        self._range(value, shape, path)

    _long = _integer

    def _float(self, value: Any, shape: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.refuse(path, value, "must be a finite number", "give a number")
        self._range(value, shape, path)

    _double = _float

    def _range(self, value: float, shape: Any, path: str) -> None:
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            allowed = f"between {low} and {high}" if low is not None and high is not None else (
                f">= {low}" if low is not None else f"<= {high}")
            raise self.refuse(path, value, f"is out of range ({allowed})", f"give a value {allowed}")

    def _boolean(self, value: Any, shape: Any, path: str) -> None:
        if not isinstance(value, bool):
            raise self.refuse(path, value, "must be true or false", "give a JSON boolean")

    def _timestamp(self, value: Any, shape: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (datetime.datetime, str, int, float)):
            raise self.refuse(path, value, "must be a timestamp", "give a date and time")
