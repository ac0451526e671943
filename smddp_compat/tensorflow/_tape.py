"""DistributedGradientTape: a tf.GradientTape whose gradients are all-reduced across ranks."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from smddp_compat.errors import UsageError
from smddp_compat.tensorflow._gradients import GradientReducer
from smddp_compat.tensorflow._ops import Compression, check_device_arguments
from smddp_compat.tensorflow.state import require_init

__all__ = ["DistributedGradientTape"]


class DistributedGradientTape(tf.GradientTape):
    """Wraps a recorded ``tf.GradientTape``; ``gradient()`` returns gradients averaged over all ranks.

    Works with Keras 3 and tf-keras variables, eagerly and inside ``tf.function``.

    Args:
        gradtape: The tape that recorded the forward pass.
        device_dense: Not supported (raises when given).
        device_sparse: Not supported (raises when given).
        compression: Compression.none (default) or Compression.fp16.
        sparse_as_dense: Reduce tf.IndexedSlices gradients as dense tensors.
        op: ReduceOp.AVERAGE (default); Horovod scripts may also pass SUM or ADASUM.
        gradient_predivide_factor: Horovod's averaging split (1.0 by default).
        bucket_cap_mb: Largest fused message in MB (None: one message for all gradients).

    Raises:
        NotInitializedError: Created before ``init()``.
        UsageError: ``gradtape`` is not a tf.GradientTape, or a bad op/compression.
        NotSupportedError: ``device_dense`` or ``device_sparse`` given.
    """

    def __init__(
        self,
        gradtape: tf.GradientTape,
        device_dense: str = "",
        device_sparse: str = "",
        compression: Any = Compression.none,
        sparse_as_dense: bool = False,
        op: Any = None,
        gradient_predivide_factor: float = 1.0,
        bucket_cap_mb: Any = None,
        **unsupported: Any,
    ) -> None:
        require_init("DistributedGradientTape")
        if not isinstance(gradtape, tf.GradientTape):
            raise UsageError(
                f"DistributedGradientTape wraps a tf.GradientTape, got {type(gradtape).__name__}; "
                "record the forward pass in `with tf.GradientTape() as tape:` and pass `tape`."
            )
        if unsupported:
            raise UsageError(f"unexpected arguments to DistributedGradientTape: {sorted(unsupported)}.")
        check_device_arguments(device_dense, device_sparse)
        # Take over the recorded tape's state; gradient() below reduces what the parent computes.
        self.__dict__.update(gradtape.__dict__)
        self._smddp_reducer = GradientReducer(compression, op, sparse_as_dense, bucket_cap_mb,
                                              gradient_predivide_factor)

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None, **kwargs: Any) -> Any:
        """Computes gradients like tf.GradientTape.gradient, then all-reduces them across ranks."""
        grads = super().gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat = tf.nest.flatten(grads)
        return tf.nest.pack_sequence_as(grads, self._smddp_reducer.reduce(flat))
