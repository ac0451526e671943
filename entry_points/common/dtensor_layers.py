"""DTensor-aware layers: Dense and BatchNorm whose variables are DVariables carrying layouts, and an MLP of them.

Each layer takes the layout of its weight matrix. The bias (and a following BatchNorm's variables) are sharded like
the weight's last axis, so ``x @ W + b`` needs no relayout. For a matmul chain the preferred layouts are
``W1: [i, j]`` and ``W2: [j, k]`` with the shared axis ``j`` sharded the same way (e.g. ``[unsharded, "model"]`` then
``["model", unsharded]`` for model parallelism); DTensor inserts the collectives the layouts imply.

Passing ``None`` for a layout gives the same layer with plain ``tf.Variable``s: that host twin of a mesh model holds
checkpoints and the exported SavedModel (see `smddp_compat.entry_points.common.dtensor_mesh.HostCopy`). Weights start
Xavier-uniform (deterministic from a seed), biases at zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf
from tensorflow.experimental import dtensor

__all__ = ["Dense", "BatchNorm", "MLP", "make_variable"]

Activation = Callable[[tf.Tensor], tf.Tensor]

_stateless_uniform = tf.function(tf.random.stateless_uniform)


def make_variable(initial: Callable[[], tf.Tensor], layout: dtensor.Layout | None, *, trainable: bool = True,
                  name: str | None = None) -> tf.Variable:
    """A DVariable with `layout`, its value built by `initial` directly in that layout (under
    ``dtensor.call_with_layout``), or with ``layout=None`` a plain ``tf.Variable``.
    """
    if layout is None:
        return tf.Variable(initial(), trainable=trainable, name=name)
    return dtensor.DVariable(dtensor.call_with_layout(initial, layout), trainable=trainable, name=name)


def _vector_layout(weight_layout: dtensor.Layout | None) -> dtensor.Layout | None:
    # Sharded like the weight's output axis, replicated over the rest of the mesh.
    return None if weight_layout is None else weight_layout.delete([0])


def _assign(variable: tf.Variable, value: tf.Tensor) -> None:
    # Statistics computed from a batch-sharded input can come out with another layout than the variable's.
    if isinstance(variable, dtensor.DVariable):
        value = dtensor.relayout(value, variable.layout)
    variable.assign(value)


class Dense(tf.Module):
    """``activation(x @ W + b)`` with ``W`` laid out as `weight_layout` and ``b`` like ``W``'s last axis.

    Args:
        weight_layout: Layout of ``W`` (rank 2), or ``None`` for plain variables.
        seed: Two integers seeding the Xavier-uniform initialisation of ``W``.
        activation: Applied to the result (default: identity).
    """

    def __init__(self, input_size: int, output_size: int, weight_layout: dtensor.Layout | None,
                 seed: tuple[int, int], activation: Activation | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        limit = (6.0 / (input_size + output_size)) ** 0.5
        self.weight = make_variable(
            lambda: _stateless_uniform(shape=[input_size, output_size], seed=seed, minval=-limit, maxval=limit),
            weight_layout, name="weight")
        self.bias = make_variable(lambda: tf.zeros([output_size]), _vector_layout(weight_layout), name="bias")
        self.activation: Activation = activation if activation is not None else tf.identity

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return self.activation(tf.matmul(x, self.weight) + self.bias)


class BatchNorm(tf.Module):
    """Batch normalisation over the batch axis, with a learned scale and offset and moving statistics (`momentum`: the
    old value's weight), the four vectors laid out as `layout` (rank 1; ``None``: plain variables). Training normalises
    with the statistics of the global batch (DTensor reduces them over the batch shards) and updates the moving
    averages; inference uses the moving averages, so a single example gets a sensible answer.
    """

    def __init__(self, size: int, layout: dtensor.Layout | None, momentum: float = 0.9, epsilon: float = 1e-5,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.momentum = momentum
        self.epsilon = epsilon
        self.gamma = make_variable(lambda: tf.ones([size]), layout, name="gamma")
        self.beta = make_variable(lambda: tf.zeros([size]), layout, name="beta")
        self.moving_mean = make_variable(lambda: tf.zeros([size]), layout, trainable=False, name="moving_mean")
        self.moving_variance = make_variable(lambda: tf.ones([size]), layout, trainable=False,
                                             name="moving_variance")

    def __call__(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if training:
            mean, variance = tf.nn.moments(x, axes=[0])
            keep = self.momentum
            _assign(self.moving_mean, keep * self.moving_mean + (1.0 - keep) * tf.stop_gradient(mean))
            _assign(self.moving_variance, keep * self.moving_variance + (1.0 - keep) * tf.stop_gradient(variance))
        else:
            mean, variance = self.moving_mean, self.moving_variance
        return tf.nn.batch_normalization(x, mean, variance, self.beta, self.gamma, self.epsilon)


class MLP(tf.Module):
    """Dense layers with ReLU between them (optionally each followed by BatchNorm) and linear logits at the end.

    Args:
        sizes: Layer widths from input to output, e.g. ``[784, 700, 500, 10]``.
        weight_layouts: One rank-2 layout per Dense layer (``len(sizes) - 1``), or ``None`` for a host model.
        batch_norm: Put a BatchNorm after every hidden Dense layer.
        seed: Base seed of the weight initialisation (layer ``i`` uses ``(seed, i)``).

    Raises:
        ValueError: The number of layouts does not match the number of layers.
    """

    def __init__(self, sizes: Sequence[int], weight_layouts: Sequence[dtensor.Layout | None] | None,
                 batch_norm: bool = False, seed: int = 0, name: str | None = None) -> None:
        super().__init__(name=name)
        count = len(sizes) - 1
        layouts = list(weight_layouts) if weight_layouts is not None else [None] * count
        if count < 1 or len(layouts) != count:
            raise ValueError(
                f"an MLP with sizes {list(sizes)} needs {max(count, 0)} weight layouts, got {len(layouts)}")
        self.sizes = tuple(int(s) for s in sizes)
        self.dense_layers: list[Dense] = []
        self.norm_layers: list[BatchNorm] = []
        for i in range(count):
            last = i == count - 1
            self.dense_layers.append(Dense(sizes[i], sizes[i + 1], layouts[i], seed=(seed, i),
                                           activation=None if last else tf.nn.relu, name=f"dense_{i}"))
            if batch_norm and not last:
                self.norm_layers.append(BatchNorm(sizes[i + 1], _vector_layout(layouts[i]), name=f"batch_norm_{i}"))

    def __call__(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Logits for `x` (``[batch, sizes[0]]``); `training` switches BatchNorm to batch statistics."""
        for i, dense in enumerate(self.dense_layers):
            x = dense(x)
            if i < len(self.norm_layers):
                x = self.norm_layers[i](x, training=training)
        return x
