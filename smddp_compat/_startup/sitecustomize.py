"""Start-up of the processes of the kit's jobs (:mod:`smddp_compat.job_startup`): arms the Keras 3 adaptation
(``import smddp_compat.keras3``) unless the job selects tf-keras, then runs the ``sitecustomize`` that this one hides,
if any (a later folder of ``sys.path``), so a site's own start-up still runs. Standard library only: TensorFlow and
Keras are imported by the script."""

import importlib.machinery
import importlib.util
import os
import sys

try:
    from smddp_compat.keras_flavor import selects_tf_keras
except ImportError:  # an interpreter without the kit: nothing to arm
    selects_tf_keras = None  # type: ignore[assignment]


def _run_hidden_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    later = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if selects_tf_keras is not None and not selects_tf_keras():
    import smddp_compat.keras3  # noqa: F401 - importing it arms it
_run_hidden_sitecustomize()
