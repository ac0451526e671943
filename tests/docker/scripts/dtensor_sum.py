"""Test entry point: a multi-client DTensor reduction; the result is written to SM_OUTPUT_DATA_DIR/dtensor-<client>.json.

Every client brings ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` virtual CPUs (2 by default) to one global ``batch`` mesh;
device ``i`` holds ``[i, i]``; the global sum is therefore ``n * (n - 1)`` for ``n`` devices in all. Rank 0 also
writes ``SM_MODEL_DIR/sum.txt``.
"""

import json
import os

import tensorflow as tf
from tensorflow.experimental import dtensor

per_client = int(os.environ.get("SMDDP_DTENSOR_DEVICES_PER_CLIENT", "2"))
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * per_client)
dtensor.initialize_accelerator_system("CPU")
devices = dtensor.num_global_devices("CPU")
mesh = dtensor.create_distributed_mesh([("batch", devices)], device_type="CPU")
layout = dtensor.Layout.batch_sharded(mesh, "batch", rank=1)
local = [tf.fill([2], float(i)) for i in mesh.local_device_ids()]
values = dtensor.pack(local, layout)
total = tf.reduce_sum(values)
value = float(dtensor.unpack(total)[0].numpy())
record = {
    "client": dtensor.client_id(),
    "clients": dtensor.num_clients(),
    "devices": devices,
    "local_devices": len(local),
    "sum": value,
    "jobs": os.environ["DTENSOR_JOBS"],
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"dtensor-{record['client']}.json"), "w") as handle:
    json.dump(record, handle)
if record["client"] == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "sum.txt"), "w") as handle:
        handle.write(f"{value}\n")
print("dtensor", record, flush=True)
