"""Horovod's ``SyncBatchNormalization`` for Keras 3 (tf-keras keeps Horovod's own class).

Horovod 0.28.1's layer overrides Keras 2's private ``_moments(inputs, reduction_axes, keep_dims)`` and passes
``fused=False``; Keras 3's BatchNormalization has neither (its hook is ``_moments(inputs, mask)``), so the raw layer
cannot even be built. This one computes the batch statistics over every rank of the process set: each rank
all-reduces its sums of x and x^2 and its count (so ranks may hold batches of different sizes), masked entries
left out.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from horovod.tensorflow.mpi_ops import Sum, _allreduce, global_process_set

from smddp_compat.keras_flavor import keras3_module

__all__ = ["SyncBatchNormalization"]


def _keras3_sync_batch_norm_class() -> type:
    keras = keras3_module()

    class SyncBatchNormalization(keras.layers.BatchNormalization):
        """Batch normalization whose training statistics are those of the global batch (all ranks).

        Args:
            fused: Horovod's argument; only False (or omitted) is accepted.
            process_set: Ranks whose batches are normalized together (default: all).
            **kwargs: Keras 3 ``BatchNormalization`` arguments (axis, momentum, epsilon, ...).

        Raises:
            ValueError: ``fused`` is True or None (Horovod's error).
        """

        def __init__(self, fused: bool = False, process_set: Any = global_process_set, **kwargs: Any) -> None:
            if fused in (True, None):
                raise ValueError("SyncBatchNormalization does not support fused=True.")
            if not kwargs.get("name"):
                kwargs["name"] = "sync_batch_normalization"
            super().__init__(**kwargs)
            self.process_set = process_set

        def _moments(self, inputs: Any, mask: Any) -> tuple[tf.Tensor, tf.Tensor]:
            if self.process_set.size() <= 1:
                return super()._moments(inputs, mask)
            inputs = tf.convert_to_tensor(inputs)
            dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
            values = tf.cast(inputs, dtype)
            weights = tf.ones_like(values)
            if mask is not None:
                weights = tf.broadcast_to(tf.cast(tf.expand_dims(mask, -1), dtype), tf.shape(values))
            axes = list(self._reduction_axes)
            local = tf.stack([
                tf.reduce_sum(values * weights, axis=axes),
                tf.reduce_sum(tf.square(values) * weights, axis=axes),
                tf.reduce_sum(weights, axis=axes),
            ])
            total_sum, total_square_sum, count = tf.unstack(
                _allreduce(local, op=Sum, process_set=self.process_set))
            count = tf.maximum(count, 1.0)
            mean = total_sum / count
            variance = tf.maximum(total_square_sum / count - tf.square(mean), 0.0)
            return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)

    return SyncBatchNormalization


def sync_batch_normalization_class() -> type:
    """The class for this process's ``tf.keras``: Keras 3's above, or Horovod's own under tf-keras."""
    if keras3_module() is not None and tf.keras.layers.BatchNormalization.__module__.startswith("keras"):
        return _keras3_sync_batch_norm_class()
    from horovod.tensorflow.sync_batch_norm import SyncBatchNormalization as horovod_class

    return horovod_class


SyncBatchNormalization = sync_batch_normalization_class()
