"""Rank program: Horovod collectives, each compared in turns with its baseline inside this process.

How it works: ``docs/performance.md``, "The collectives' rank program".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import smddp_compat.tensorflow as sdp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _alternation import alternate  # noqa: E402
from _bandwidth_sweep import add_sweep_options, byte_list, sweep  # noqa: E402
from _rank_result import bytes_written, progress, write_rank_result  # noqa: E402

PARTS = ("bandwidth", "small_tensors", "fp16")


def build_parser() -> argparse.ArgumentParser:
    """The program's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--variant", default="kit", help="name of the engine settings this job runs with (recorded)")
    add_sweep_options(parser)
    parser.add_argument("--small-count", type=int, default=160)
    parser.add_argument("--small-min", type=int, default=64 << 10)
    parser.add_argument("--small-max", type=int, default=1 << 20)
    parser.add_argument("--small-reps", type=int, default=7)
    parser.add_argument("--small-eager-reps", type=int, default=3)
    parser.add_argument("--fp16-sizes", type=byte_list, default=[4 << 20, 64 << 20])
    parser.add_argument("--fp16-reps", type=int, default=7)
    return parser


def _float_tensor(nbytes: int, rank: int) -> tf.Tensor:
    return tf.fill([max(1, nbytes // 4)], tf.constant(1.0 + rank, tf.float32))


def measure_bandwidth(args: argparse.Namespace, rank: int) -> dict[str, Any]:
    """Horovod allreduce (sum) vs. memory copy, in turns, per size."""

    def make_reduce(nbytes: int) -> Callable[[], None]:
        tensor = _float_tensor(nbytes, rank)
        return lambda: memoryview(hvd.allreduce(tensor, op=hvd.Sum))

    return sweep(args, make_reduce)


def _small_tensors(args: argparse.Namespace, rank: int) -> list[tf.Tensor]:
    sizes = np.geomspace(args.small_min, args.small_max, args.small_count).astype(np.int64)
    return [_float_tensor(int(n), rank) for n in sizes]


def measure_small_tensors(args: argparse.Namespace, rank: int) -> dict[str, Any]:
    """Per-tensor SMDDP-style allreduce in a tf.function vs. one grouped_allreduce (and separate eager calls)."""
    tensors = _small_tensors(args, rank)
    count = len(tensors)

    @tf.function
    def per_tensor(values: list[tf.Tensor]) -> list[tf.Tensor]:
        return [sdp.allreduce(value, index, count) for index, value in enumerate(values)]

    @tf.function
    def grouped(values: list[tf.Tensor]) -> list[tf.Tensor]:
        return sdp.grouped_allreduce(values)

    def run_per_tensor() -> None:
        per_tensor(tensors)[-1].numpy()

    def run_grouped() -> None:
        grouped(tensors)[-1].numpy()

    def run_eager() -> None:
        for index, value in enumerate(tensors):
            result = sdp.allreduce(value, index, count)
        result.numpy()

    variants: dict[str, Callable[[], None]] = {"per_tensor_function": run_per_tensor, "grouped": run_grouped}
    seconds = alternate(variants, args.small_reps, warmup=2)
    if args.small_eager_reps > 0:  # the reference, timed in turns with its own grouped calls
        reference = alternate({"per_tensor_eager": run_eager, "grouped": run_grouped}, args.small_eager_reps,
                              warmup=1)
        seconds["per_tensor_eager"] = reference["per_tensor_eager"]
        seconds["grouped_beside_eager"] = reference["grouped"]
    expected = sum(float(1.0 + r) for r in range(hvd.size())) / hvd.size()
    check = float(per_tensor(tensors)[0][0].numpy())
    if abs(check - expected) > 1e-5:
        raise RuntimeError(f"per-tensor allreduce gave {check}, expected the average {expected}")
    return {
        "count": count,
        "total_bytes": int(sum(int(t.shape[0]) * 4 for t in tensors)),
        "seconds": seconds,
    }


def measure_fp16(args: argparse.Namespace, rank: int) -> dict[str, Any]:
    """Compression.none vs. Compression.fp16: seconds and bytes written by this process, per size."""
    out: dict[str, Any] = {}
    for nbytes in args.fp16_sizes:
        tensor = _float_tensor(nbytes, rank)
        written: dict[str, list[int]] = {"none": [], "fp16": []}

        def reduce(name: str, compression: Any, tensor: tf.Tensor = tensor,
                   written: dict[str, list[int]] = written) -> Callable[[], None]:
            def call() -> None:
                before = bytes_written()
                sdp.allreduce(tensor, 0, 1, compression=compression, op=sdp.ReduceOp.SUM).numpy()
                after = bytes_written()
                if before is not None and after is not None:
                    written[name].append(after - before)
            return call

        seconds = alternate(
            {"none": reduce("none", sdp.Compression.none), "fp16": reduce("fp16", sdp.Compression.fp16)},
            args.fp16_reps,
            warmup=1,
        )
        out[str(nbytes)] = {
            "seconds": seconds,
            "bytes_written": {name: values[-args.fp16_reps:] for name, values in written.items()},
            "payload_bytes": {"none": int(tensor.shape[0]) * 4, "fp16": int(tensor.shape[0]) * 2},
        }
    return out


def main() -> None:
    """Runs the requested parts and writes this rank's result."""
    args = build_parser().parse_args()
    parts = [part for part in args.parts.split(",") if part]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"unknown --parts {unknown}; choose from {', '.join(PARTS)}")
    sdp.init()
    rank = hvd.rank()
    progress(rank, f"initialised ({os.environ.get('HOROVOD_CONTROLLER', 'gloo')}, {hvd.size()} ranks)")
    engine = "mpi" if os.environ.get("HOROVOD_CONTROLLER") == "mpi" else "gloo"
    result: dict[str, Any] = {"rank": rank, "size": hvd.size(), "engine": engine, "variant": args.variant}
    measures = {"bandwidth": measure_bandwidth, "small_tensors": measure_small_tensors, "fp16": measure_fp16}
    for part in parts:
        result[part] = measures[part](args, rank)
        progress(rank, f"{part} done")
    write_rank_result(rank, result)
    sdp.shutdown()


if __name__ == "__main__":
    main()
