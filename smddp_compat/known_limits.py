"""Limits of TensorFlow and Keras themselves that a job of the kit names in one line, at the call that meets them,
instead of TensorFlow's hundreds of lines that do not say what is wrong. The one known today:

* **Keras 3 cannot** ``fit`` **under MultiWorkerMirroredStrategy with several workers** (keras-team/keras#20585,
  tensorflow/tensorflow#72388): its symbolic build hands a ``PerReplica`` batch to an eager conversion and fails
  with "Attempt to convert a value (PerReplica:{...}) with an unsupported type". tf-keras (``TF_USE_LEGACY_KERAS=1``)
  fits; so does a custom loop (``strategy.run``) under Keras 3, and Keras 3 with one worker.

The jobs the kit starts (local mode's processes, the training image's ``train``) put :func:`startup_path` on
``PYTHONPATH``; its ``sitecustomize`` calls :func:`install` at interpreter start (standard library only). When
``TF_CONFIG`` names two or more workers and ``TF_USE_LEGACY_KERAS`` does not select tf-keras, Keras 3's ``fit`` is
wrapped once the script imports Keras, and a ``fit`` under MultiWorkerMirroredStrategy raises
``NotImplementedError`` at once: a few lines of traceback ending at the script's ``fit`` and one line naming the
limit and the fix (a class SageMaker's toolkit recognises, so the line becomes the job's ``FailureReason``).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Callable, Sequence

__all__ = [
    "KERAS3_MWMS_FIT", "install", "mwms_workers", "selects_tf_keras", "startup_path", "with_startup_path",
    "require_horovod",
]

#: The module of Keras 3 that defines ``fit`` for the TensorFlow backend.
_TRAINER_MODULE = "keras.src.backend.tensorflow.trainer"

#: The one line printed when Keras 3's ``fit`` meets several MultiWorkerMirroredStrategy workers.
KERAS3_MWMS_FIT = (
    "smddp-compat: Keras 3 cannot fit under MultiWorkerMirroredStrategy with {workers} workers (a Keras limit: "
    "keras-team/keras#20585); use tf-keras: set TF_USE_LEGACY_KERAS=1 in the job's environment (tf-keras is "
    "installed), or train with a custom loop (strategy.run)"
)

_TRUE = ("1", "true", "True")


def startup_path() -> str:
    """The folder whose ``sitecustomize`` installs these checks; the kit puts it on its jobs' ``PYTHONPATH``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")


def with_startup_path(python_path: str | None) -> str:
    """A ``PYTHONPATH`` with :func:`startup_path` first, then ``python_path`` (a job's own value) when set."""
    return os.pathsep.join(p for p in (startup_path(), python_path) if p)


def mwms_workers(env: Mapping[str, str]) -> int:
    """The number of workers (chief included) that ``TF_CONFIG`` in `env` names; 0 without a readable one."""
    try:
        cluster = json.loads(env.get("TF_CONFIG", "") or "{}").get("cluster", {})
    except (ValueError, AttributeError):
        return 0
    if not isinstance(cluster, dict):
        return 0
    return sum(len(cluster.get(role) or []) for role in ("chief", "worker") if isinstance(cluster.get(role), list))


def selects_tf_keras(env: Mapping[str, str]) -> bool:
    """Whether `env` makes ``tf.keras`` tf-keras (Keras 2) rather than Keras 3."""
    return env.get("TF_USE_LEGACY_KERAS", "") in _TRUE


def install(env: Mapping[str, str] | None = None) -> bool:
    """Arms the Keras 3 + MultiWorkerMirroredStrategy ``fit`` check when `env` (default: ``os.environ``) needs it.

    Returns:
        Whether the check was armed (several workers in ``TF_CONFIG``, Keras 3 selected).
    """
    env = os.environ if env is None else env
    workers = mwms_workers(env)
    if workers < 2 or selects_tf_keras(env):
        return False
    if _TRAINER_MODULE in sys.modules:
        _wrap_fit(sys.modules[_TRAINER_MODULE], workers)
    elif not any(isinstance(finder, _WrapOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport(workers))
    return True


def _wrap_fit(module: ModuleType, workers: int) -> None:
    """Replaces ``TensorFlowTrainer.fit`` in `module` with one that refuses MultiWorkerMirroredStrategy first."""
    trainer = getattr(module, "TensorFlowTrainer", None)
    fit = getattr(trainer, "fit", None)
    if trainer is None or fit is None or getattr(fit, "_smddp_checked", False):
        return

    @functools.wraps(fit)
    def checked_fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        import tensorflow as tf

        if isinstance(self.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy):
            raise NotImplementedError(KERAS3_MWMS_FIT.format(workers=workers))
        return fit(self, *args, **kwargs)

    checked_fit._smddp_checked = True  # type: ignore[attr-defined]
    trainer.fit = checked_fit


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds Keras 3's trainer module through the other finders and wraps ``fit`` once the module has run."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != _TRAINER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module: Callable[[ModuleType], None] = spec.loader.exec_module
        workers = self.workers

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            _wrap_fit(module, workers)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def require_horovod() -> None:
    """Raises ModuleNotFoundError in one line naming the fix when Horovod is not installed in this environment (the
    kit installs without it: Horovod is built against the environment's own TensorFlow, by ``smddp install-horovod``
    or ``setup.sh``)."""
    if importlib.util.find_spec("horovod") is None:
        raise ModuleNotFoundError(
            f"Horovod is not installed in this environment ({sys.prefix}): run `smddp install-horovod` (it builds "
            "Horovod 0.28.1 against this environment's TensorFlow, about 3 minutes), or `bash setup.sh` in the "
            "kit's checkout", name="horovod")
