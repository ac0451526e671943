"""How the job's collectives report to the stall watchdog (:mod:`smddp_compat.tensorflow._stall`), wherever they
are called from.

An eager collective registers when it starts and leaves when it returns; one traced in a ``tf.function`` makes its
graph do so when it runs (:func:`watched_in_graph`). The kit's own collectives do it through ``_ops``; Horovod's
(what the Horovod face, Horovod's tape, optimizers and Keras callbacks call) through
:func:`watch_horovod_collectives`, which the Horovod face's ``init()`` applies.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from typing import Any, Callable

import horovod.tensorflow as _hvd
import tensorflow as tf
from horovod.tensorflow import functions as _horovod_functions
from horovod.tensorflow import mpi_ops as _mpi_ops
from horovod.tensorflow import sync_batch_norm as _horovod_sync_batch_norm
from tensorflow.python.ops import control_flow_util  # GraphOrParentsInXlaContext: TF has no public equivalent

from smddp_compat.tensorflow import _stall

__all__ = ["KIT_COLLECTIVE", "watched_in_graph", "watch_horovod_collectives"]


def _horovod_op_name(outputs: Any) -> str | None:
    """The name of the one Horovod op whose results ``outputs`` are (Horovod's name for the collective when the
    caller gave none), or None when they come from several."""
    names = set()
    for output in tf.nest.flatten(outputs, expand_composites=True):
        op = output.op
        for _ in range(6):  # what Horovod adds after its op: decompression, averaging, an identity
            if op.type.startswith("Horovod") or not op.inputs:
                break
            op = op.inputs[0].op
        names.add(op.name if op.type.startswith("Horovod") else None)
    return names.pop() if len(names) == 1 else None


def watched_in_graph(operation: str, tensor: str | None, inputs: Any, build: Callable[[], Any],
                     detail: str = "") -> Any:
    """Builds a collective traced in a ``tf.function`` between two run-time calls of the stall watchdog.

    The first runs once ``inputs`` are computed, beside the collective (which does not wait for Python), and
    registers it as the eager path does; the second, once its outputs are, ends it. Both are independent of the
    function's other stateful ops (concurrent collectives stay concurrent, as Horovod fuses them). Left out when the
    watchdog is off (nothing is added), under XLA (it compiles no Python call) and outside ``tf.function`` (no
    automatic control dependencies).
    """
    graph = tf.compat.v1.get_default_graph()
    automatic_dependencies = graph.experimental_acd_manager
    if (automatic_dependencies is None or _stall.active_watchdog() is None
            or control_flow_util.GraphOrParentsInXlaContext(graph)):
        return build()
    description = [_stall.describe(operation, detail, tensor)]
    # Tensors computed in this graph (values from outside it are there when the function starts).
    ready = [t for t in tf.nest.flatten(inputs, expand_composites=True) if getattr(t, "graph", None) is graph]
    with tf.control_dependencies(ready):
        token = tf.numpy_function(functools.partial(_stall.enter_traced, description), [], tf.int64,
                                  stateful=True, name="smddp_stall_enter")
    outputs = build()
    if tensor is None:
        description[0] = _stall.describe(operation, detail, _horovod_op_name(outputs))
    with tf.control_dependencies(tf.nest.flatten(outputs, expand_composites=True)):
        done = tf.numpy_function(_stall.leave_traced, [token], tf.int64, stateful=True, name="smddp_stall_leave")
    automatic_dependencies.run_independently(token.op)
    automatic_dependencies.run_independently(done.op)
    return outputs


#: True while one of the kit's own collectives builds or runs (it is watched already): the Horovod functions it calls
#: then add no second watch.
KIT_COLLECTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("smddp_kit_collective", default=False)

#: Horovod's collectives, as ``horovod.tensorflow`` and its ``mpi_ops`` name them, and how stall reports name them.
#: ``join`` is left out: a rank waits in it for the others by design.
_HOROVOD_COLLECTIVES = {
    "_allreduce": "allreduce", "_grouped_allreduce": "grouped_allreduce", "allgather": "allgather",
    "grouped_allgather": "grouped_allgather", "broadcast": "broadcast", "broadcast_": "broadcast",
    "alltoall": "alltoall", "_reducescatter": "reducescatter", "_grouped_reducescatter": "grouped_reducescatter",
}
_WATCHED_MARK = "__smddp_stall_watched__"


def _watched_horovod(function: Callable[..., Any], operation: str) -> Callable[..., Any]:
    """Horovod's ``function`` registering each call with the stall watchdog (eager) or making its graph do so
    (:func:`watched_in_graph`); its arguments, results and errors are Horovod's own."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def watched(*args: Any, **kwargs: Any) -> Any:
        if KIT_COLLECTIVE.get() or _stall.active_watchdog() is None:
            return function(*args, **kwargs)
        try:
            arguments = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:  # a call Horovod refuses: its own error, unwatched
            return function(*args, **kwargs)
        name = arguments.get("name")
        tensor = name if isinstance(name, str) and name else None
        if tf.executing_eagerly():
            token = _stall.enter(operation, tensor=tensor)
            try:
                return function(*args, **kwargs)
            finally:
                _stall.leave(token)
        inputs = next(iter(arguments.values()), None)
        return watched_in_graph(operation, tensor, inputs, lambda: function(*args, **kwargs))

    setattr(watched, _WATCHED_MARK, True)
    return watched


def watch_horovod_collectives() -> None:
    """Makes Horovod's own collectives report to the stall watchdog as the kit's do, wherever they are called from:
    the Horovod face (``hvd.alltoall``, ``hvd.reducescatter``...), Horovod's tape, optimizers and Keras callbacks.
    Horovod's stall inspector never fires under its Gloo controller, so without this a rank missing from one of them
    would hang the job until its time limit. Calls made by the kit's own collectives pass straight through (they
    are watched already). Idempotent; a function Horovod's modules share stays one object in all of them.
    """
    wrappers: dict[int, Callable[..., Any]] = {}
    for module in (_hvd, _mpi_ops, _horovod_functions, _horovod_sync_batch_norm):
        for attribute, operation in _HOROVOD_COLLECTIVES.items():
            function = getattr(module, attribute, None)
            if function is None or getattr(function, _WATCHED_MARK, False):
                continue
            # One wrapper per function, wherever Horovod's modules imported it under its name.
            watched = wrappers.setdefault(id(function), _watched_horovod(function, operation))
            setattr(module, attribute, watched)
