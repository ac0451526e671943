"""smddp_compat.local_mode.name_values: the one reading of NAME=VALUE words (its use by each option is tested with each CLI:
tests/local_mode/test_spec.py and tests/estimators/test_cli.py)."""

from __future__ import annotations

import pytest

from smddp_compat.errors import ConfigurationError
from smddp_compat.local_mode.name_values import decode_value, parse_name_values


def test_the_value_is_everything_after_the_first_equals_sign() -> None:
    words = ["a=1", "b=x=y", "c= spaced  out ", "d=", "e==", "f=[1, 2]"]
    assert parse_name_values(words, "--x") == {"a": "1", "b": "x=y", "c": " spaced  out ", "d": "", "e": "=",
                                               "f": "[1, 2]"}
    assert parse_name_values(None, "--x") == {}


@pytest.mark.parametrize(
    ("word", "problem"),
    [("novalue", "it has no '='"), ("=3", "the name before '=' is empty"), ("", "it has no '='")],
)
def test_a_word_that_is_not_name_value_is_refused_naming_the_option(word: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_name_values(["ok=1", word], "--env")
    assert caught.value.field == "--env" and caught.value.value == word
    assert problem in str(caught.value) and "write --env NAME=VALUE" in str(caught.value)


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"--hp='a=2': 'a' is given twice \(first as a=1\)"):
        parse_name_values(["a=1", "a=2"], "--hp")


def test_values_decode_as_json_when_they_are_json() -> None:
    assert [decode_value(t) for t in ("3", "0.5", "true", "[1,2]", '"a b"', "adam", "a=b", "")] == [
        3, 0.5, True, [1, 2], "a b", "adam", "a=b", ""]
