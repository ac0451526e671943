"""The PNG chart: allreduce bandwidth vs. message size per engine, with the memory copy, one panel per rank count."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smddp_compat.bench.engines import ENGINE_NAMES

__all__ = ["write_bandwidth_chart"]


def _size_label(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"


def write_bandwidth_chart(bandwidth_raw: dict[str, Any], path: Path) -> bool:
    """Draws the chart from the bandwidth measurement's raw numbers into ``path`` (written atomically).

    Returns:
        False when there was nothing to draw (no engine measured).
    """
    engines = {key: value for key, value in bandwidth_raw.get("engines", {}).items() if value.get("sizes")}
    if not engines:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rank_counts = sorted({value["ranks"] for value in engines.values()})
    figure, axes = plt.subplots(1, len(rank_counts), figsize=(6.5 * len(rank_counts), 4.8), squeeze=False)
    for axis, ranks in zip(axes[0], rank_counts):
        copies: dict[int, list[float]] = {}
        for value in engines.values():
            if value["ranks"] != ranks:
                continue
            sizes = sorted(int(size) for size in value["sizes"])
            speeds = [value["sizes"][str(size)]["allreduce_gbps"] for size in sizes]
            name = ENGINE_NAMES.get(value["engine"], value["engine"])
            defaults = bandwidth_raw.get("default_engines", {})
            if value["engine"] == defaults.get(ranks, defaults.get(str(ranks), bandwidth_raw.get("default_engine"))):
                name += " (default)"
            axis.plot(sizes, speeds, marker="o", label=name)
            for size in sizes:
                copies.setdefault(size, []).append(value["sizes"][str(size)]["copy_gbps"])
        copy_sizes = sorted(copies)
        axis.plot(copy_sizes, [sorted(copies[s])[len(copies[s]) // 2] for s in copy_sizes], linestyle="--",
                  color="black", label="memory copy (numpy)")
        axis.set_xscale("log", base=2)
        axis.set_xticks(copy_sizes, [_size_label(size) for size in copy_sizes], rotation=45)
        axis.set_yscale("log")
        axis.set_xlabel("message size")
        axis.set_ylabel("bandwidth (GB/s, size / time)")
        axis.set_title(f"allreduce, {ranks} ranks on one host")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    figure.savefig(temporary, dpi=110)
    plt.close(figure)
    os.replace(temporary, path)
    return True
