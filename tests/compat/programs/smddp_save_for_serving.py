"""An SMDDP TF2 training script in the shape of SageMaker's MNIST examples: 28x28 images, a custom loop with
``DistributedGradientTape``, variables broadcast after the first step, and rank 0 saving the model for TF Serving
with ``model.save(os.path.join(os.environ["SM_MODEL_DIR"], "1"))`` (a path without an extension)."""

import os

import numpy as np
import smdistributed.dataparallel.tensorflow as sdp
import tensorflow as tf
from _result import write_result

sdp.init()

rng = np.random.default_rng(sdp.rank())
images = rng.random((256, 28, 28, 1), dtype=np.float32)
labels = (images[:, :14].mean(axis=(1, 2, 3)) > images[:, 14:].mean(axis=(1, 2, 3))).astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().shuffle(256).batch(32)

model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(8, [3, 3], activation="relu"),
    tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10, activation="softmax"),
])
loss = tf.losses.SparseCategoricalCrossentropy()
opt = tf.optimizers.Adam(0.001 * sdp.size())


@tf.function
def training_step(images, labels):
    with tf.GradientTape() as tape:
        loss_value = loss(labels, model(images, training=True))
    grads = sdp.DistributedGradientTape(tape).gradient(loss_value, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss_value


for batch, (batch_images, batch_labels) in enumerate(dataset.take(20)):
    training_step(batch_images, batch_labels)
    if batch == 0:  # after the first step, when the optimizer's variables exist
        sdp.broadcast_variables(model.variables, root_rank=0)
        sdp.broadcast_variables(opt.variables(), root_rank=0)

if sdp.rank() == 0:
    model.save(os.path.join(os.environ["SM_MODEL_DIR"], "1"))
    probe = np.linspace(0.0, 1.0, 3 * 28 * 28, dtype=np.float32).reshape(3, 28, 28, 1)
    write_result(0, probe=probe.tolist(), predictions=model(probe, training=False).numpy().tolist())
