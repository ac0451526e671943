"""The small convolutional network the MNIST scripts train (same architecture in every script, so that their
accuracies and times compare), and its held-out evaluation."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["build_cnn", "build_mlp", "evaluate_classifier", "MLP_SIZES"]

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


def evaluate_classifier(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """``{"test_loss", "test_accuracy"}`` of a model that outputs probabilities, from plain forward passes of 500
    images (no distributed evaluate, so one process alone can run it under a strategy) and a cross-entropy computed
    in numpy (Keras losses with automatic reduction refuse to run under a strategy outside ``fit``)."""
    probs = np.concatenate([model(x[i:i + 500], training=False).numpy() for i in range(0, len(x), 500)])
    loss = float(-np.mean(np.log(np.clip(probs[np.arange(len(y)), y], 1e-7, 1.0))))
    return {"test_loss": loss, "test_accuracy": float(np.mean(np.argmax(probs, axis=1) == y))}
