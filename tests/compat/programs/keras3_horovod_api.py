"""The two Horovod calls every Keras training script makes, on Keras 3, through ``horovod.tensorflow`` (argv[1] =
``horovod``) or through smddp_compat's Horovod face (``smddp_compat``); writes each call's outcome per rank.

- ``broadcast_variables(model.variables, root_rank=0)``: rank 0's initial weights on every rank;
- ``DistributedGradientTape(tape).gradient(loss, model.trainable_variables)``: gradients averaged over the ranks.
"""

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _result import write_result  # noqa: E402

hvd = importlib.import_module({"horovod": "horovod.tensorflow", "smddp_compat": "smddp_compat.tensorflow"}[sys.argv[1]])
hvd.init()
rank, size = hvd.rank(), hvd.size()
outcome = {"keras": tf.keras.__version__, "api": hvd.__name__}

tf.random.set_seed(100 + rank)  # different initial weights on every rank
model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(2)])
try:
    hvd.broadcast_variables(model.variables, root_rank=0)
    outcome["broadcast"] = {"ok": True, "kernel": model.layers[0].kernel.numpy().tolist()}
except Exception as exc:  # noqa: BLE001 - the outcome is what the test judges
    outcome["broadcast"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

x = tf.constant(np.full((4, 3), float(rank + 1), dtype=np.float32))
try:
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    tape = hvd.DistributedGradientTape(tape)
    kernel_gradient = tape.gradient(loss, model.trainable_variables)[0]
    outcome["gradient"] = {"ok": True, "kernel": kernel_gradient.numpy().tolist()}
except Exception as exc:  # noqa: BLE001
    outcome["gradient"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
write_result(rank, size=size, **outcome)
