"""The bandwidth sweep shared by every engine's rank program: one reduction per message size, in turns with a
memory copy of the same size."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from _alternation import MemoryCopy, alternate

__all__ = ["add_sweep_options", "byte_list", "sweep"]


def byte_list(text: str) -> list[int]:
    """Parses "1024,65536" into [1024, 65536] (an argparse type)."""
    return [int(item) for item in text.split(",") if item]


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--sizes`` (bytes, comma-separated), ``--bytes-per-size``, ``--min-reps`` and ``--max-reps``."""
    parser.add_argument("--sizes", type=byte_list, default=[1 << 10, 1 << 20, 64 << 20])
    parser.add_argument("--bytes-per-size", type=int, default=512 << 20,
                        help="timed bytes per size: small messages get more repetitions, within the bounds below")
    parser.add_argument("--min-reps", type=int, default=5)
    parser.add_argument("--max-reps", type=int, default=30)


def sweep(args: argparse.Namespace, make_reduce: Callable[[int], Callable[[], Any]]) -> dict[str, dict[str, list[float]]]:
    """Times ``make_reduce(nbytes)()`` against a memory copy of ``nbytes``, in turns, for every size.

    Args:
        args: Parsed options from :func:`add_sweep_options`.
        make_reduce: Builds the reduction of one message of ``nbytes`` (the callable must block until it is done).

    Returns:
        ``{str(nbytes): {"allreduce": [seconds...], "copy": [seconds...]}}``.
    """
    out: dict[str, dict[str, list[float]]] = {}
    for nbytes in args.sizes:
        reps = int(np.clip(args.bytes_per_size // nbytes, args.min_reps, args.max_reps))
        out[str(nbytes)] = alternate({"allreduce": make_reduce(nbytes), "copy": MemoryCopy(nbytes)}, reps, warmup=2)
    return out
