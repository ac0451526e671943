"""A training script in the pattern of AWS's ``parameter_server`` example (``mnist-2.py``): each host trains a small
Keras model with plain ``fit`` on its own local data (the first host saves it), never touching the parameter servers or
``TF_CONFIG``; ``--tensorboard true`` adds ``tf.keras.callbacks.TensorBoard`` to ``fit``, writing to the job's
TensorBoard folder (``$SM_OUTPUT_DIR/tensorboard``, SageMaker's default ``LocalPath``), as many SageMaker examples and
TensorFlow's tutorials do. Prints the Keras it runs on and ``accuracy=<held-out accuracy>;``."""

from __future__ import annotations

import argparse
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--tensorboard", default="false")
args, _ = parser.parse_known_args()

# Two separable blobs: the label is whether the features' sum is positive.
rng = np.random.default_rng(int(os.environ.get("SM_CURRENT_HOST", "algo-1").rsplit("-", 1)[-1]))
x = rng.normal(size=(1200, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
x_train, y_train, x_test, y_test = x[:1000], y[:1000], x[1000:], y[1000:]

model = tf.keras.Sequential([tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
print(f"keras={tf.keras.__name__}", flush=True)  # keras (Keras 3) or tf_keras...
callbacks = []
if args.tensorboard == "true":
    log_dir = os.path.join(os.environ.get("SM_OUTPUT_DIR", "."), "tensorboard")
    callbacks.append(tf.keras.callbacks.TensorBoard(log_dir=log_dir))
model.fit(x_train, y_train, batch_size=50, epochs=args.epochs, verbose=2, callbacks=callbacks)
_, accuracy = model.evaluate(x_test, y_test, verbose=0)
print(f"accuracy={accuracy:.4f};", flush=True)
if os.environ.get("SM_CURRENT_HOST", "algo-1") == "algo-1":  # the first host keeps the model, as the example does
    model.save(os.path.join(os.environ.get("SM_MODEL_DIR", "."), "model.keras"))
