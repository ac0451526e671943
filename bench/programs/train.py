"""Rank program: trains the MNIST CNN SMDDP-style and reports when its first step ended, its samples/s and its
peak resident memory.

How it works: ``docs/performance.md``, "The training rank program".
"""

from __future__ import annotations

import time

PROCESS_STARTED = time.time()

import argparse  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("BENCH_REPO"):
    sys.path.insert(0, os.environ["BENCH_REPO"])
    sys.path.insert(0, os.path.join(os.environ["BENCH_REPO"], "bench", "programs"))

import tensorflow as tf  # noqa: E402

from _distributed_step import distributed_train_step  # noqa: E402
from _rank_result import peak_rss_bytes, progress, write_rank_result  # noqa: E402
from smddp_compat.entry_points.common.datasets import load_mnist  # noqa: E402
from smddp_compat.entry_points.common.mnist_model import build_cnn  # noqa: E402

APIS = {"smddp_compat": "smddp_compat.tensorflow", "horovod": "horovod.tensorflow"}


def main() -> None:
    """Trains and writes this rank's result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=sorted(APIS), default="smddp_compat")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32, help="per-rank batch size")
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads per rank (0: TF's default)")
    args, _ = parser.parse_known_args()  # SageMaker adds hyperparameters of its own (--model_dir)
    api = importlib.import_module(APIS[args.api])
    imported = time.time()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, args.threads))
    api.init()
    rank, size = api.rank(), api.size()
    (x, y), _ = load_mnist()
    x, y = x[rank::size], y[rank::size]
    batches = len(x) // args.batch

    model = build_cnn(seed=1)
    optimizer = tf.keras.optimizers.Adam(0.001 * size)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()

    train_step = distributed_train_step(api, model, optimizer, loss_fn)

    def step(number: int) -> float:
        index = number % batches
        images = tf.constant(x[index * args.batch:(index + 1) * args.batch])
        labels = tf.constant(y[index * args.batch:(index + 1) * args.batch])
        loss = float(train_step(images, labels).numpy())
        if number == 0:
            api.broadcast_variables(model.variables, root_rank=0)
            variables = optimizer.variables
            api.broadcast_variables(variables() if callable(variables) else variables, root_rank=0)
        return loss

    progress(rank, f"initialised ({args.api}, {size} ranks)")
    first_loss = step(0)
    first_step_done = time.time()
    progress(rank, "first step done")
    for number in range(1, 1 + args.warmup):
        step(number)
    timed_from = time.perf_counter()
    for number in range(1 + args.warmup, 1 + args.warmup + args.steps):
        last_loss = step(number)
    timed = time.perf_counter() - timed_from
    progress(rank, f"{args.steps} timed steps done")
    write_rank_result(rank, {
        "rank": rank,
        "size": size,
        "api": args.api,
        "keras": tf.keras.__name__,
        "process_started": PROCESS_STARTED,
        "imported": imported,
        "first_step_done": first_step_done,
        "timed_steps": args.steps,
        "timed_seconds": timed,
        "samples_per_second": size * args.batch * args.steps / timed,
        "peak_rss_bytes": peak_rss_bytes(),
        "loss": [first_loss, last_loss],
        # the kit's API faces (the bench's own helpers live under smddp_compat.bench and do not count)
        "smddp_compat_loaded": any(m in sys.modules for m in ("smddp_compat.tensorflow", "smddp_compat.horovod")),
    })
    api.shutdown()


if __name__ == "__main__":
    main()
