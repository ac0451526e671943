"""What the kit arms at the start of every process of its jobs, before the script runs.

The jobs the kit starts (local mode's processes, ``smddprun``'s ranks, the training image's ``train``, the SDK jobs'
drivers) put :func:`startup_path` on ``PYTHONPATH``; its ``sitecustomize`` runs at interpreter start (standard
library only), then the ``sitecustomize`` it hides, if any. It arms the Keras 3 adaptation for
TensorFlow's own multi-process strategies (``import smddp_compat.keras3``: Keras's trainer is adapted when the
script imports it), unless the job selects tf-keras (``TF_USE_LEGACY_KERAS=1``), so a Keras 3 script under
MultiWorkerMirroredStrategy or ParameterServerStrategy trains unchanged.
:func:`require_horovod` is the one-line error of a Horovod-backed import in an environment without Horovod.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["startup_path", "with_startup_path", "require_horovod"]


def startup_path() -> str:
    """The folder whose ``sitecustomize`` calls :func:`install`; the kit puts it on its jobs' ``PYTHONPATH``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")


def with_startup_path(python_path: str | None) -> str:
    """A ``PYTHONPATH`` with :func:`startup_path` first, then ``python_path`` (a job's own value) when set."""
    return os.pathsep.join(p for p in (startup_path(), python_path) if p)


def require_horovod() -> None:
    """Raises ModuleNotFoundError in one line naming the fix when Horovod is not installed in this environment (the
    kit installs without it: Horovod is built against the environment's own TensorFlow, by ``smddp install-horovod``
    or ``setup.sh``)."""
    if importlib.util.find_spec("horovod") is None:
        raise ModuleNotFoundError(
            f"Horovod is not installed in this environment ({sys.prefix}): run `smddp install-horovod` (it builds "
            "Horovod 0.28.1 against this environment's TensorFlow, about 3 minutes), or `bash setup.sh` in the "
            "kit's checkout", name="horovod")
