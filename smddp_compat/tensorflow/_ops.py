"""Collective operations: SMDDP's signatures, and Horovod's, over Horovod's ops.

Each function accepts what SMDDP documents (``allreduce(tensor, param_index, num_params, compression, op)``) and
what Horovod scripts pass (``average=``, ``name=``, ``prescale_factor=``...). Arguments are checked before any
communication, and a failure across ranks (shapes that differ, a rank that left) becomes a
:class:`~smddp_compat.errors.CollectiveError` that says what happened.
"""

from __future__ import annotations

import contextlib
import enum
import functools
from typing import Any, Callable, Iterator, Sequence

import horovod.tensorflow as _hvd
import tensorflow as tf
from horovod.tensorflow import functions as _horovod_functions
from horovod.tensorflow import mpi_ops as _mpi_ops
from horovod.tensorflow import sync_batch_norm as _horovod_sync_batch_norm
from horovod.tensorflow.compression import Compressor as _Compressor

from smddp_compat.errors import CollectiveError, NotSupportedError, UsageError
from smddp_compat.tensorflow import _stall
from smddp_compat.keras_compat import unwrap_variable
from smddp_compat.tensorflow.state import require_init
from smddp_compat.tensorflow.watched_collectives import KIT_COLLECTIVE, watched_in_graph

__all__ = [
    "Compression", "ReduceOp", "Average", "Sum", "Min", "Max", "Adasum", "Product", "resolve_op", "resolve_compression",
    "check_device_arguments", "allreduce", "grouped_allreduce", "oob_allreduce", "allgather", "broadcast",
    "broadcast_variables", "broadcast_global_variables", "broadcast_object", "allgather_object", "overlap",
    "collective_errors",
]


class Compression:
    """Compression of tensors on the wire: ``none`` (default) or ``fp16`` (floating tensors sent as float16)."""

    none = _hvd.Compression.none
    fp16 = _hvd.Compression.fp16


class ReduceOp(enum.IntEnum):
    """Reduction operations: AVERAGE (default), SUM, MIN, MAX (and Horovod's ADASUM, PRODUCT)."""

    AVERAGE = int(_hvd.Average)
    SUM = int(_hvd.Sum)
    MIN = int(_hvd.Min)
    MAX = int(_hvd.Max)
    ADASUM = int(_hvd.Adasum)
    PRODUCT = int(_hvd.Product)


# Horovod-style names.
Average = ReduceOp.AVERAGE
Sum = ReduceOp.SUM
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Adasum = ReduceOp.ADASUM
Product = ReduceOp.PRODUCT

_OP_NAMES = ", ".join(f"ReduceOp.{m.name}" for m in ReduceOp)


def resolve_op(op: Any, average: bool | None = None, *, allowed: Sequence[ReduceOp] | None = None) -> ReduceOp:
    """Turns ``op`` (a ReduceOp, Horovod constant or name) and Horovod's deprecated ``average`` into a ReduceOp.

    Raises:
        UsageError: Unknown op, both ``op`` and ``average`` given, or an op outside ``allowed``.
    """
    if op is not None and average is not None:
        raise UsageError(f"give either op={op!r} or average={average!r}, not both; op=ReduceOp.AVERAGE is preferred.")
    if op is None:
        resolved = ReduceOp.SUM if average is False else ReduceOp.AVERAGE
    else:
        try:
            resolved = ReduceOp[op.strip().upper()] if isinstance(op, str) else ReduceOp(int(op))
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"unknown reduction op {op!r}; use one of {_OP_NAMES}.") from None
    if allowed is not None and resolved not in allowed:
        names = ", ".join(f"ReduceOp.{m.name}" for m in allowed)
        raise UsageError(f"op ReduceOp.{resolved.name} is not supported here; use {names}.")
    return resolved


def resolve_compression(compression: Any) -> type[_Compressor]:
    """Checks ``compression`` (Compression.none / Compression.fp16, a Horovod compressor, or its name).

    Raises:
        UsageError: Anything else.
    """
    if compression is None:
        return Compression.none
    if isinstance(compression, str):
        named = {"none": Compression.none, "fp16": Compression.fp16}.get(compression.strip().lower())
        if named is not None:
            return named
    elif isinstance(compression, type) and issubclass(compression, _Compressor):
        return compression
    raise UsageError(
        f"unknown compression {compression!r}; use Compression.none (default) or Compression.fp16."
    )


