"""Test entry point: a multi-client DTensor reduction over a mesh spanning every client's virtual CPUs.

Each client brings ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` (default 1) virtual CPUs; writes
``{"client": id, "clients": n, "sum": ...}`` to ``$SM_OUTPUT_DATA_DIR/dtensor-<id>.json``.
"""

import json
import os

import tensorflow as tf
from tensorflow.experimental import dtensor

devices = int(os.environ.get("SMDDP_DTENSOR_DEVICES_PER_CLIENT", "1"))
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
dtensor.initialize_accelerator_system("CPU")
size = devices * dtensor.num_clients()
mesh = dtensor.create_distributed_mesh([("batch", size)], device_type="CPU")
ones = dtensor.call_with_layout(tf.ones, dtensor.Layout.batch_sharded(mesh, "batch", 1), shape=(size,))
total = float(tf.reduce_sum(ones).numpy())
client = dtensor.client_id()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"dtensor-{client}.json"), "w") as handle:
    json.dump({"client": client, "clients": dtensor.num_clients(), "sum": total}, handle)
print("dtensor", client, dtensor.num_clients(), total)
