"""A user's plain Keras script, as it would be written without the kit: ``model.compile`` and ``model.fit``, either
alone (``--strategy none``) or under ``tf.distribute.MultiWorkerMirroredStrategy`` (``--strategy mwms``).

The compatibility matrix (``smddp matrix``) runs it to show what a user's own script does under each launcher and
Keras flavour, where the kit's entry points would choose for the user (``entry_points/keras_mwms.py`` switches to
tf-keras by itself when Keras 3 cannot fit across workers). It uses whichever Keras ``tf.keras`` is
(``TF_USE_LEGACY_KERAS=1``: tf-keras) and reads the cluster from ``TF_CONFIG`` as TensorFlow does, nothing else.

Data: the bundled 4,000 / 1,000 real MNIST digits (no download). Prints ``keras=<version>`` first and
``test_accuracy=<value>;`` at the end (rank 0, or the only process). Hyperparameters: ``--steps`` training steps in
one epoch, ``--batch-size`` per worker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tensorflow as tf

from smddp_compat.entry_points.common.datasets import load_mnist


def _model() -> tf.keras.Model:
    return tf.keras.Sequential([
        tf.keras.layers.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


def main() -> int:
    """Trains one short epoch and prints the held-out accuracy."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strategy", choices=("none", "mwms"), default="none")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    args, _ = parser.parse_known_args()
    keras_version = getattr(tf.keras, "__version__", None) or getattr(tf.keras, "version", lambda: "?")()
    print(f"keras={keras_version}", flush=True)
    (x_train, y_train), (x_test, y_test) = load_mnist()
    workers, index = 1, 0
    if args.strategy == "mwms":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
        workers = max(1, len(config.get("cluster", {}).get("worker", [])))
        index = int(config.get("task", {}).get("index", 0))
    else:
        strategy = tf.distribute.get_strategy()
    with strategy.scope():
        model = _model()
        model.compile(optimizer=tf.keras.optimizers.Adam(0.001 * workers),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    global_batch = args.batch_size * workers
    data = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(4000, seed=1).repeat().batch(global_batch)
    model.fit(data, epochs=1, steps_per_epoch=args.steps, verbose=2)
    _, accuracy = model.evaluate(x_test, y_test, batch_size=500, verbose=0)
    if index == 0:
        print(f"test_accuracy={accuracy:.4f};", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