def check_device_arguments(device_dense: str = "", device_sparse: str = "") -> None:
    """SMDDP does not support device placement of collectives; a non-empty value raises.

    Raises:
        NotSupportedError: ``device_dense`` or ``device_sparse`` was given.
    """
    for name, value in (("device_dense", device_dense), ("device_sparse", device_sparse)):
        if value:
            raise NotSupportedError(
                f"{name}={value!r} is not supported: smdistributed.dataparallel places collectives itself. "
                f"Remove the {name} argument."
            )


def _built_now(inputs: Any, build: Callable[[], Any], detail: str = "") -> Any:
    return build()


@contextlib.contextmanager
def collective_errors(operation: str, detail: str = "", *, tensor: str | None = None) -> Iterator[Callable[..., Any]]:
    """Turns TensorFlow errors raised by a Horovod collective into CollectiveError with a readable reason.

    Eager collectives are also registered with the stall watchdog (:mod:`smddp_compat.tensorflow._stall`), which
    reports and ends a rank that waits too long in one. Inside ``tf.function`` this only wraps graph building;
    the collective is built by the function it yields, ``watched(inputs, build, detail="")``, which calls ``build()``
    and, in a ``tf.function``, makes the graph tell the watchdog when the collective runs (see
    :func:`~smddp_compat.tensorflow.watched_collectives.watched_in_graph`; ``detail`` there names one of several
    collectives).

    Args:
        operation: The collective's name, e.g. "allreduce".
        detail: What it works on, e.g. "3 gradients".
        tensor: The tensor's name when the caller gave one (named in stall reports).
    """
    eager = tf.executing_eagerly()
    token = _stall.enter(operation, detail, tensor) if eager else None
    inside = KIT_COLLECTIVE.set(True)
    try:
        yield _built_now if eager else functools.partial(watched_in_graph, operation, tensor, detail=detail)
    except tf.errors.OpError as exc:
        message = exc.message if hasattr(exc, "message") else str(exc)
        fix = "every rank must call the same collectives, in the same order, with the same shapes and dtypes"
        if "Mismatched" in message:
            fix = "make the tensor the same shape and dtype on every rank"
        elif "shut down" in message.lower() or "connection" in message.lower():
            fix = "another rank has failed or exited; see its output for the cause"
        where = f" ({detail})" if detail else ""
        raise CollectiveError(f"{operation}{where} failed across ranks: {message.strip()} -- {fix}.") from exc
    finally:
        KIT_COLLECTIVE.reset(inside)
        _stall.leave(token)


def _check_param_index(param_index: Any, num_params: Any) -> None:
    if param_index is None and num_params is None:
        return
    if not isinstance(param_index, int) or isinstance(param_index, bool) or param_index < 0:
        raise UsageError(f"param_index must be an integer >= 0 (0 for a single tensor), got {param_index!r}.")
    if not isinstance(num_params, int) or isinstance(num_params, bool) or num_params < 1:
        raise UsageError(f"num_params must be an integer >= 1 (the number of tensors reduced), got {num_params!r}.")
    if param_index >= num_params:
        raise UsageError(f"param_index {param_index} must be smaller than num_params {num_params}.")


