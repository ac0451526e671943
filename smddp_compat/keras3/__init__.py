"""Keras 3's TensorFlow trainer under TensorFlow's own multi-process strategies.

Keras 3 (TensorFlow 2.21's ``tf.keras``) cannot ``fit`` under MultiWorkerMirroredStrategy with more than one worker
(keras-team/keras#20585, tensorflow/tensorflow#72388) and has no ``fit`` under ParameterServerStrategy
(keras-team/keras#18624). This package adapts ``keras.src.backend.tensorflow.trainer`` in place, for those two
strategies only (every other strategy runs Keras's own code unchanged):

- :mod:`.multi_worker`: MultiWorkerMirroredStrategy with several workers (``fit``, ``evaluate``, ``predict``, the
  checkpoint, backup and TensorBoard callbacks on the workers that are not the chief);
- :mod:`.parameter_server`: ParameterServerStrategy, steps scheduled through a ``ClusterCoordinator``.

``docs/keras3-strategies.md`` says what changes in Keras 3 and why. The adaptation is guarded by the Keras
versions it was tested on (:data:`TESTED_KERAS`): outside them, a ``fit`` under those strategies stops at once with
one line naming the version and the fix; everything else is left to Keras.

How it is applied:

- The jobs the kit starts (``smddp local``, ``smddprun``, the image's ``train``, the SDK jobs) arm it at interpreter
  start (the `sitecustomize` of :mod:`smddp_compat.job_startup`): Keras's trainer is adapted when the script imports it.
- A script started by hand with its own ``TF_CONFIG`` adds one line, ``import smddp_compat.keras3``, anywhere
  before its ``fit``. Importing this package arms it (:func:`arm`: standard library only; Keras is adapted when it
  is imported, or at once if it already is), unless ``tf.keras`` is tf-keras (``TF_USE_LEGACY_KERAS=1``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable, Sequence

from smddp_compat.keras3.releases import TESTED_KERAS, UNTESTED_KERAS, is_tested_keras, untested_keras_refusal
from smddp_compat.keras_flavor import selects_tf_keras

__all__ = ["TRAINER_MODULE", "TESTED_KERAS", "UNTESTED_KERAS", "adapt", "arm", "untested_keras_refusal", "is_tested_keras"]

#: Keras 3's module that defines ``TensorFlowTrainer`` (``fit``, ``evaluate``, ``predict``) for TensorFlow.
TRAINER_MODULE = "keras.src.backend.tensorflow.trainer"

_MARK = "_smddp_keras3_adapted"


def adapt(trainer_module: ModuleType) -> None:
    """Adapts Keras 3's `trainer_module` (:data:`TRAINER_MODULE`, already run) for both strategies; idempotent."""
    if getattr(trainer_module, _MARK, False):
        return
    # The two adaptations import TensorFlow: loaded once Keras's trainer is, never at a job's start-up.
    from smddp_compat.keras3 import multi_worker, parameter_server

    multi_worker.adapt(trainer_module)
    parameter_server.adapt(trainer_module)
    setattr(trainer_module, _MARK, True)


def arm() -> None:
    """Adapts Keras 3's trainer when it is imported (at once when it already is); standard library only until then.

    Does nothing when the environment selects tf-keras (``TF_USE_LEGACY_KERAS=1``)."""
    if selects_tf_keras():
        return
    if TRAINER_MODULE in sys.modules:
        adapt(sys.modules[TRAINER_MODULE])
    elif not any(isinstance(finder, _AdaptOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AdaptOnImport())


class _AdaptOnImport(importlib.abc.MetaPathFinder):
    """Finds Keras 3's trainer module through the other finders and adapts it once the module has run."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != TRAINER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module: Callable[[ModuleType], None] = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            adapt(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


# ``import smddp_compat.keras3`` is the one line a script started by hand needs; the kit's jobs import it at start.
arm()
