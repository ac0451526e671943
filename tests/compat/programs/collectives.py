"""Every collective of the API, checked by the test against rank and size."""

import numpy as np
import tensorflow as tf

import smdistributed.dataparallel.tensorflow as sdp
from _result import write_result

sdp.init()
rank, size = sdp.rank(), sdp.size()
value = tf.constant([rank + 1.0, 10.0 * (rank + 1), -(rank + 1.0)])
reduced = {op.name: sdp.allreduce(value, 0, 1, op=op).numpy().tolist()
           for op in (sdp.ReduceOp.AVERAGE, sdp.ReduceOp.SUM, sdp.ReduceOp.MIN, sdp.ReduceOp.MAX)}
default = sdp.allreduce(value, 0, 1).numpy().tolist()
horovod_sum = sdp.allreduce(value, average=False).numpy().tolist()
precise = tf.constant(np.linspace(0.1, 3.3, 50) * (rank + 1), tf.float32)
fp16 = sdp.allreduce(precise, 0, 1, compression=sdp.Compression.fp16, op=sdp.ReduceOp.SUM)
exact = sdp.allreduce(precise, 0, 1, op=sdp.ReduceOp.SUM)
broadcasts = {root: sdp.broadcast(tf.constant([float(rank), 7.0]), root_rank=root).numpy().tolist()
              for root in range(size)}
variable = tf.Variable([float(rank)] * 4)
sdp.broadcast_variables([variable], root_rank=size - 1)
oob = float(sdp.oob_allreduce(tf.constant(float(rank))).numpy())
gathered = sdp.allgather(tf.constant([[rank]] * (rank + 1))).numpy().ravel().tolist()
grouped = [t.numpy().tolist() for t in sdp.grouped_allreduce([tf.constant([1.0 * rank]), tf.constant([2.0])],
                                                              op=sdp.Sum)]


@tf.function
def in_graph(x):
    return sdp.allreduce(x, 0, 2, op=sdp.ReduceOp.SUM), sdp.allreduce(x * 2, 1, 2), sdp.overlap(x)


g_sum, g_avg, g_overlap = in_graph(tf.constant([float(rank)]))
write_result(
    rank,
    size=size,
    local_rank=sdp.local_rank(),
    local_size=sdp.local_size(),
    cross_rank=sdp.cross_rank(),
    cross_size=sdp.cross_size(),
    reduced=reduced,
    default=default,
    horovod_sum=horovod_sum,
    fp16_error=float(tf.reduce_max(tf.abs(fp16 - exact) / tf.abs(exact)).numpy()),
    fp16_dtype=fp16.dtype.name,
    broadcasts={str(k): v for k, v in broadcasts.items()},
    variable=variable.numpy().tolist(),
    oob=oob,
    gathered=gathered,
    grouped=grouped,
    graph=[g_sum.numpy().tolist(), g_avg.numpy().tolist(), g_overlap.numpy().tolist()],
)
sdp.shutdown()
