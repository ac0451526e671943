"""Rank program: step time of the same training loop on raw ``horovod.tensorflow`` and on ``smddp_compat``.

How it works: ``docs/performance.md``, "The overhead rank program".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import smddp_compat.tensorflow as sdp
from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.mnist_model import build_cnn, build_mlp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _alternation import alternate  # noqa: E402
from _distributed_step import distributed_train_step  # noqa: E402
from _rank_result import progress, write_rank_result  # noqa: E402

MODELS = ("cnn", "mlp")


def make_block(model_name: str, api: Any, x: np.ndarray, y: np.ndarray, batch: int, steps: int,
               step_seconds: list[float], cpu_seconds: list[float],
               graph_ops: dict[str, int]) -> Callable[[], None]:
    """A callable running ``steps`` training steps of a fresh model with ``api``'s DistributedGradientTape.

    Each step's wall and CPU seconds are appended to ``step_seconds`` and ``cpu_seconds``; after the first call,
    ``graph_ops`` holds the step graph's op types and counts.
    """
    model = build_cnn(seed=1) if model_name == "cnn" else build_mlp(seed=1)
    optimizer = tf.keras.optimizers.Adam(0.001)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()

    train_step = distributed_train_step(api, model, optimizer, loss_fn)

    batches = len(x) // batch
    position = [0]

    def block() -> None:
        for _ in range(steps):
            index = position[0] % batches
            position[0] += 1
            images = tf.constant(x[index * batch:(index + 1) * batch])
            labels = tf.constant(y[index * batch:(index + 1) * batch])
            started, cpu_started = time.perf_counter(), time.process_time()
            train_step(images, labels).numpy()
            step_seconds.append(time.perf_counter() - started)
            cpu_seconds.append(time.process_time() - cpu_started)
        if not graph_ops:
            graph_ops.update(step_graph_ops(train_step, images, labels))

    return block


def step_graph_ops(function: Any, *args: Any) -> dict[str, int]:
    """The op types of ``function``'s traced graph for ``args`` and how many of each (functions it calls included)."""
    graph_def = function.get_concrete_function(*args).graph.as_graph_def()
    nodes = [*graph_def.node, *(node for called in graph_def.library.function for node in called.node_def)]
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def main() -> None:
    """Times both APIs on both models and writes this rank's result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    parser.add_argument("--blocks", type=int, default=6, help="timed blocks per API and model")
    parser.add_argument("--batch", type=int, default=32, help="per-rank batch size")
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: TF's default)")
    args = parser.parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, args.threads))
    sdp.init()  # initialises Horovod underneath: raw hvd.* calls work from here on
    rank, size = hvd.rank(), hvd.size()
    progress(rank, f"initialised ({size} ranks, {tf.keras.__name__})")
    result: dict[str, Any] = {"rank": rank, "size": size, "keras": tf.keras.__name__, "models": {}}
    for model_name in [m for m in args.models.split(",") if m]:
        (x, y), _ = load_mnist(flatten=model_name == "mlp")
        x, y = x[rank::size], y[rank::size]
        apis = {"horovod": hvd, "smddp_compat": sdp}
        steps: dict[str, list[float]] = {api: [] for api in apis}
        cpu: dict[str, list[float]] = {api: [] for api in apis}
        ops: dict[str, dict[str, int]] = {api: {} for api in apis}
        blocks = {api: make_block(model_name, module, x, y, args.batch, args.steps, steps[api], cpu[api], ops[api])
                  for api, module in apis.items()}
        block_seconds = alternate(blocks, args.blocks, warmup=1)
        progress(rank, f"{model_name} done")
        warm = args.steps  # the warm-up block's steps, tracing included
        result["models"][model_name] = {
            "block_seconds": block_seconds,
            "step_seconds": {api: values[warm:] for api, values in steps.items()},
            "cpu_seconds": {api: values[warm:] for api, values in cpu.items()},
            "graph_ops": ops,
        }
    write_rank_result(rank, result)
    sdp.shutdown()


if __name__ == "__main__":
    main()
