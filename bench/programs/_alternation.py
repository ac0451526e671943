"""Timing of compared variants, taken in turns inside one process, and the memory-copy baseline.

Every rank program measures its variants with :func:`alternate`: the variants run one after the other, in an order
that flips every repetition (A B, B A, A B...), so slow phases of a shared machine hit all variants alike and the
ratio of their times holds even when the absolute times do not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["alternate", "MemoryCopy"]


def alternate(
    variants: Mapping[str, Callable[[], object]], repetitions: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Times each variant ``repetitions`` times, in turns, after ``warmup`` untimed calls of each.

    Args:
        variants: Name -> a callable doing one unit of work (it must block until the work is done).
        repetitions: Timed calls of each variant.
        warmup: Untimed calls of each variant first (tracing, connection set-up, first-touch of memory).

    Returns:
        Name -> the seconds of each timed call, in call order.
    """
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repetition in range(repetitions):
        for name in names if repetition % 2 == 0 else reversed(names):
            started = time.perf_counter()
            variants[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds


class MemoryCopy:
    """Copies a buffer of ``nbytes`` into another one: the host's own speed for moving that much data.

    Both buffers are allocated and touched up front, so a call measures the copy and not page faults.

    Args:
        nbytes: Size of the copy (rounded down to whole float32 values, at least one).
    """

    def __init__(self, nbytes: int) -> None:
        count = max(1, nbytes // 4)
        self._source = np.ones(count, dtype=np.float32)
        self._target = np.zeros(count, dtype=np.float32)

    def __call__(self) -> None:
        np.copyto(self._target, self._source)