def allreduce(
    tensor: Any,
    param_index: int | None = None,
    num_params: int | None = None,
    compression: Any = Compression.none,
    op: Any = None,
    *,
    average: bool | None = None,
    name: str | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    device_dense: str = "",
    device_sparse: str = "",
    **horovod_kwargs: Any,
) -> tf.Tensor:
    """All-reduces a tensor across ranks (average by default).

    SMDDP form: ``allreduce(tensor, param_index, num_params, compression=Compression.none, op=ReduceOp.AVERAGE)``;
    Horovod form: ``allreduce(tensor, average=None, compression=..., op=None, name=None, ...)``.

    Args:
        tensor: The tensor (or tf.IndexedSlices) to reduce; same shape and dtype on every rank.
        param_index: Index of the tensor in the list being reduced (0 for a single tensor).
        num_params: Length of that list (1 for a single tensor).
        compression: Compression.none or Compression.fp16.
        op: ReduceOp.AVERAGE (default), SUM, MIN or MAX.
        average: Horovod's deprecated flag (True: average, False: sum).
        name: Name of the operation (must match across ranks when given).
        prescale_factor: Factor applied before the reduction.
        postscale_factor: Factor applied after the reduction.
        device_dense: Not supported (raises when given).
        device_sparse: Not supported (raises when given).
        **horovod_kwargs: Passed to Horovod (e.g. process_set, ignore_name_scope).

    Returns:
        A tensor of the same shape and dtype, reduced across all ranks.

    Raises:
        NotInitializedError: Called before ``init()``.
        UsageError: Bad op, compression or indices.
        CollectiveError: The ranks disagree (e.g. shapes), or a rank failed.
    """
    require_init("allreduce")
    _check_param_index(param_index, num_params)
    check_device_arguments(device_dense, device_sparse)
    resolved_op = resolve_op(op, average)
    codec = resolve_compression(compression)
    with collective_errors("allreduce", tensor=name) as watched:
        return watched(tensor, lambda: _hvd.allreduce(
            tensor, compression=codec, op=int(resolved_op), prescale_factor=prescale_factor,
            postscale_factor=postscale_factor, name=name, **horovod_kwargs))


def grouped_allreduce(
    tensors: Sequence[Any],
    average: bool | None = None,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    op: Any = None,
    **horovod_kwargs: Any,
) -> list[tf.Tensor]:
    """All-reduces a list of tensors as one fused operation (Horovod API).

    Returns:
        The reduced tensors, in the same order.

    Raises:
        NotInitializedError, UsageError, CollectiveError: As for :func:`allreduce`.
    """
    require_init("grouped_allreduce")
    check_device_arguments(device_dense, device_sparse)
    resolved_op = resolve_op(op, average)
    codec = resolve_compression(compression)
    if not tensors:
        return []
    with collective_errors("grouped_allreduce", f"{len(tensors)} tensors") as watched:
        return watched(tensors, lambda: list(
            _hvd.grouped_allreduce(list(tensors), compression=codec, op=int(resolved_op), **horovod_kwargs)))


def oob_allreduce(tensor: Any, compression: Any = Compression.none, op: Any = ReduceOp.AVERAGE) -> tf.Tensor:
    """Out-of-band all-reduce, for values such as the loss (not for gradients). Only AVERAGE is supported.

    Returns:
        The averaged tensor (SMDDP documents None; returning the value is what scripts use it for).

    Raises:
        NotInitializedError, UsageError, CollectiveError: As for :func:`allreduce`.
    """
    require_init("oob_allreduce")
    resolved_op = resolve_op(op, allowed=(ReduceOp.AVERAGE,))
    codec = resolve_compression(compression)
    with collective_errors("oob_allreduce") as watched:
        return watched(tensor, lambda: _hvd.allreduce(tensor, compression=codec, op=int(resolved_op), name=None))


def allgather(tensor: Any, name: str | None = None, **horovod_kwargs: Any) -> tf.Tensor:
    """Concatenates the tensors of all ranks along the first dimension (Horovod API).

    Raises:
        NotInitializedError, CollectiveError.
    """
    require_init("allgather")
    with collective_errors("allgather", tensor=name) as watched:
        return watched(tensor, lambda: _hvd.allgather(tensor, name=name, **horovod_kwargs))


def _check_root_rank(root_rank: Any) -> int:
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        raise UsageError(f"root_rank must be an integer rank, got {root_rank!r}.")
    world = _hvd.size()
    if not 0 <= root_rank < world:
        raise UsageError(f"root_rank {root_rank} is out of range: this job has ranks 0..{world - 1}.")
    return root_rank


