"""The training step every Horovod-style rank program times: forward, loss, the API's ``DistributedGradientTape``
(the allreduce of the gradients) and the optimizer's update, in one ``tf.function``."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import tensorflow as tf

__all__ = ["distributed_train_step"]


def distributed_train_step(api: ModuleType, model: tf.keras.Model, optimizer: Any,
                           loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]) -> Callable[..., tf.Tensor]:
    """A compiled ``step(images, labels) -> loss`` training ``model`` with ``api.DistributedGradientTape``.

    Args:
        api: ``smddp_compat.tensorflow``, ``smdistributed.dataparallel.tensorflow``, ``horovod.tensorflow``...
        model: The Keras model.
        optimizer: The Keras optimizer.
        loss_fn: ``loss_fn(labels, predictions)``.
    """

    @tf.function
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = api.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step
