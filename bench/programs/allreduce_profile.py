"""Rank program: where a large allreduce on Horovod over MPI spends its time, its parts timed in turns.

How it works: ``docs/performance.md``, "The allreduce profile's rank program".
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from mpi4py import MPI

import horovod.tensorflow as hvd
import smddp_compat.tensorflow as sdp
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _alternation import MemoryCopy, alternate  # noqa: E402
from _rank_result import progress, write_rank_result  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The program's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 << 20, help="bytes per allreduce")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--variant", default="defaults", help="name of the settings this run has (for its result)")
    parser.add_argument("--mpi-alone", action="store_true",
                        help="time MPI_Allreduce (mpi4py) without starting Horovod, instead of Horovod's allreduce")
    return parser


def main() -> None:
    """Times the variants in turns and writes this rank's result."""
    args = build_parser().parse_args()
    comm = MPI.COMM_WORLD
    if not args.mpi_alone:
        sdp.init()
        if not hvd.mpi_enabled():
            raise SystemExit("allreduce_profile.py profiles Horovod over MPI: start it with `smddprun --mpi`.")
    rank, size = comm.Get_rank(), comm.Get_size()
    count = max(1, args.size // 4)
    tensor = tf.fill([count], tf.constant(1.0 + rank, tf.float32))
    source = np.full(count, 1.0 + rank, dtype=np.float32)
    target = np.empty_like(source)
    other = np.ones_like(source)

    def horovod() -> None:
        memoryview(hvd.allreduce(tensor, op=hvd.Sum))

    def mpi() -> None:
        comm.Allreduce(source, target, op=MPI.SUM)

    def output_alloc() -> None:
        np.empty(count, dtype=np.float32).fill(0.0)

    def add() -> None:
        np.add(source, other, out=target)

    whole = {"mpi": mpi} if args.mpi_alone else {"horovod": horovod}
    variants = {**whole, "output_alloc": output_alloc, "copy": MemoryCopy(args.size), "add": add}
    seconds = alternate(variants, args.reps, warmup=1)
    expected = size * (size + 1) / 2
    result = (mpi(), float(target[0]))[1] if args.mpi_alone else float(hvd.allreduce(tensor, op=hvd.Sum)[0])
    if result != expected:
        raise RuntimeError(f"the allreduce's sum {result} is not {expected}")
    progress(rank, "profile done")
    write_rank_result(rank, {"rank": rank, "size": size, "bytes": args.size, "seconds": seconds,
                             "variant": args.variant, "malloc_tunables": os.environ.get("GLIBC_TUNABLES", "")})
    if not args.mpi_alone:
        sdp.shutdown()


if __name__ == "__main__":
    main()
