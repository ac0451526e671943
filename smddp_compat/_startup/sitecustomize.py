"""Start-up of the processes of the kit's jobs: arms :mod:`smddp_compat.known_limits`, then runs the
``sitecustomize`` that this one hides, if any (a later folder of ``sys.path``), so a site's own start-up still runs."""

import importlib.machinery
import importlib.util
import os
import sys

try:
    from smddp_compat import known_limits
except ImportError:  # an interpreter without the kit: nothing to arm
    known_limits = None  # type: ignore[assignment]


def _run_hidden_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    later = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if known_limits is not None:
    known_limits.install()
_run_hidden_sitecustomize()
