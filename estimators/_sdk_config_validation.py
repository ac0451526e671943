"""SageMaker SDK v2's check of its configuration, made once per distinct configuration instead of on every lookup.

SDK v2 checks a session's configuration dict against its JSON schema (``sagemaker.config.validate_sagemaker_config``)
each time it looks a default up in it (``sagemaker.utils.get_sagemaker_config_value``): dozens of times while one
estimator is built and fitted. Each check first checks the schema itself against JSON Schema's metaschema
(``jsonschema.validate``), about 0.3 s of CPU, so one job's request cost 2.5 s of CPU in checks of an unchanged
configuration (``py-spy`` of ``smddp local --backend docker``, 2026-12-04).

:func:`check_each_configuration_once` puts a memo in front of the SDK's own function wherever the SDK bound it: a
configuration is checked by the SDK's function the first time it is seen (an invalid one raises the SDK's error, every
time, as before); an identical configuration (same JSON) is not checked again. The schema is a constant of the SDK, so
the answer for a configuration never changes. Installed when the kit imports SDK v2
(:mod:`smddp_compat.estimators._tensorflow_estimator`), so it also serves the user's own sessions in that process.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["check_each_configuration_once"]

#: The SDK v2 modules that bind ``validate_sagemaker_config`` by name (sagemaker 2.257); one imported later binds it
#: from ``sagemaker.config``, which has the memo by then.
SDK_MODULES = ("sagemaker.config.config", "sagemaker.config", "sagemaker.session", "sagemaker.utils",
               "sagemaker.local.local_session")

_lock = threading.Lock()


class _CheckedOnce:
    """The SDK's check with a memo of the configurations it passed (by their JSON)."""

    def __init__(self, check: Callable[..., Any]) -> None:
        self.check = check
        self.passed: set[str] = set()

    def __call__(self, sagemaker_config: Any = None) -> Any:
        key = json.dumps(sagemaker_config, sort_keys=True, default=str)
        if key in self.passed:
            return None
        result = self.check(sagemaker_config)  # raises for an invalid configuration, as the SDK does
        self.passed.add(key)
        return result


def check_each_configuration_once() -> None:
    """Makes SDK v2 check each distinct configuration once in this process (idempotent; a no-op without SDK v2)."""
    try:
        from sagemaker.config import config as config_module
    except ImportError:  # SDK v3 (or no SDK): nothing to put a memo in front of
        return
    with _lock:
        current = config_module.validate_sagemaker_config
        memo = current if isinstance(current, _CheckedOnce) else _CheckedOnce(current)
        for name in SDK_MODULES:
            module = sys.modules.get(name)
            if module is not None and getattr(module, "validate_sagemaker_config", None) in (memo.check, memo):
                module.validate_sagemaker_config = memo  # type: ignore[attr-defined]
