"""Horovod's Keras ``DistributedOptimizer`` on Keras 3 optimizers.

Horovod 0.28.1 wraps a Keras optimizer in a subclass that all-reduces in ``_aggregate_gradients`` /
``get_gradients`` / ``_compute_gradients``: Keras 2 calls them, Keras 3 calls none of them (it calls
``optimizer.apply``), so on Keras 3 raw Horovod trains every rank on its own gradients, silently. Here the same
Horovod-made subclass (its reduction, ``groups``, process sets, local variables and gradient aggregation over
``backward_passes_per_step``) gets the Keras 3 entry points: ``apply`` (what ``model.fit`` and
``apply_gradients`` call) reduces first; ``_compute_gradients``/``compute_gradients`` (Keras 2 API used by
Horovod scripts) compute with a tape and reduce, and the ``apply_gradients`` that follows them does not reduce
again (as in Horovod on Keras 2); variables are handed to Horovod as ``tf.Variable``.

tf-keras (Keras 2) optimizers and ``tf.compat.v1`` optimizers go to Horovod unchanged.
"""

from __future__ import annotations

from typing import Any

import horovod.keras as _horovod_keras_standalone
import horovod.tensorflow as _horovod
import horovod.tensorflow.keras as _horovod_keras
import tensorflow as tf
from horovod.tensorflow.mpi_ops import Adasum

from smddp_compat.horovod.forward import horovod_arguments, with_signature_of
from smddp_compat.horovod._local_layers import local_layer_variables
from smddp_compat.horovod.variables import unwrap_all, unwrap_groups
from smddp_compat.keras_compat import (
    is_keras3_optimizer, mark_distributed_optimizer, refuse_xla_compilation, unwrap_variable)

__all__ = ["keras_distributed_optimizer", "DistributedOptimizer", "PartialDistributedOptimizer"]


def _apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
    """Keras 3 ``apply``: all-reduce (or aggregate) the gradients, then apply them with the optimizer's own apply."""
    refuse_xla_compilation("DistributedOptimizer.apply")
    base = super(type(self), self)
    variables = list(self._trainable_variables if trainable_variables is None else trainable_variables)
    if getattr(self, "_smddp_gradients_reduced", False):
        # They come from _compute_gradients, which reduced (or accumulated) them already.
        self._smddp_gradients_reduced = False
        reduced = list(grads)
    else:
        reduced = list(self._allreduce(list(grads), unwrap_all(variables)))
    if self._agg_helper is None:
        return base.apply(reduced, variables)
    if not self.built:
        self.build(variables)  # the optimizer's variables must not be created inside the tf.cond below

    def apply_step() -> tf.Tensor:
        base.apply(reduced, variables)
        return tf.constant(True)

    def count_step() -> tf.Tensor:
        # Horovod counts a step that only accumulates as an iteration too.
        self.iterations.assign_add(1)
        return tf.constant(False)

    return tf.cond(tf.equal(self._agg_helper.counter, 0), apply_step, count_step)


def _apply_gradients(self: Any, grads_and_vars: Any, **keras2_arguments: Any) -> Any:
    """``apply_gradients(zip(grads, vars))``; Keras 2's ``experimental_aggregate_gradients`` is accepted, unused."""
    unknown = set(keras2_arguments) - {"experimental_aggregate_gradients", "name"}
    if unknown:
        raise TypeError(f"apply_gradients() got unexpected keyword arguments {sorted(unknown)}")
    pairs = list(grads_and_vars)
    return self.apply([g for g, _ in pairs], [v for _, v in pairs])


def _compute_gradients(self: Any, loss: Any, var_list: Any, grad_loss: Any = None, tape: Any = None) -> list:
    """Keras 2's ``_compute_gradients``: gradients of ``loss`` (a tensor, or a callable) all-reduced, with vars."""
    if tape is None:
        if not callable(loss):
            raise ValueError("`tape` is required when a `Tensor` loss is passed.")
        tape = tf.GradientTape()
    if callable(loss):
        with tape:
            if not callable(var_list):
                tape.watch(unwrap_all(tf.nest.flatten(var_list)))
            loss = loss()
    if callable(var_list):
        var_list = var_list()
    variables = tf.nest.flatten(var_list)
    grads = tape.gradient(loss, unwrap_all(variables), grad_loss)
    reduced = self._allreduce(list(grads), unwrap_all(variables))
    self._smddp_gradients_reduced = True  # the apply_gradients that follows must not reduce them again
    return list(zip(reduced, variables))


