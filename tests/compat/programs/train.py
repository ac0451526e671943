"""Trains a small model on each rank's shard; usage: train.py tape|optimizer|fit.

Each rank starts from different random weights (seeded by rank), so identical final weights prove the broadcast
and the gradient all-reduce both work. Runs with Keras 3, or tf-keras under TF_USE_LEGACY_KERAS=1.
"""

import hashlib
import sys

import numpy as np
import tensorflow as tf

import smddp_compat.tensorflow as hvd
from _result import write_result

mode = sys.argv[1]
hvd.init()
rank, size = hvd.rank(), hvd.size()
tf.random.set_seed(100 + rank)
rng = np.random.default_rng(0)
x_all = rng.normal(size=(512, 8)).astype("float32")
y_all = (x_all @ rng.normal(size=(8, 1)) + 0.5).astype("float32")
x, y = x_all[rank::size], y_all[rank::size]
keras = tf.keras
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
loss_fn = keras.losses.MeanSquaredError()
losses = []

if mode == "fit":
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.02 * size))
    model.compile(optimizer=opt, loss="mse")
    history = model.fit(x, y, batch_size=32, epochs=4, shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvd.callbacks.MetricAverageCallback()])
    losses = history.history["loss"]
else:
    opt = keras.optimizers.SGD(0.02 * size)
    if mode == "optimizer":
        opt = hvd.DistributedOptimizer(opt)

    @tf.function
    def step(xb, yb, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        if mode == "tape":
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss

    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    first = True
    for epoch in range(4):
        epoch_losses = []
        for xb, yb in data:
            epoch_losses.append(float(step(xb, yb, first)))
            first = False
        losses.append(float(hvd.oob_allreduce(tf.constant(np.mean(epoch_losses)))))

weights = np.concatenate([np.ravel(v.numpy()) for v in model.trainable_variables])
write_result(
    rank,
    keras=type(model).__module__.split(".")[0],
    losses=[float(v) for v in losses],
    digest=hashlib.sha256(weights.tobytes()).hexdigest(),
    checksum=float(weights.sum()),
)
