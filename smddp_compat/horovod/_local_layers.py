"""The ``local_layers`` argument of Horovod's partial tape and optimizer, for Keras 3 and tf-keras layers."""

from __future__ import annotations

from typing import Any

from smddp_compat.keras_compat import keras_layer_types

__all__ = ["local_layer_variables"]


def local_layer_variables(local_layers: Any) -> list[Any]:
    """The trainable variables of ``local_layers`` (None, one layer, or a collection of layers).

    Raises:
        ValueError: An entry is not a Keras layer (Horovod's error and message).
    """
    layer_types = keras_layer_types()
    if local_layers is None:
        layers: list[Any] = []
    elif isinstance(local_layers, layer_types):
        layers = [local_layers]
    else:
        layers = list(local_layers)
        if not all(isinstance(layer, layer_types) for layer in layers):
            raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    return [var for layer in layers for var in layer.trainable_weights]