def broadcast(tensor: Any, root_rank: int, name: str | None = None, **horovod_kwargs: Any) -> tf.Tensor:
    """Returns ``tensor`` as it is on ``root_rank``, on every rank.

    Raises:
        NotInitializedError, UsageError (bad root rank), CollectiveError.
    """
    require_init("broadcast")
    root = _check_root_rank(root_rank)
    with collective_errors("broadcast", f"root rank {root}", tensor=name) as watched:
        return watched(tensor, lambda: _hvd.broadcast(tensor, root, name=name, **horovod_kwargs))


def _broadcast_values(values: list[tf.Tensor], root_rank: int) -> list[tf.Tensor]:
    # Issued together so Horovod fuses them into a few messages instead of one round trip per variable.
    return [
        _hvd.broadcast(value, root_rank, name=f"smddp.broadcast_variables.{index}")
        for index, value in enumerate(values)
    ]


_broadcast_values_fn = tf.function(_broadcast_values, reduce_retracing=True)


def broadcast_variables(variables: Sequence[Any], root_rank: int) -> None:
    """Sets every variable to its value on ``root_rank`` (model and optimizer variables after the first step).

    Works with tf.Variable, Keras 3 and tf-keras variables, eagerly and inside ``tf.function``.

    Raises:
        NotInitializedError, UsageError (bad root rank or not variables), CollectiveError.
    """
    require_init("broadcast_variables")
    root = _check_root_rank(root_rank)
    if callable(variables) and not isinstance(variables, (list, tuple)):
        variables = variables()
    targets = [unwrap_variable(v) for v in variables]
    for target in targets:
        if not hasattr(target, "assign"):
            raise UsageError(
                f"broadcast_variables expects variables, got {type(target).__name__}: pass model.variables and "
                "optimizer.variables, not tensors."
            )
    if not targets:
        return
    values = [tf.convert_to_tensor(t) for t in targets]
    with collective_errors("broadcast_variables", f"{len(targets)} variables from rank {root}") as watched:
        broadcast_values = _broadcast_values_fn if tf.executing_eagerly() else _broadcast_values
        received = watched(values, lambda: broadcast_values(values, root))
        for target, value in zip(targets, received):
            target.assign(value)


def broadcast_global_variables(root_rank: int) -> tf.Operation:
    """Broadcasts all global variables of the default graph from ``root_rank`` (TF1-style graph mode).

    Returns:
        The grouped assign operation to run in a session.

    Raises:
        UsageError: Called eagerly (use broadcast_variables with model and optimizer variables instead).
    """
    require_init("broadcast_global_variables")
    if tf.executing_eagerly():
        raise UsageError(
            "broadcast_global_variables() works in graph mode only (tf.compat.v1 sessions); in TensorFlow 2 "
            "eager code call broadcast_variables(model.variables, root_rank) and "
            "broadcast_variables(optimizer.variables, root_rank) instead."
        )
    root = _check_root_rank(root_rank)
    variables = tf.compat.v1.global_variables()
    assigns = [v.assign(_hvd.broadcast(v, root, name=f"smddp.broadcast_global.{i}")) for i, v in enumerate(variables)]
    return tf.group(*assigns)


def broadcast_object(obj: Any, root_rank: int = 0, name: str | None = None, **horovod_kwargs: Any) -> Any:
    """Broadcasts a picklable Python object from ``root_rank`` (Horovod API)."""
    require_init("broadcast_object")
    root = _check_root_rank(root_rank)
    with collective_errors("broadcast_object", tensor=name):
        return _hvd.broadcast_object(obj, root_rank=root, name=name, **horovod_kwargs)


def allgather_object(obj: Any, name: str | None = None, **horovod_kwargs: Any) -> list[Any]:
    """Gathers a picklable Python object from every rank into a list (Horovod API)."""
    require_init("allgather_object")
    with collective_errors("allgather_object", tensor=name):
        return _hvd.allgather_object(obj, name=name, **horovod_kwargs)


def overlap(tensor: Any) -> tf.Tensor:
    """Marks a point where communication may overlap the backward pass; an identity op in the graph.

    Horovod's background thread already overlaps reductions with computation, so no extra work is needed.
    """
    require_init("overlap")
    return tf.identity(tensor, name="smddp_overlap")
