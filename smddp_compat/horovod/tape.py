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

from smddp_compat.horovod.forward import horovod_arguments, with_signature_of
from smddp_compat.horovod._local_layers import local_layer_variables
from smddp_compat.horovod.variables import unwrap_all, unwrap_groups
from smddp_compat.keras_compat import refuse_xla_compilation, unwrap_variable

__all__ = ["DistributedGradientTape", "PartialDistributedGradientTape"]


def _accept_keras3_variables(tape_class: type) -> None:
    horovod_gradient = tape_class.gradient
    horovod_register_local_source = tape_class.register_local_source

    def gradient(self: Any, target: Any, sources: Any, output_gradients: Any = None,
                 use_generic_names: bool = False) -> Any:
        refuse_xla_compilation("DistributedGradientTape.gradient")
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


@with_signature_of(_horovod.DistributedGradientTape)
def DistributedGradientTape(gradtape: tf.GradientTape, *args: Any, **kwargs: Any) -> tf.GradientTape:  # noqa: N802
    """Horovod's ``DistributedGradientTape`` (same arguments, defaults and behaviour) for Keras 3 and tf-keras.

    Args:
        gradtape: The tape that recorded the forward pass.
        *args: Horovod's other arguments (device_dense, device_sparse, compression, sparse_as_dense, op,
            gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients); ``groups`` may
            hold Keras 3 variables.
        **kwargs: The same, by name.

    Returns:
        The distributed tape; ``gradient()`` returns all-reduced gradients.
    """
    arguments = horovod_arguments(_horovod.DistributedGradientTape, (gradtape, *args), kwargs)
    arguments["groups"] = unwrap_groups(arguments["groups"])
    tape = _horovod.DistributedGradientTape(**arguments)
    _accept_keras3_variables(type(tape))
    return tape


@with_signature_of(_horovod.PartialDistributedGradientTape)
def PartialDistributedGradientTape(gradtape: tf.GradientTape, *args: Any, **kwargs: Any  # noqa: N802
                                   ) -> tf.GradientTape:
    """Horovod's ``PartialDistributedGradientTape``: the gradients of ``local_layers`` are not all-reduced.

    Args:
        gradtape: The tape that recorded the forward pass.
        *args: Horovod's other arguments, as for :func:`DistributedGradientTape`, with ``local_layers`` (a Keras
            layer of Keras 3 or tf-keras, or a collection of them) before ``scale_local_gradients``.
        **kwargs: The same, by name.

    Returns:
        The distributed tape.

    Raises:
        ValueError: An entry of ``local_layers`` is not a Keras layer.
    """
    arguments = horovod_arguments(_horovod.PartialDistributedGradientTape, (gradtape, *args), kwargs)
    local_variables = local_layer_variables(arguments.pop("local_layers"))
    tape = DistributedGradientTape(**arguments)
    for variable in local_variables:
        tape.register_local_source(variable)
    return tape
