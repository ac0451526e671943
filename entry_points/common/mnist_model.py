"""The small convolutional network the MNIST scripts train (same architecture in every script, so that their
accuracies and times compare)."""

from __future__ import annotations

import tensorflow as tf

__all__ = ["build_cnn", "build_mlp", "MLP_SIZES"]

#: Layer widths of the MLP: the DTensor seeds' 784-700-500-10.
MLP_SIZES = (784, 700, 500, 10)


def build_cnn(seed: int = 0, dropout: float = 0.25) -> tf.keras.Model:
    """Builds conv(32)-pool-conv(64)-pool-dense(128)-softmax(10) for (28, 28, 1) images in [0, 1].

    The output is class probabilities, so the saved model serves without a post-processing step.

    Args:
        seed: Seed of the weight initialisers (identical on every rank: ranks start from the same weights even
            before the broadcast).
        dropout: Dropout rate before the last two dense layers.

    Returns:
        An uncompiled, built Keras model.
    """
    layers = tf.keras.layers
    init = tf.keras.initializers

    def kernel(offset: int) -> tf.keras.initializers.Initializer:
        return init.GlorotUniform(seed=seed * 10 + offset)

    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28, 1), name="image"),
            layers.Conv2D(32, 3, activation="relu", kernel_initializer=kernel(1)),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, activation="relu", kernel_initializer=kernel(2)),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dropout(dropout, seed=seed),
            layers.Dense(128, activation="relu", kernel_initializer=kernel(3)),
            layers.Dropout(dropout, seed=seed + 1),
            layers.Dense(10, activation="softmax", kernel_initializer=kernel(4), name="probabilities"),
        ],
        name="mnist_cnn",
    )
    return model


def build_mlp(seed: int = 0) -> tf.keras.Model:
    """Builds the 784-700-500-10 MLP (ReLU, softmax output) for flattened images in [0, 1], the Keras twin of the
    DTensor Core-API MLP.

    Args:
        seed: Seed of the weight initialisers (identical on every rank).

    Returns:
        An uncompiled, built Keras model taking ``[batch, 784]``.
    """
    init = tf.keras.initializers
    hidden = [
        tf.keras.layers.Dense(width, activation="relu", kernel_initializer=init.GlorotUniform(seed=seed * 10 + i))
        for i, width in enumerate(MLP_SIZES[1:-1])
    ]
    output = tf.keras.layers.Dense(MLP_SIZES[-1], activation="softmax",
                                   kernel_initializer=init.GlorotUniform(seed=seed * 10 + len(hidden)),
                                   name="probabilities")
    return tf.keras.Sequential([tf.keras.Input(shape=(MLP_SIZES[0],), name="image"), *hidden, output], name="mnist_mlp")
