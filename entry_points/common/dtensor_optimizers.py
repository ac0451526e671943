"""Adam over DTensor variables, written with TensorFlow's Core API (no Keras optimizer).

Each slot (first and second moment) is a DVariable with its model variable's layout, so a sharded weight has sharded
slots and the update runs shard by shard without communication. The step count is a replicated scalar variable, so
it is checkpointed with the slots and the bias correction stays right across restarts. Given plain ``tf.Variable``s
the same class builds plain slots: the host twin used for checkpoints (see
`smddp_compat.entry_points.common.dtensor_mesh.HostCopy`).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
from tensorflow.experimental import dtensor

from smddp_compat.entry_points.common.dtensor_layers import make_variable

__all__ = ["Adam"]


def _layout_of(variable: tf.Variable) -> dtensor.Layout | None:
    return variable.layout if isinstance(variable, dtensor.DVariable) else None


class Adam(tf.Module):
    """The Adam update rule (Kingma and Ba) with bias correction.

    Args:
        model_variables: The variables to train (all DVariables on one mesh, or all plain variables).
        learning_rate: Step size.
        beta_1: Decay of the first-moment average.
        beta_2: Decay of the second-moment average.
        epsilon: Added to the denominator.

    Raises:
        ValueError: `model_variables` is empty, mixes DVariables and plain variables, or a rate is out of range.
    """

    def __init__(self, model_variables: Sequence[tf.Variable], learning_rate: float = 1e-3, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7) -> None:
        super().__init__(name="adam")
        if not model_variables:
            raise ValueError("Adam needs at least one variable to train")
        layouts = [_layout_of(v) for v in model_variables]
        if len({layout is None for layout in layouts}) != 1:
            raise ValueError("Adam got a mix of DVariables and plain variables; pass one kind")
        if learning_rate <= 0 or not 0 <= beta_1 < 1 or not 0 <= beta_2 < 1:
            raise ValueError(
                f"Adam needs learning_rate > 0 and betas in [0, 1), got {learning_rate}, {beta_1}, {beta_2}")
        self.learning_rate = learning_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.first_moments = [make_variable(lambda v=v: tf.zeros(v.shape, v.dtype), layout, trainable=False)
                              for v, layout in zip(model_variables, layouts)]
        self.second_moments = [make_variable(lambda v=v: tf.zeros(v.shape, v.dtype), layout, trainable=False)
                               for v, layout in zip(model_variables, layouts)]
        scalar = None if layouts[0] is None else dtensor.Layout.replicated(layouts[0].mesh, rank=0)
        self.iterations = make_variable(lambda: tf.zeros([], tf.float32), scalar, trainable=False, name="iterations")

    def apply_gradients(self, gradients: Sequence[tf.Tensor], model_variables: Sequence[tf.Variable]) -> None:
        """Applies one update.

        Args:
            gradients: One gradient per variable.
            model_variables: The variables given at construction, in the same order (the optimizer does not keep
                them, so that its checkpoint holds only its own state).

        Raises:
            ValueError: The counts differ from construction.
        """
        if not len(gradients) == len(model_variables) == len(self.first_moments):
            raise ValueError(f"got {len(gradients)} gradients and {len(model_variables)} variables for an optimizer "
                             f"built for {len(self.first_moments)}")
        self.iterations.assign_add(tf.ones_like(self.iterations))
        step = tf.convert_to_tensor(self.iterations)
        correction_1 = 1.0 - tf.pow(self.beta_1, step)
        correction_2 = 1.0 - tf.pow(self.beta_2, step)
        for variable, gradient, m, v in zip(model_variables, gradients, self.first_moments,
                                            self.second_moments):
            m.assign(self.beta_1 * m + (1.0 - self.beta_1) * gradient)
            v.assign(self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient))
            update = (m / correction_1) / (tf.sqrt(v / correction_2) + self.epsilon)
            variable.assign_sub(self.learning_rate * update)
