"""Every function the Horovod face adds or overrides, on real ranks; the test checks results against rank and size.

Runs with Keras 3, or tf-keras under TF_USE_LEGACY_KERAS=1. Each section records plain numbers; expectations are
computed by the test from rank and size only.
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

import smddp_compat.horovod.tensorflow as hvd
import smddp_compat.horovod.tensorflow.keras as hk
import smddp_compat.tensorflow as sdp
from _result import write_result

keras = tf.keras
hvd.init()
hvd.init()  # Horovod allows a second call
rank, size = hvd.rank(), hvd.size()
out = {"size": size, "keras": keras.Model.__module__.split(".")[0], "sdp_rank": sdp.rank()}


def dense_model(units=(2,), inputs=3, value=1.0):
    def init():
        return keras.initializers.Constant(value)

    return keras.Sequential([keras.Input((inputs,))] + [keras.layers.Dense(u, kernel_initializer=init(),
                                                                           bias_initializer=init()) for u in units])


# --- Horovod's own collectives and errors, re-exported ---
out["alltoall"] = hvd.alltoall(tf.constant([rank * 10 + r for r in range(size)], tf.int32)).numpy().tolist()
out["reducescatter"] = hvd.reducescatter(tf.ones([size, 2]) * (rank + 1), op=hvd.Sum).numpy().tolist()
try:
    hvd.allreduce(tf.ones([2 + rank]), name="mismatch")
except tf.errors.OpError as exc:
    out["mismatch_error"] = type(exc).__name__

# --- broadcast_variables on Keras variables ---
model = dense_model(value=float(rank))
hvd.broadcast_variables(model.variables, root_rank=size - 1)
out["broadcast"] = sorted({float(v) for var in model.variables for v in np.ravel(var.numpy())})

# --- DistributedGradientTape / PartialDistributedGradientTape: loss = (rank + 1) * sum(w) ---
model = dense_model(units=(2, 1), value=1.0)
x = tf.ones([1, 3])
with tf.GradientTape() as tape:
    loss = (rank + 1.0) * tf.reduce_sum(model(x))
grads = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
with tf.GradientTape() as tape:
    loss = (rank + 1.0) * tf.reduce_sum(model(x))
local_grads = tape.gradient(loss, model.trainable_variables)
out["tape_ratio"] = [float(tf.reduce_sum(g) / tf.reduce_sum(lg)) for g, lg in zip(grads, local_grads)]
with tf.GradientTape() as tape:
    loss = (rank + 1.0) * tf.reduce_sum(model(x))
grouped = hvd.DistributedGradientTape(tape, groups=[[model.layers[0].kernel, model.layers[1].kernel]], op=hvd.Sum)
single = grouped.gradient(loss, {"k": model.layers[1].kernel})["k"]
out["tape_grouped_sum_ratio"] = float(tf.reduce_sum(single) / tf.reduce_sum(local_grads[2]))
with tf.GradientTape() as tape:
    loss = (rank + 1.0) * tf.reduce_sum(model(x))
partial = hvd.PartialDistributedGradientTape(tape, local_layers=model.layers[0])
local_pairs, global_pairs = partial.get_local_and_global_gradients(loss, model.trainable_variables)
out["partial_local_ratio"] = [float(tf.reduce_sum(g) / tf.reduce_sum(lg))
                              for (_, g), lg in zip(local_pairs, local_grads[:2])]
out["partial_global_ratio"] = [float(tf.reduce_sum(g) / tf.reduce_sum(lg))
                               for (_, g), lg in zip(global_pairs, local_grads[2:])]


@tf.function
def tape_in_function():
    with tf.GradientTape() as tape:
        loss = (rank + 1.0) * tf.reduce_sum(model(x))
    return hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)


out["tape_function_ratio"] = [float(tf.reduce_sum(g) / tf.reduce_sum(lg))
                              for g, lg in zip(tape_in_function(), local_grads)]

# --- DistributedOptimizer: SGD(1) on w, loss = (rank + 1) * w, 4 steps ---


def optimizer_run(steps=4, in_function=False, **kwargs):
    w = tf.Variable(0.0) if out["keras"] == "tf_keras" else keras.Variable(0.0)
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(1.0), **kwargs)

    def step():
        grads_and_vars = opt._compute_gradients(lambda: (rank + 1.0) * w, [w])
        opt.apply_gradients(grads_and_vars)

    run = tf.function(step) if in_function else step
    for _ in range(steps):
        run()
    counter = int(opt._agg_helper.counter.numpy()) if opt._agg_helper is not None else None
    return [float(w.numpy()), int(opt.iterations.numpy()), counter]


out["opt_average"] = optimizer_run()
out["opt_sum_function"] = optimizer_run(in_function=True, op=hvd.Sum)
out["opt_bpps_sum"] = optimizer_run(steps=5, in_function=True, backward_passes_per_step=2)
out["opt_bpps_avg"] = optimizer_run(steps=4, in_function=True, backward_passes_per_step=2,
                                    average_aggregated_gradients=True)

model = dense_model(units=(1, 1), value=1.0)
popt = hk.PartialDistributedOptimizer(keras.optimizers.SGD(1.0), local_layers=[model.layers[0]])
pairs = popt._compute_gradients(lambda: (rank + 1.0) * tf.reduce_sum(model(x)), model.trainable_variables)
out["partial_opt_grads"] = [float(tf.reduce_sum(g)) for g, _ in pairs]

# Embedding gradients are IndexedSlices: sparse_as_dense makes them dense before the all-reduce.
emb = keras.Sequential([keras.Input((2,), dtype="int32"), keras.layers.Embedding(4, 2)])
sopt = hk.DistributedOptimizer(keras.optimizers.SGD(1.0), sparse_as_dense=True)
before = emb.trainable_variables[0].numpy().copy()
pairs = sopt._compute_gradients(lambda: (rank + 1.0) * tf.reduce_sum(emb(tf.constant([[rank % 4, 3]]))),
                                emb.trainable_variables)
out["sparse_as_dense_type"] = type(pairs[0][0]).__name__
sopt.apply_gradients(pairs)
out["embedding_change"] = (emb.trainable_variables[0].numpy() - before).sum(axis=1).tolist()

# --- model.fit with the callbacks: broadcast with local variables, metric average, learning-rate schedules ---
model = dense_model(units=(1,), inputs=1, value=float(rank))
opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1 * size))
model.compile(optimizer=opt, loss="mse", experimental_run_tf_function=False)
lrs = []
recorder = keras.callbacks.LambdaCallback(
    on_train_batch_begin=lambda batch, logs: lrs.append(float(model.optimizer.lr.numpy())))
local_bias = model.layers[0].bias
history = model.fit(
    np.ones((4, 1), "float32"), np.full((4, 1), float(rank), "float32"), batch_size=2, epochs=4, verbose=0,
    shuffle=False,
    callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=[local_bias]),
               hk.callbacks.MetricAverageCallback(),
               hk.callbacks.LearningRateWarmupCallback(initial_lr=0.1 * size, warmup_epochs=2, steps_per_epoch=2),
               hk.callbacks.LearningRateScheduleCallback(initial_lr=0.1 * size, multiplier=0.5, start_epoch=2),
               recorder])
out["fit_lrs"] = lrs
out["fit_loss"] = [float(v) for v in history.history["loss"]]
out["fit_weights"] = [float(np.ravel(v.numpy())[0]) for v in model.trainable_variables]

# --- SyncBatchNormalization: rank r normalizes rows r*10 + [0, 1, 2, 3] with the statistics of all ranks ---
batch = (rank * 10.0 + np.arange(4.0)).reshape(4, 1).astype("float32")
bn = hvd.SyncBatchNormalization(axis=1, momentum=0.5, epsilon=0.0)
out["syncbn_output"] = np.ravel(bn(tf.constant(batch), training=True).numpy()).tolist()
out["syncbn_moving_mean"] = float(np.ravel(bn.moving_mean.numpy())[0])

# --- elastic.KerasState: sync from rank 0, then restore / commit ---
model = dense_model(value=float(rank))
state = hk.elastic.KerasState(model, keras.optimizers.Adam(), epoch=10 + rank)
state.sync()
synced = float(np.ravel(model.variables[0].numpy())[0])
model.variables[0].assign(tf.fill(model.variables[0].shape, 42.0))
state.restore()
out["elastic"] = [synced, float(np.ravel(model.variables[0].numpy())[0]), state.epoch]

# --- load_model: the optimizer comes back distributed, with its state ---
folder = os.environ["RESULT_DIR"]
path = os.path.join(folder, "model.keras" if out["keras"] == "keras" else "model.h5")
if rank == 0:
    saved = dense_model(units=(1,), inputs=1, value=1.0)
    saved.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    saved.fit(np.ones((2, 1)), np.ones((2, 1)), verbose=0)
    saved.save(path)
hvd.allreduce(tf.constant(0.0), name="saved")  # a barrier: the file exists from here on
loaded = hk.load_model(path)
iterations = int(loaded.optimizer.iterations.numpy())
loaded.fit(np.ones((2, 1), "float32"), np.full((2, 1), float(rank), "float32"), verbose=0, batch_size=2)
out["load_model"] = [type(loaded.optimizer).__name__, iterations,
                     float(np.ravel(loaded.trainable_variables[0].numpy())[0])]

write_result(rank, **out)
hvd.shutdown()
