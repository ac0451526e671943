"""A Horovod script (its import swapped for the kit's Horovod face) whose rank 1 stops calling collectives.

Both ranks first complete an allreduce together. Then rank 0 prints ``ENTERING <time.time()>`` and calls Horovod's
``OP`` (``alltoall``, ``reducescatter``, ``allgather``, ``broadcast``, ``allreduce``: the first argument), eagerly
or, with ``graph`` as the second argument, inside a ``tf.function``, while rank 1 sleeps.
"""

import os
import sys
import time

import tensorflow as tf

import smddp_compat.horovod.tensorflow as hvd

operation, mode = sys.argv[1], sys.argv[2]
calls = {
    "alltoall": lambda x: hvd.alltoall(x, name="exchange"),
    "reducescatter": lambda x: hvd.reducescatter(x, name="scattered"),
    "allgather": lambda x: hvd.allgather(x, name="gathered"),
    "broadcast": lambda x: hvd.broadcast(x, 0, name="broadcasted"),
    "allreduce": lambda x: hvd.allreduce(x, name="reduced"),
}
hvd.init()
hvd.allreduce(tf.ones([2]))
step = calls[operation]
if mode == "graph":  # traced now, so that ENTERING is when the collective runs
    step = tf.function(step).get_concrete_function(tf.TensorSpec([4]))
if hvd.rank() == 1:
    time.sleep(float(os.environ.get("STALL_SLEEP", "300")))
else:
    print(f"ENTERING {time.time():.3f}", flush=True)
    step(tf.ones([4]))
print("unreachable", flush=True)
