"""SageMaker SDK v3 driver of ``smddp_compat.estimators.sdk3.DTensor``: runs the entry script as DTensor clients.

ModelTrainer copies this directory to ``/opt/ml/input/data/sm_drivers/distributed_drivers/`` and runs this script on
every host from the code directory, with SM_DISTRIBUTED_CONFIG holding the DTensor fields, SM_ENTRY_SCRIPT the
user's script and SM_HPS its hyperparameters. The client environment is derived by ``dtensor_launch``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dtensor_launch  # noqa: E402  (a sibling script, found through the line above)
import hyperparameter_args  # noqa: E402


def main() -> int:
    """Reads the v3 environment and launches the clients of this host."""
    environ = hyperparameter_args.script_environment()
    try:
        script, args, config = hyperparameter_args.job_entry(environ)
        return dtensor_launch.launch(config, script, args, environ)
    except (KeyError, ValueError) as exc:
        return hyperparameter_args.bad_environment("[smddp-compat dtensor driver]", repr(exc))


if __name__ == "__main__":
    sys.exit(main())