def _adapt_to_keras3(optimizer_class: type, wrapped_base: type) -> None:
    horovod_register_local_var = optimizer_class.register_local_var

    def register_local_var(self: Any, var: Any) -> None:
        horovod_register_local_var(self, unwrap_variable(var))

    register_local_var.__doc__ = "Keeps ``var``'s gradient local (not all-reduced), as in Horovod."
    optimizer_class.apply = _apply
    optimizer_class.apply_gradients = _apply_gradients
    optimizer_class._compute_gradients = _compute_gradients
    optimizer_class.register_local_var = register_local_var
    mark_distributed_optimizer(optimizer_class)
    # A saved model then names the plain optimizer and loads without this kit or Horovod.
    optimizer_class.__module__ = wrapped_base.__module__
    optimizer_class.__qualname__ = wrapped_base.__qualname__


def keras_distributed_optimizer(optimizer: Any, **horovod_arguments: Any) -> Any:
    """``horovod.tensorflow.keras.DistributedOptimizer(optimizer, ...)``, made to work when ``optimizer`` is Keras 3.

    Args:
        optimizer: A Keras 3 or tf-keras optimizer.
        **horovod_arguments: Horovod's arguments (``groups`` may hold Keras 3 variables).

    Returns:
        The distributed optimizer, of a subclass of the optimizer's own class.
    """
    horovod_arguments["groups"] = unwrap_groups(horovod_arguments.get("groups"))
    wrapped = _horovod_keras.DistributedOptimizer(optimizer, **horovod_arguments)
    if is_keras3_optimizer(optimizer):
        _adapt_to_keras3(type(wrapped), type(optimizer))
    return wrapped


@with_signature_of(_horovod_keras.DistributedOptimizer)
def DistributedOptimizer(optimizer: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - Horovod's name
    """``horovod.tensorflow.keras.DistributedOptimizer`` (same arguments and defaults) for Keras 3 and tf-keras.

    Args:
        optimizer: The Keras optimizer to wrap.
        *args: Horovod's other arguments (name, device_dense, device_sparse, compression, sparse_as_dense,
            gradient_predivide_factor, op, backward_passes_per_step, average_aggregated_gradients, num_groups,
            groups, process_set, scale_local_gradients); ``groups`` may hold Keras 3 variables.
        **kwargs: The same, by name.

    Returns:
        The distributed optimizer (same class name and config as ``optimizer``).

    Raises:
        ValueError: ``op`` other than Average or Sum, or bad ``groups`` (Horovod's errors).
    """
    arguments = horovod_arguments(_horovod_keras.DistributedOptimizer, (optimizer, *args), kwargs)
    return keras_distributed_optimizer(**arguments)


@with_signature_of(_horovod_keras_standalone.PartialDistributedOptimizer)
def PartialDistributedOptimizer(optimizer: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """Horovod's ``PartialDistributedOptimizer`` (from ``horovod.keras``): ``local_layers`` stay local.

    Args:
        optimizer: The Keras optimizer to wrap.
        *args: Horovod's other arguments, as for :func:`DistributedOptimizer`, with ``local_layers`` (a Keras
            layer or a collection of them whose gradients are not all-reduced) before ``scale_local_gradients``.
        **kwargs: The same, by name.

    Returns:
        The distributed optimizer.

    Raises:
        ValueError: An entry of ``local_layers`` is not a Keras layer, or a bad ``op``/``groups``.
    """
    arguments = horovod_arguments(_horovod_keras_standalone.PartialDistributedOptimizer, (optimizer, *args),
                                  kwargs)
    local_variables = local_layer_variables(arguments.pop("local_layers"))
    wrapped = DistributedOptimizer(**arguments)
    for variable in local_variables:
        wrapped.register_local_var(variable)
    return wrapped


@with_signature_of(_horovod.DistributedOptimizer)
def tensorflow_distributed_optimizer(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
    """``horovod.tensorflow.DistributedOptimizer``: Keras 3 optimizers take the Keras 3 path of this module.

    tf-keras and ``tf.compat.v1.train`` optimizers go to Horovod's own function with every argument.

    Raises:
        ValueError: ``op=Adasum`` with a Keras optimizer, or Horovod's other argument errors.
    """
    if not is_keras3_optimizer(optimizer):
        return _horovod.DistributedOptimizer(optimizer, *args, **kwargs)
    arguments = horovod_arguments(_horovod.DistributedOptimizer, (optimizer, *args), kwargs)
    arguments.pop("use_locking")
    if arguments["op"] == Adasum:
        raise ValueError("op == Adasum is not supported yet with Keras")
    return keras_distributed_optimizer(**arguments)
