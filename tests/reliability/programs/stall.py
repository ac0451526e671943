"""Rank 1 stops calling collectives (it sleeps) while rank 0 waits for it in one.

``stall.py MODE``: the kit's SMDDP face; both ranks first complete two collectives together (a broadcast and an
allreduce), as a training script's first step would, then rank 0 waits in an allreduce of tensor
``gradients/dense_1/kernel``. ``stall.py MODE OP``: a Horovod script whose import line was swapped for the kit's
Horovod face; both ranks complete an allreduce, then rank 0 waits in Horovod's ``OP`` (``alltoall``,
``reducescatter``, ``allgather``, ``broadcast``, ``allreduce``). Rank 0 prints ``ENTERING <time.time()>`` just before
the collective it will wait in forever: called eagerly (MODE ``eager``), or inside a ``tf.function`` (``graph``).
"""

import os
import sys
import time

import tensorflow as tf

mode, operation = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
if operation is None:
    import smddp_compat.tensorflow as sdp

    sdp.init()
    sdp.broadcast(tf.ones([3]), root_rank=0)
    sdp.allreduce(tf.ones([3]), 0, 1)
    rank = sdp.rank()
    step = lambda x: sdp.allreduce(x, 0, 1, name="gradients/dense_1/kernel")  # noqa: E731
else:
    import smddp_compat.horovod.tensorflow as hvd

    hvd.init()
    hvd.allreduce(tf.ones([2]))
    rank = hvd.rank()
    step = {
        "alltoall": lambda x: hvd.alltoall(x, name="exchange"),
        "reducescatter": lambda x: hvd.reducescatter(x, name="scattered"),
        "allgather": lambda x: hvd.allgather(x, name="gathered"),
        "broadcast": lambda x: hvd.broadcast(x, 0, name="broadcasted"),
        "allreduce": lambda x: hvd.allreduce(x, name="reduced"),
    }[operation]
if mode == "graph":  # traced now, so that ENTERING is when the collective runs
    step = tf.function(step).get_concrete_function(tf.TensorSpec([4]))
if rank == 1:
    time.sleep(float(os.environ.get("STALL_SLEEP", "300")))
else:
    print(f"ENTERING {time.time():.3f}", flush=True)
    step(tf.ones([4]))
print("unreachable", flush=True)
