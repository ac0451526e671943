"""Test entry point: joins the job's collective world, trains a tiny model a few steps, and records what it saw.

``--kind`` picks how the world is joined: ``smddp`` (``import smdistributed.dataparallel.tensorflow``, unchanged
SMDDP script), ``horovod`` (the Horovod face), ``mwms`` (``MultiWorkerMirroredStrategy`` from TF_CONFIG), or
``none``. Every process writes ``SM_OUTPUT_DATA_DIR/world-<rank>.json`` (rank, size, local rank/size, host, a
checksum of the trained weights, the hyperparameters it received); rank 0 also saves ``SM_MODEL_DIR/weights.npy``.
"""

import argparse
import json
import os
import socket
import sys

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--kind", default="smddp")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--note", default="")
parser.add_argument("--hold", type=float, default=0.0, help="seconds to wait after training (to be killed in)")
args, unknown = parser.parse_known_args()

if args.kind == "smddp":
    import smdistributed.dataparallel.tensorflow as dist
elif args.kind == "horovod":
    import smddp_compat.horovod.tensorflow as dist
else:
    dist = None

if dist is not None:
    dist.init()
    rank, size, local_rank, local_size = dist.rank(), dist.size(), dist.local_rank(), dist.local_size()
    tf.random.set_seed(1234 + rank)  # different initial weights per rank: the broadcast must make them equal
    w = tf.Variable(tf.random.normal([4, 1]))
    dist.broadcast_variables([w], root_rank=0)
    x = tf.constant(np.arange(8 * 4, dtype=np.float32).reshape(8, 4) / 32.0 + rank)
    for _ in range(args.steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
        tape = dist.DistributedGradientTape(tape)
        (grad,) = tape.gradient(loss, [w])
        w.assign_sub(0.01 * grad)
    total = float(dist.allreduce(tf.constant(1.0), op=dist.ReduceOp.SUM if hasattr(dist, "ReduceOp") else dist.Sum))
elif args.kind == "mwms":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    rank, size = resolver.task_id, strategy.num_replicas_in_sync
    local_rank, local_size = 0, 1
    with strategy.scope():
        w = tf.Variable(tf.random.normal([4, 1], seed=1234 + rank))  # MWMS syncs initial values from the chief

    @tf.function
    def step(x):
        def replica(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
            grad = tape.gradient(loss, w)
            grad = tf.distribute.get_replica_context().all_reduce("mean", grad)
            w.assign_sub(0.01 * grad)
        strategy.run(replica, args=(x,))

    x = tf.constant(np.arange(8 * 4, dtype=np.float32).reshape(8, 4) / 32.0 + rank)
    for _ in range(args.steps):
        step(x)
    total = float(strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None))
else:
    rank, size, local_rank, local_size, total = 0, 1, 0, 1, 1.0
    w = tf.Variable(tf.ones([4, 1]))

if args.hold:
    import time

    print(f"world_probe rank {rank} holding for {args.hold} s", flush=True)
    time.sleep(args.hold)

record = {
    "rank": rank, "size": size, "local_rank": local_rank, "local_size": local_size,
    # The machine this rank runs on (under the MPI launch, the toolkit exports algo-1's SM_* to every rank).
    "host": socket.gethostname(), "sm_current_host": os.environ.get("SM_CURRENT_HOST"),
    "hosts": json.loads(os.environ.get("SM_HOSTS", "[]")),
    "allreduce_sum": total, "weights": [float(v) for v in w.numpy().ravel()],
    "note": args.note, "argv": sys.argv[1:], "unknown": unknown,
}
out = os.environ.get("SM_OUTPUT_DATA_DIR", "/tmp")
with open(os.path.join(out, f"world-{rank}.json"), "w") as handle:
    json.dump(record, handle)
if rank == 0:
    np.save(os.path.join(os.environ.get("SM_MODEL_DIR", "/tmp"), "weights.npy"), w.numpy())
print(f"world_probe rank {rank}/{size} on {record['host']}: sum={total}", flush=True)
