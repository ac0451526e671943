"""Rank program: TensorFlow's own MultiWorkerMirroredStrategy all-reduce (ring collective over gRPC), per size,
in turns with a memory copy of the same size.

Started by the bench as one process per worker with ``TF_CONFIG`` set; writes ``rank<N>.json`` into
``$BENCH_RESULT_DIR`` (N is the worker index).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bandwidth_sweep import add_sweep_options, sweep  # noqa: E402
from _rank_result import progress, write_rank_result  # noqa: E402


def main() -> None:
    """Builds the strategy, runs the sweep and writes this worker's result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sweep_options(parser)
    args = parser.parse_args()
    config = json.loads(os.environ["TF_CONFIG"])
    rank = int(config["task"]["index"])
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    progress(rank, f"strategy ready ({strategy.num_replicas_in_sync} workers)")

    def make_reduce(nbytes: int) -> Callable[[], Any]:
        value = tf.fill([max(1, nbytes // 4)], tf.constant(1.0 + rank, tf.float32))

        @tf.function
        def reduce() -> Any:
            def replica_step() -> tf.Tensor:
                context = tf.distribute.get_replica_context()
                return context.all_reduce(tf.distribute.ReduceOp.SUM, value)

            return strategy.run(replica_step)

        def call() -> None:
            for local in strategy.experimental_local_results(reduce()):
                memoryview(local)  # waits for the result without copying it (as the Horovod programs do)

        return call

    result = {"rank": rank, "size": strategy.num_replicas_in_sync, "engine": "mwms", "bandwidth": sweep(args, make_reduce)}
    progress(rank, "bandwidth done")
    write_rank_result(rank, result)


if __name__ == "__main__":
    main()
