"""Makes bad calls to the smddp_compat.tensorflow API in a job of one rank, with the stall watchdog on
(SMDDP_STALL_DIR set); prints one JSON object mapping each case to its error class and message (``error`` None when
the call wrongly succeeded) and the number of collectives it entered. A good allreduce (``control``) shows that the
count works."""

import json

import tensorflow as tf

import smddp_compat.tensorflow as sdp
from smddp_compat.tensorflow import _stall

sdp.init()
watchdog = _stall.active_watchdog()
assert watchdog is not None, "run with SMDDP_STALL_DIR set: the watchdog counts the collectives entered"


def _sgd():
    return tf.keras.optimizers.SGD(0.1)


CASES = {
    "allreduce-unknown-op": lambda: sdp.allreduce(tf.ones([2]), 0, 1, op="median"),
    "allreduce-unknown-op-number": lambda: sdp.allreduce(tf.ones([2]), 0, 1, op=7),
    "allreduce-unknown-compression": lambda: sdp.allreduce(tf.ones([2]), 0, 1, compression="zip"),
    "allreduce-param-index-too-large": lambda: sdp.allreduce(tf.ones([2]), 5, 1),
    "allreduce-num-params-0": lambda: sdp.allreduce(tf.ones([2]), 0, 0),
    "oob-allreduce-unknown-op": lambda: sdp.oob_allreduce(tf.ones([2]), op="median"),
    "broadcast-root-out-of-range": lambda: sdp.broadcast(tf.ones([2]), root_rank=5),
    "broadcast-negative-root": lambda: sdp.broadcast(tf.ones([2]), root_rank=-1),
    "broadcast-variables-root-out-of-range": lambda: sdp.broadcast_variables([tf.Variable(1.0)], root_rank=3),
    "optimizer-bad-bucket": lambda: sdp.DistributedOptimizer(_sgd(), bucket_cap_mb=-1),
    "optimizer-bucket-not-a-multiple-of-128-bytes": lambda: sdp.DistributedOptimizer(_sgd(), bucket_cap_mb=1e-9),
    "optimizer-device-sparse": lambda: sdp.DistributedOptimizer(_sgd(), device_sparse="/gpu:0"),
    "optimizer-wraps-a-string": lambda: sdp.DistributedOptimizer("sgd"),
    "tape-device-dense": lambda: sdp.DistributedGradientTape(tf.GradientTape(), device_dense="/gpu:0"),
    "tape-wraps-a-string": lambda: sdp.DistributedGradientTape("tape"),
    "control": lambda: sdp.allreduce(tf.ones([2]), 0, 1).numpy(),
}


def entered() -> int:
    return watchdog.completed + len(watchdog.active)


results = {}
for name, call in CASES.items():
    before = entered()
    try:
        call()
        results[name] = {"error": None, "message": "", "entered": entered() - before}
    except Exception as exc:  # noqa: BLE001 - recorded for the test to judge
        results[name] = {"error": type(exc).__name__, "message": str(exc), "entered": entered() - before}
results["control"]["accepted"] = results["control"]["error"] is None
print("RESULTS " + json.dumps(results), flush=True)
