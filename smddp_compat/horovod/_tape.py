"""Horovod's ``DistributedGradientTape`` and ``PartialDistributedGradientTape``, working on Keras 3 variables.

Horovod's tape is used as it is; its class (made afresh for each tape by Horovod) gets three methods that hand
Horovod the ``tf.Variable`` inside each Keras 3 variable, since Horovod keys gradients by ``variable.ref()``,
which Keras 3 variables lack (``'Variable' object has no attribute 'ref'``). Sources may also be a nested
structure or a single variable, as for ``tf.GradientTape``.
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as _horovod
import tensorflow as tf
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Average, global_process_set

from smddp_compat.horovod._local_layers import local_layer_variables
from smddp_compat.horovod._variables import unwrap_all, unwrap_groups
from smddp_compat.tensorflow._keras_compat import unwrap_variable

__all__ = ["DistributedGradientTape", "PartialDistributedGradientTape"]


def _accept_keras3_variables(tape_class: type) -> None:
    horovod_gradient = tape_class.gradient
    horovod_register_local_source = tape_class.register_local_source

    def gradient(self: Any, target: Any, sources: Any, output_gradients: Any = None,
                 use_generic_names: bool = False) -> Any:
        flat_sources = tf.nest.flatten(sources)
        grads = horovod_gradient(self, target, unwrap_all(flat_sources), output_gradients, use_generic_names)
        return tf.nest.pack_sequence_as(sources, list(grads))

    def register_local_source(self: Any, source: Any) -> None:
        horovod_register_local_source(self, unwrap_variable(source))

    def get_local_and_global_gradients(self: Any, target: Any, sources: Any, output_gradients: Any = None,
                                       use_generic_names: bool = False) -> tuple[list, list]:
        sources = list(sources)
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local_pairs, global_pairs = [], []
        for source, grad in zip(sources, grads):
            is_local = unwrap_variable(source).ref() in self._local_sources
            (local_pairs if is_local else global_pairs).append((source, grad))
        return local_pairs, global_pairs

    gradient.__doc__ = "Gradients of ``target`` w.r.t. ``sources``, all-reduced across the process set."
    tape_class.gradient = gradient
    tape_class.register_local_source = register_local_source
    tape_class.get_local_and_global_gradients = get_local_and_global_gradients


def DistributedGradientTape(  # noqa: N802 - Horovod's name
    gradtape: tf.GradientTape,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: Any = Average,
    gradient_predivide_factor: float = 1.0,
    num_groups: int = 0,
    groups: Any = None,
    process_set: Any = global_process_set,
    scale_local_gradients: bool = True,
) -> tf.GradientTape:
    """Horovod's ``DistributedGradientTape`` (same arguments and behaviour), for Keras 3 and tf-keras variables.

    Args:
        gradtape: The tape that recorded the forward pass.
        device_dense: Device of dense all-reduces.
        device_sparse: Device of sparse all-reduces.
        compression: Horovod's compression (``Compression.none`` or ``Compression.fp16``).
        sparse_as_dense: Reduce ``tf.IndexedSlices`` gradients as dense tensors.
        op: ``Average`` (default), ``Sum`` or ``Adasum``.
        gradient_predivide_factor: Split of the averaging before and after the sum.
        num_groups: Deprecated form of ``groups``.
        groups: A number of groups, or lists of variables (Keras 3 variables allowed) reduced together.
        process_set: Process set the gradients are reduced over.
        scale_local_gradients: Divide the gradients of local sources by the process set's size.

    Returns:
        The distributed tape; ``gradient()`` returns all-reduced gradients.
    """
    tape = _horovod.DistributedGradientTape(
        gradtape, device_dense, device_sparse, compression, sparse_as_dense, op, gradient_predivide_factor,
        num_groups, unwrap_groups(groups), process_set, scale_local_gradients)
    _accept_keras3_variables(type(tape))
    return tape


def PartialDistributedGradientTape(  # noqa: N802 - Horovod's name
    gradtape: tf.GradientTape,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: Any = Average,
    gradient_predivide_factor: float = 1.0,
    num_groups: int = 0,
    groups: Any = None,
    process_set: Any = global_process_set,
    local_layers: Any = None,
    scale_local_gradients: bool = True,
) -> tf.GradientTape:
    """Horovod's ``PartialDistributedGradientTape``: the gradients of ``local_layers`` are not all-reduced.

    Args:
        local_layers: A Keras layer (Keras 3 or tf-keras) or a collection of them whose gradients stay local
            (divided by the process set's size when ``scale_local_gradients``).
        The other arguments: as for :func:`DistributedGradientTape`.

    Returns:
        The distributed tape.

    Raises:
        ValueError: An entry of ``local_layers`` is not a Keras layer.
    """
    local_variables = local_layer_variables(local_layers)
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set,
                                   scale_local_gradients)
    for variable in local_variables:
        tape.register_local_source(variable)
    return tape
