"""Test entry point: a user's plain Keras script, ``model.fit`` under MultiWorkerMirroredStrategy from TF_CONFIG.

Keras 3 cannot fit this with several workers (keras-team/keras#20585); tf-keras (``TF_USE_LEGACY_KERAS=1``) can.
Prints ``fit done loss=<value>`` when it trained."""

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(0)
x = rng.random((256, 8), dtype=np.float32)
y = (x.sum(axis=1) > 4).astype("int32")
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=32, epochs=1, verbose=0)
print(f"fit done loss={history.history['loss'][-1]:.4f}")
