"""Hyperparameters (SM_HPS) as the command-line arguments SageMaker passes to a training script.

Imported by the job drivers that sit beside it (with what every SDK v3 driver reads, and how each reports an
environment it cannot run in); the rule itself is :func:`smddp_compat.contract.driver_args`, shipped beside them.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping

from smddp_compat.contract import driver_args
from smddp_compat.job_startup import with_startup_path


def from_environment(environ: Mapping[str, str]) -> list[str]:
    """The arguments for the hyperparameters in ``environ["SM_HPS"]`` (none when unset).

    Raises:
        ValueError: SM_HPS is not a JSON object.
    """
    raw = environ.get("SM_HPS") or "{}"
    hyperparameters = json.loads(raw)
    if not isinstance(hyperparameters, dict):
        raise ValueError(f"SM_HPS={raw!r} is not a JSON object")
    return driver_args(hyperparameters)


def script_environment() -> dict[str, str]:
    """This process's environment as the user's script gets it: the kit's start-up folder first on ``PYTHONPATH``,
    as every job the kit starts has it (:mod:`smddp_compat.job_startup`: Keras 3 under TensorFlow's strategies)."""
    return {**os.environ, "PYTHONPATH": with_startup_path(os.environ.get("PYTHONPATH"))}


def job_entry(environ: Mapping[str, str]) -> tuple[str, list[str], dict[str, Any]]:
    """What every SDK v3 driver reads first: the user's script (SM_ENTRY_SCRIPT), its arguments (SM_HPS) and the
    config's fields (SM_DISTRIBUTED_CONFIG; empty when unset).

    Raises:
        KeyError: SM_ENTRY_SCRIPT is not set.
        ValueError: SM_HPS or SM_DISTRIBUTED_CONFIG is not a JSON object.
    """
    raw = environ.get("SM_DISTRIBUTED_CONFIG") or "{}"
    config = json.loads(raw)
    if not isinstance(config, dict):
        raise ValueError(f"SM_DISTRIBUTED_CONFIG={raw!r} is not a JSON object")
    return environ["SM_ENTRY_SCRIPT"], from_environment(environ), config


def bad_environment(tag: str, problem: object) -> int:
    """Reports, after the driver's ``tag``, a container environment it cannot run in; returns the exit code, 2."""
    print(f"{tag} error: bad container environment: {problem}", file=sys.stderr, flush=True)
    return 2
