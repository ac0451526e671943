"""Horovod's Keras ``load_model`` for Keras 3 files: the loaded optimizer comes back distributed, state kept.

Horovod 0.28.1 maps lower-cased optimizer class names to wrappers in ``custom_objects``; Keras 3 looks optimizers
up by their class name and calls ``from_config`` on what it finds, so raw Horovod returns the plain optimizer
(gradients never all-reduced). Here the model is loaded by Keras, then its optimizer is replaced by a
DistributedOptimizer of the same class and config holding the loaded optimizer's state.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import horovod.tensorflow.keras as _horovod_keras
import tensorflow as tf
from horovod.tensorflow.compression import Compression

from smddp_compat.tensorflow._keras_compat import is_keras3_optimizer, keras3_module

__all__ = ["load_model"]


def _redistribute(model: Any, wrap: Callable[[Any], Any]) -> None:
    loaded = getattr(model, "optimizer", None)
    if loaded is None or not is_keras3_optimizer(loaded):
        return
    distributed = wrap(loaded)
    if loaded.built:
        distributed.build(model.trainable_variables)
        for target, value in zip(distributed.variables, loaded.variables):
            target.assign(value)
    model.optimizer = distributed


def load_model(filepath: Any, custom_optimizers: Sequence[type] | None = None,
               custom_objects: dict[str, Any] | None = None, compression: Any = Compression.none,
               legacy_opts: bool = False) -> Any:
    """Loads a saved Keras model whose optimizer becomes a DistributedOptimizer (Horovod's ``load_model``).

    Args:
        filepath: Path of the saved model (``.keras`` or ``.h5`` on Keras 3).
        custom_optimizers: Optimizer classes of your own used by the model.
        custom_objects: Other custom classes or functions, by name.
        compression: Compression of the gradient all-reduce.
        legacy_opts: tf-keras only: the model uses ``tf.keras.optimizers.legacy`` optimizers.

    Returns:
        The model, compiled with the distributed optimizer when it was saved with an optimizer.
    """
    keras = keras3_module()
    if keras is None or not tf.keras.Model.__module__.startswith("keras"):
        return _horovod_keras.load_model(filepath, custom_optimizers=custom_optimizers,
                                         custom_objects=custom_objects, compression=compression,
                                         legacy_opts=legacy_opts)
    from smddp_compat.horovod._optimizer import DistributedOptimizer

    objects = {cls.__name__: cls for cls in custom_optimizers or ()}
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    _redistribute(model, lambda optimizer: DistributedOptimizer(optimizer, compression=compression))
    return model
