"""Makes bad calls to the smddp_compat.tensorflow API in a job of one rank; prints one JSON object mapping each
case to ``[error type, message]`` (or ``null`` when the call wrongly succeeded)."""

import json

import tensorflow as tf

import smddp_compat.tensorflow as sdp

sdp.init()
CASES = {
    "allreduce-unknown-op": lambda: sdp.allreduce(tf.ones([2]), 0, 1, op="median"),
    "allreduce-unknown-compression": lambda: sdp.allreduce(tf.ones([2]), 0, 1, compression="zip"),
    "broadcast-root-out-of-range": lambda: sdp.broadcast(tf.ones([2]), root_rank=5),
    "optimizer-bad-bucket": lambda: sdp.DistributedOptimizer(tf.keras.optimizers.SGD(0.1), bucket_cap_mb=-1),
    "tape-device-dense": lambda: sdp.DistributedGradientTape(tf.GradientTape(), device_dense="/gpu:0"),
}
results = {}
for name, call in CASES.items():
    try:
        call()
        results[name] = None
    except Exception as exc:  # noqa: BLE001 - recorded for the test to judge
        results[name] = [type(exc).__name__, str(exc)]
print("RESULTS " + json.dumps(results), flush=True)
