"""The PNG charts: allreduce bandwidth vs. message size per engine (one panel per rank count), and the strategy
comparison."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smddp_compat.bench.engines import ENGINE_NAMES

__all__ = ["write_bandwidth_chart", "write_strategy_chart"]


def _save(figure: Any, path: Path, *, dpi: int) -> None:
    """Writes ``figure`` to ``path`` through a temporary file in the same folder, and closes it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    figure.savefig(temporary, dpi=dpi)
    plt.close(figure)
    os.replace(temporary, path)


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
    _save(figure, path, dpi=110)
    return True


def write_strategy_chart(strategies_raw: dict[str, Any], path: Path) -> bool:
    """Draws the strategy comparison (samples/s vs. the fastest with its IQR, and seconds to the target accuracy;
    one row of panels per model) into ``path`` (written atomically).

    Returns:
        False when no strategy was measured.
    """
    models = {model: [cell for cell in table if "ratio" in cell]
              for model, table in strategies_raw.get("models", {}).items()}
    models = {model: measured for model, measured in models.items() if measured}
    if not models:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tallest = max(len(measured) for measured in models.values())
    figure, axes = plt.subplots(len(models), 2, figsize=(13, 1.2 + 0.45 * tallest * len(models)), squeeze=False)
    for (model, measured), (speed_axis, target_axis) in zip(models.items(), axes):
        labels = [f"{cell['label'].split(' (')[0]}, {cell['keras']}" for cell in measured]
        positions = list(range(len(measured)))
        medians = [cell["ratio"]["median"] for cell in measured]
        errors = [[cell["ratio"]["median"] - cell["ratio"]["low"] for cell in measured],
                  [cell["ratio"]["high"] - cell["ratio"]["median"] for cell in measured]]
        speed_axis.barh(positions, medians, xerr=errors, color="tab:blue", capsize=3)
        speed_axis.set_yticks(positions, labels, fontsize=8)
        speed_axis.invert_yaxis()
        speed_axis.axvline(1.0, color="black", linewidth=0.8)
        speed_axis.set_xlabel("samples/s / fastest (median, IQR)")
        speed_axis.set_title(f"{model.upper()}: throughput, 2 hosts x 1 process")
        seconds = [cell["seconds_to_target"] or 0.0 for cell in measured]
        target_axis.barh(positions, seconds, color="tab:green")
        target_axis.set_yticks(positions, [""] * len(positions))
        target_axis.invert_yaxis()
        target_axis.set_xlabel(f"training seconds to {strategies_raw.get('target_accuracy', 0):.2f} held-out "
                               "accuracy (0: not reached)")
        target_axis.set_title(f"{model.upper()}: time to target")
    _save(figure, path, dpi=100)
    return True
