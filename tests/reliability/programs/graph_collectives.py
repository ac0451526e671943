"""Every collective of smddp_compat.tensorflow that can be traced, inside ``tf.function`` steps, under the watchdog.

Phases: the single collectives (rank 1 builds them in the reverse order of rank 0's: they finish only if the graph
still runs them concurrently, as Horovod needs), one in a ``tf.while_loop``, a DistributedGradientTape step, a
DistributedOptimizer step, and Keras ``fit`` with a DistributedOptimizer (two steps per execution: a loop). Each rank
writes ``$RESULT_DIR/rank<N>.json``: per phase, the collectives the watchdog saw, how many completed, and how many
are still open once the step returned. Then every rank sleeps past the stall limit (``SLEEP_SECONDS``).
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

import smddp_compat.tensorflow as sdp
from smddp_compat.tensorflow import _stall

sdp.init()
rank = sdp.rank()
watchdog = _stall.active_watchdog()
seen: list[str] = []
_enter = watchdog.enter
watchdog.enter = lambda description: seen.append(description) or _enter(description)
phases = {}


def phase(name, run):
    del seen[:]
    completed = watchdog.completed
    run()
    phases[name] = {"seen": list(seen), "completed": watchdog.completed - completed, "open": len(watchdog.active)}


@tf.function
def singles(x):
    a, b, c, d, e = (tf.identity(x * k, name=f"input_{k}") for k in range(1, 6))
    issue = [
        lambda: sdp.allreduce(a, name="named"),
        lambda: sdp.grouped_allreduce([b, 2 * b]),
        lambda: sdp.allgather(c, name="gathered"),
        lambda: sdp.broadcast(d, root_rank=0, name="broadcasted"),
        lambda: sdp.oob_allreduce(e),
    ]
    return [collective() for collective in (issue if rank == 0 else issue[::-1])]


@tf.function
def in_a_loop(x):
    for _ in tf.range(3):
        x = sdp.allreduce(x, name="looped")
    return x


keras = tf.keras
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
loss_fn = keras.losses.MeanSquaredError()
x_data, y_data = np.ones((8, 4), "float32") * (rank + 1), np.ones((8, 1), "float32")
optimizer = sdp.DistributedOptimizer(keras.optimizers.SGD(0.01))
plain = keras.optimizers.SGD(0.01)


@tf.function
def tape_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    tape = sdp.DistributedGradientTape(tape)
    plain.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    sdp.broadcast_variables(model.variables, root_rank=0)


@tf.function
def optimizer_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))


def fit():
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=2)
    model.fit(x_data, y_data, batch_size=2, epochs=1, shuffle=False, verbose=0)


phase("singles", lambda: singles(tf.ones([3])))
phase("loop", lambda: in_a_loop(tf.ones([2])))
phase("tape", lambda: tape_step(x_data, y_data))
phase("optimizer", lambda: optimizer_step(x_data, y_data))
phase("fit", fit)
phases["keras"] = type(model).__module__.split(".")[0]
time.sleep(float(os.environ["SLEEP_SECONDS"]))
with open(os.path.join(os.environ["RESULT_DIR"], f"rank{rank}.json"), "w") as out:
    json.dump(phases, out)
