"""DistributedOptimizer: an optimizer whose gradients are all-reduced across ranks before they are applied.

Accepts Keras 3 optimizers (``tf.keras`` in TF 2.21), tf-keras optimizers (``TF_USE_LEGACY_KERAS=1``) and
``tf.compat.v1.train`` optimizers. The Keras ones come back as an instance of a subclass of the optimizer's own
class, built from its config, so ``model.compile(optimizer=...)`` and custom loops work as before.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from smddp_compat.errors import UsageError
from smddp_compat.tensorflow._gradients import DEFAULT_BUCKET_CAP_MB, GradientReducer
from smddp_compat.keras_compat import is_keras3_optimizer, mark_distributed_optimizer
from smddp_compat.keras_flavor import tf_keras_module
from smddp_compat.tensorflow._ops import Compression, check_device_arguments
from smddp_compat.tensorflow.state import require_init

__all__ = ["DistributedOptimizer"]


def _tf_keras_optimizer_bases() -> tuple[type, ...]:
    tf_keras = tf_keras_module()
    if tf_keras is None:
        return ()
    legacy = getattr(tf_keras.optimizers, "legacy", None)
    return (tf_keras.optimizers.Optimizer, *((legacy.Optimizer,) if legacy is not None else ()))


def _keras3_apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
    grads = self._smddp_reducer.reduce(list(grads))
    return super(self._smddp_base, self).apply(grads, trainable_variables)


def _tf_keras_apply_gradients(self: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
    pairs = list(grads_and_vars)
    grads = self._smddp_reducer.reduce([g for g, _ in pairs])
    return super(self._smddp_base, self).apply_gradients(list(zip(grads, [v for _, v in pairs])), *args, **kwargs)


def _wrap_keras(optimizer: Any, reducer: GradientReducer, method: str, impl: Any) -> Any:
    base = type(optimizer)
    # Same name and module as the wrapped class: a saved model refers to the plain optimizer and loads without us.
    namespace = {method: impl, "_smddp_base": None, "__module__": base.__module__, "__qualname__": base.__qualname__}
    subclass = type(base.__name__, (base,), namespace)
    subclass._smddp_base = subclass
    mark_distributed_optimizer(subclass)
    wrapped = subclass.from_config(optimizer.get_config())
    wrapped._smddp_reducer = reducer
    return wrapped


class _DistributedV1Optimizer(tf.compat.v1.train.Optimizer):
    """A tf.compat.v1.train.Optimizer that all-reduces gradients in compute_gradients."""

    def __init__(self, optimizer: Any, reducer: GradientReducer, name: str, use_locking: bool) -> None:
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._smddp_reducer = reducer

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list:
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads = self._smddp_reducer.reduce([g for g, _ in pairs])
        return list(zip(grads, [v for _, v in pairs]))

    def apply_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(  # noqa: N802 - the SMDDP/Horovod name
    optimizer: Any,
    name: str | None = None,
    use_locking: bool = False,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: Any = None,
    bucket_cap_mb: Any = DEFAULT_BUCKET_CAP_MB,
    gradient_predivide_factor: float = 1.0,
    backward_passes_per_step: int = 1,
    **unsupported: Any,
) -> Any:
    """Wraps ``optimizer`` so that gradients are averaged over all ranks before they are applied.

    Args:
        optimizer: A Keras 3, tf-keras or tf.compat.v1.train optimizer.
        name: Name prefix of the operations (tf.compat.v1 optimizers); default "smdistributed.dataparallel"
            followed by the optimizer's type.
        use_locking: Use locking when updating variables (tf.compat.v1 optimizers).
        device_dense: Not supported (raises when given).
        device_sparse: Not supported (raises when given).
        compression: Compression.none (default) or Compression.fp16.
        sparse_as_dense: Reduce tf.IndexedSlices gradients as dense tensors.
        op: ReduceOp.AVERAGE (default); Horovod scripts may also pass SUM or ADASUM.
        bucket_cap_mb: Fusion buffer size in MB (default 25); ``value * 1024 * 1024`` must be a multiple of 128.
        gradient_predivide_factor: Horovod's averaging split (1.0 by default).
        backward_passes_per_step: Horovod's gradient accumulation; only 1 is supported.

    Returns:
        The distributed optimizer.

    Raises:
        NotInitializedError: Called before ``init()``.
        NotSupportedError: ``device_dense`` or ``device_sparse`` given.
        UsageError: Bad bucket size, op, compression, or an optimizer of an unknown kind.
    """
    require_init("DistributedOptimizer")
    if unsupported:
        raise UsageError(f"unexpected arguments to DistributedOptimizer: {sorted(unsupported)}.")
    check_device_arguments(device_dense, device_sparse)
    if backward_passes_per_step != 1:
        raise UsageError(
            f"backward_passes_per_step={backward_passes_per_step!r} is not supported; accumulate gradients in the "
            "training loop and leave it at 1."
        )
    reducer = GradientReducer(compression, op, sparse_as_dense, bucket_cap_mb, gradient_predivide_factor)
    if is_keras3_optimizer(optimizer):
        return _wrap_keras(optimizer, reducer, "apply", _keras3_apply)
    tf_keras_bases = _tf_keras_optimizer_bases()
    if tf_keras_bases and isinstance(optimizer, tf_keras_bases):
        return _wrap_keras(optimizer, reducer, "apply_gradients", _tf_keras_apply_gradients)
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        label = name or f"smdistributed.dataparallel{type(optimizer).__name__}"
        return _DistributedV1Optimizer(optimizer, reducer, name=label, use_locking=use_locking)
    raise UsageError(
        f"DistributedOptimizer cannot wrap {type(optimizer).__module__}.{type(optimizer).__name__}: pass a Keras "
        "optimizer (tf.keras.optimizers.*) or a tf.compat.v1.train optimizer."
    )
