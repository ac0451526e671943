"""Rank 1 stops calling collectives (it sleeps) while rank 0 waits for it in an allreduce.

Both ranks first complete two collectives together (a broadcast and an allreduce), as a training script's first
step would. Rank 0 prints ``ENTERING <time.time()>`` just before the collective it will wait in forever.
"""

import os
import time

import tensorflow as tf

import smddp_compat.tensorflow as sdp

sdp.init()
sdp.broadcast(tf.ones([3]), root_rank=0)
sdp.allreduce(tf.ones([3]), 0, 1)
if sdp.rank() == 1:
    time.sleep(float(os.environ.get("STALL_SLEEP", "300")))
else:
    print(f"ENTERING {time.time():.3f}", flush=True)
    sdp.allreduce(tf.ones([4]), 0, 1, name="gradients/dense_1/kernel")
print("unreachable", flush=True)
