"""Gradient reduction shared by DistributedGradientTape and DistributedOptimizer.

Gradients are reduced in buckets of at most ``bucket_cap_mb`` (SMDDP's fusion buffer, 25 MB by default), each
bucket one grouped Horovod all-reduce, so many small gradients cost a few messages rather than one each.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Sequence

import horovod.tensorflow as _hvd
import tensorflow as tf

from smddp_compat.errors import UsageError
from smddp_compat.keras_compat import refuse_xla_compilation
from smddp_compat.tensorflow._ops import ReduceOp, collective_errors, resolve_compression, resolve_op

__all__ = ["DEFAULT_BUCKET_CAP_MB", "GradientReducer", "validate_bucket_cap_mb"]

#: SMDDP's default fusion buffer size.
DEFAULT_BUCKET_CAP_MB = 25

_GRADIENT_OPS = (ReduceOp.AVERAGE, ReduceOp.SUM, ReduceOp.ADASUM)


def validate_bucket_cap_mb(bucket_cap_mb: Any) -> int:
    """Checks ``bucket_cap_mb`` as SMDDP documents it and returns the size in bytes.

    Raises:
        UsageError: Not a positive number, or ``bucket_cap_mb * 1024 * 1024`` bytes is not a multiple of 128.
    """
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, numbers.Real) or bucket_cap_mb <= 0:
        raise UsageError(
            f"bucket_cap_mb must be a positive number of megabytes (default {DEFAULT_BUCKET_CAP_MB}), "
            f"got {bucket_cap_mb!r}."
        )
    size_bytes = bucket_cap_mb * 1024 * 1024
    if size_bytes != int(size_bytes) or int(size_bytes) % 128:
        raise UsageError(
            f"bucket_cap_mb={bucket_cap_mb!r} gives {size_bytes!r} bytes, which is not a multiple of 128; "
            "use a whole number of megabytes such as 25."
        )
    return int(size_bytes)


def _nbytes(tensor: Any) -> int:
    shape = tensor.shape
    if shape.num_elements() is None:
        return 0
    return shape.num_elements() * tensor.dtype.size


class GradientReducer:
    """Reduces lists of gradients across ranks with one configuration.

    Args:
        compression: Compression.none or Compression.fp16.
        op: ReduceOp.AVERAGE (default) or SUM (or Horovod's ADASUM).
        sparse_as_dense: Convert tf.IndexedSlices gradients to dense tensors before reducing.
        bucket_cap_mb: Largest bucket in megabytes, or None for a single bucket.
        gradient_predivide_factor: Horovod's split of averaging before/after the sum (1.0: all after).
    """

    def __init__(
        self,
        compression: Any = None,
        op: Any = None,
        sparse_as_dense: bool = False,
        bucket_cap_mb: Any = None,
        gradient_predivide_factor: float = 1.0,
    ) -> None:
        self.compression = resolve_compression(compression)
        self.op = resolve_op(op, allowed=_GRADIENT_OPS)
        self.sparse_as_dense = bool(sparse_as_dense)
        self.bucket_cap_bytes = None if bucket_cap_mb is None else validate_bucket_cap_mb(bucket_cap_mb)
        if gradient_predivide_factor != 1.0 and self.op != ReduceOp.AVERAGE:
            raise UsageError("gradient_predivide_factor applies to op=ReduceOp.AVERAGE only; remove it or use AVERAGE.")
        self.gradient_predivide_factor = float(gradient_predivide_factor)

    def _buckets(self, indices: list[int], grads: list[Any]) -> list[list[int]]:
        if self.bucket_cap_bytes is None:
            return [indices] if indices else []
        buckets: list[list[int]] = []
        current: list[int] = []
        filled = 0
        for index in indices:
            size = _nbytes(grads[index])
            if current and filled + size > self.bucket_cap_bytes:
                buckets.append(current)
                current, filled = [], 0
            current.append(index)
            filled += size
        if current:
            buckets.append(current)
        return buckets

    def reduce(self, grads: Sequence[Any]) -> list[Any]:
        """Reduces ``grads`` across ranks; None entries stay None.

        Returns:
            The reduced gradients, in the same order.
        """
        grads = list(grads)
        if self.sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        if _hvd.size() == 1:
            return grads
        refuse_xla_compilation("gradient allreduce")
        out = list(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        dense = [i for i in present if not isinstance(grads[i], tf.IndexedSlices)]
        sparse = [i for i in present if isinstance(grads[i], tf.IndexedSlices)]
        op = int(self.op)
        prescale = postscale = 1.0
        if self.op == ReduceOp.AVERAGE and self.gradient_predivide_factor != 1.0:
            op = int(ReduceOp.SUM)
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor / _hvd.size()
        groups = self._buckets(dense, grads) + ([sparse] if sparse else [])
        with collective_errors("gradient allreduce", f"{len(present)} gradients") as watched:
            for number, group in enumerate(groups, 1):
                inputs = [grads[i] for i in group]
                bucket = f"{len(present)} gradients, bucket {number} of {len(groups)}"
                reduce_bucket = functools.partial(_hvd.grouped_allreduce, inputs, compression=self.compression, op=op,
                                                  prescale_factor=prescale, postscale_factor=postscale)
                reduced = watched(inputs, reduce_bucket, detail=bucket)
                for index, value in zip(group, reduced):
                    out[index] = value
        return out
