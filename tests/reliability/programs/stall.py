"""Rank 1 stops calling collectives (it sleeps) while rank 0 waits for it in an allreduce.

Both ranks first complete two collectives together (a broadcast and an allreduce), as a training script's first
step would. Rank 0 prints ``ENTERING <time.time()>`` just before the collective it will wait in forever: called
eagerly, or with ``graph`` as argument inside a ``tf.function`` step.
"""

import os
import sys
import time

import tensorflow as tf

import smddp_compat.tensorflow as sdp


def allreduce(x):
    return sdp.allreduce(x, 0, 1, name="gradients/dense_1/kernel")


sdp.init()
sdp.broadcast(tf.ones([3]), root_rank=0)
sdp.allreduce(tf.ones([3]), 0, 1)
if sys.argv[1:] == ["graph"]:  # traced now, so that ENTERING is when the collective runs
    step = tf.function(allreduce).get_concrete_function(tf.TensorSpec([4]))
else:
    step = allreduce
if sdp.rank() == 1:
    time.sleep(float(os.environ.get("STALL_SLEEP", "300")))
else:
    print(f"ENTERING {time.time():.3f}", flush=True)
    step(tf.ones([4]))
print("unreachable", flush=True)
