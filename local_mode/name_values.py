"""``NAME=VALUE`` command-line values, read one way by every command of the kit.

``smddp local`` (``--hyperparameters``, ``--channel``, ``--env``, ``--mesh``) and ``smddp submit``
(``--hyperparameters``, ``--channel``, ``--mesh``) take settings as ``NAME=VALUE`` words. The rule is the same for
all of them: the name is what comes before the first ``=``, the value everything after it, kept as written (further
``=`` signs, spaces, an empty value). A word without ``=``, with an empty name, or naming something a second time
is refused with the option, the word and the fix.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from smddp_compat.errors import ConfigurationError

__all__ = ["parse_name_values", "decode_value"]


def parse_name_values(items: Iterable[str] | None, option: str) -> dict[str, str]:
    """Reads ``NAME=VALUE`` words (``["lr=0.1", "opt=a=b"]``, or None) into name -> value text, in the order given
    (``{"lr": "0.1", "opt": "a=b"}``); errors name ``option`` (``--env``).

    Raises:
        ConfigurationError: A word has no ``=`` or an empty name, or a name comes twice.
    """
    values: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            missing = "it has no '='" if not sep else "the name before '=' is empty"
            problem = f"is not NAME=VALUE: {missing}"
            raise ConfigurationError(
                option, item, problem,
                f"write {option} NAME=VALUE; a word after {option} that is not NAME=VALUE (an entry point, say) "
                "goes before the option",
            )
        if name in values:
            raise ConfigurationError(
                option, item, f"{name!r} is given twice (first as {name}={values[name]})", "give each name once"
            )
        values[name] = value
    return values


def decode_value(text: str) -> Any:
    """A value as the job sees it: the JSON value when ``text`` is JSON, else ``text`` itself. The rule of the
    command lines and of SageMaker's training toolkit (and SDK v3's drivers) reading a hyperparameter back.

    ``3`` becomes the number 3, ``true`` True, ``[1,2]`` a list and ``"a b"`` the string ``a b``; anything else
    (``adam``, ``a=b``) stays text.
    """
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):  # nested deeper than Python reads: text, as anything not JSON
        return text
