"""Horovod's Keras ``load_model``: the loaded optimizer comes back distributed, with its state.

Horovod 0.28.1 maps lower-cased optimizer class names to wrapping functions in ``custom_objects``. Neither Keras 3
nor tf-keras 2.21 takes them (they find the optimizer by its class name and call ``from_config`` on it), so the
raw function returns the model with a plain optimizer: every rank then applies its own gradients, silently.
Here Keras loads the model, then its optimizer is replaced by a DistributedOptimizer of the same class and config
holding the loaded optimizer's state. ``legacy_opts=True`` (tf-keras's legacy optimizers) stays Horovod's own.
"""

from __future__ import annotations

from typing import Any, Sequence

import horovod.tensorflow.keras as _horovod_keras
import tensorflow as tf
from horovod.tensorflow.compression import Compression

from smddp_compat.horovod.optimizer import DistributedOptimizer
from smddp_compat.keras_compat import optimizer_variables

__all__ = ["load_model"]


def _is_built(optimizer: Any) -> bool:
    built = getattr(optimizer, "built", None)  # Keras 3
    return bool(getattr(optimizer, "_built", False) if built is None else built)  # tf-keras: _built


def _redistribute(model: Any, compression: Any) -> None:
    loaded = getattr(model, "optimizer", None)
    if loaded is None:
        return
    distributed = DistributedOptimizer(loaded, compression=compression)
    if _is_built(loaded):
        distributed.build(model.trainable_variables)
        state, targets = optimizer_variables(loaded), optimizer_variables(distributed)
        if len(state) != len(targets):
            raise RuntimeError(f"the loaded {type(loaded).__name__} has {len(state)} variables but its "
                               f"distributed copy {len(targets)}; load the model with tf.keras.models.load_model "
                               "and wrap its optimizer yourself")
        for target, value in zip(targets, state):
            target.assign(value)
    model.optimizer = distributed


def load_model(filepath: Any, custom_optimizers: Sequence[type] | None = None,
               custom_objects: dict[str, Any] | None = None, compression: Any = Compression.none,
               legacy_opts: bool = False) -> Any:
    """Loads a saved Keras model whose optimizer becomes a DistributedOptimizer (Horovod's ``load_model``).

    Args:
        filepath: Path of the saved model (``.keras`` or ``.h5``).
        custom_optimizers: Optimizer classes of your own used by the model.
        custom_objects: Other custom classes or functions, by name.
        compression: Compression of the gradient all-reduce.
        legacy_opts: tf-keras only: the model uses ``tf.keras.optimizers.legacy`` optimizers (Horovod's own path).

    Returns:
        The model, with the distributed optimizer when it was saved with an optimizer.

    Raises:
        RuntimeError: The distributed optimizer's variables do not match the loaded ones.
    """
    if legacy_opts:
        return _horovod_keras.load_model(filepath, custom_optimizers=custom_optimizers,
                                         custom_objects=custom_objects, compression=compression, legacy_opts=True)
    objects = {cls.__name__: cls for cls in custom_optimizers or ()}
    objects.update(custom_objects or {})
    model = tf.keras.models.load_model(filepath, custom_objects=objects or None)
    _redistribute(model, compression)
    return model
