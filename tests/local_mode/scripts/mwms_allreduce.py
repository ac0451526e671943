"""Test entry point: a MultiWorkerMirroredStrategy all-reduce across the workers TF_CONFIG names.

Writes ``{"task": index, "workers": n, "sum": ...}`` to ``$SM_OUTPUT_DATA_DIR/mwms-<index>.json``.
"""

import json
import os

import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]


@tf.function
def step():
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(float(index + 1))), axis=None)


total = float(step().numpy())
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"mwms-{index}.json"), "w") as handle:
    json.dump({"task": index, "workers": strategy.num_replicas_in_sync, "sum": total}, handle)
print("mwms", index, strategy.num_replicas_in_sync, total)
