"""The bench's outputs: the table of ratios (text and Markdown) and results.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from smddp_compat.bench.results import MeasurementResult, Row, Verdict
from smddp_compat.bench.stats import MIN_SAMPLES_FOR_SPREAD

__all__ = ["format_table", "format_markdown", "results_json", "strategy_markdown"]

_HEADERS = ("comparison", "ratio median [IQR]", "n", "goal", "met", "figures")

_VERDICT_CELLS = {
    Verdict.MET: "yes",
    Verdict.NOT_MET: "NO",
    Verdict.UNRESOLVED: "unresolved",
    Verdict.TOO_FEW_SAMPLES: "too few samples",
    Verdict.NOT_MEASURED: "not measured",
}

RULES = (
    "Ratios of variants timed in turns in one run (absolute figures vary with the machine's load; the ratios "
    "hold). Ratio: median with the interquartile range (IQR); n: number of paired samples; below "
    f"{MIN_SAMPLES_FOR_SPREAD} samples no IQR is given. A goal is met only when its whole IQR is on the goal's "
    "side, not met when the whole IQR is on the other side, unresolved when the IQR spans it. A figure that could "
    "not be taken reads \"not measured\"."
)


def _met(row: Row) -> str:
    return _VERDICT_CELLS[row.verdict] if row.verdict is not None else ""


def _cells(row: Row) -> tuple[str, ...]:
    ratio = row.ratio.text() if row.ratio is not None and row.ratio.count else "not measured"
    count = str(row.ratio.count) if row.ratio is not None else "0"
    return (row.comparison, ratio, count, row.goal.text() if row.goal else "", _met(row), row.detail)


def format_table(results: Sequence[MeasurementResult]) -> str:
    """The plain-text table: one section per measurement, then its notes."""
    lines: list[str] = []
    rows = [_cells(row) for result in results for row in result.rows]
    widths = [max([len(h)] + [len(cells[i]) for cells in rows]) for i, h in enumerate(_HEADERS[:-1])]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + "  " + cells[-1]

    lines.append(line(_HEADERS))
    lines.append("-" * (sum(widths) + 2 * len(widths) + len(_HEADERS[-1])))
    for result in results:
        lines.append(result.title)
        lines.extend("  " + line(_cells(row)) for row in result.rows)
        lines.extend(f"  note: {note}" for note in result.notes)
    lines.append(RULES)
    return "\n".join(lines)


def format_markdown(results: Sequence[MeasurementResult], machine: dict[str, Any], date: str,
                    duration: float, command: str) -> str:
    """The Markdown report (table, machine, date) that README's bench section carries."""
    out = [
        f"# Bench results ({date})",
        "",
        f"Command: `{command}`, total run time {duration / 60:.1f} min.",
        "",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in machine.items()),
        "",
        RULES,
        "",
        "| " + " | ".join(_HEADERS) + " |",
        "|" + "---|" * len(_HEADERS),
    ]
    for result in results:
        out.append(f"| **{result.title}** |" + " |" * (len(_HEADERS) - 1))
        for row in result.rows:
            out.append("| " + " | ".join(cell.replace("|", "/") for cell in _cells(row)) + " |")
    notes = [note for result in results for note in result.notes]
    if notes:
        out += [""] + [f"- {note}" for note in notes]
    goals = [row for result in results for row in result.rows if row.goal is not None]
    if goals:
        out += ["", "Goals:"]
        for row in goals:
            assert row.verdict is not None
            value = row.ratio.text() if row.ratio is not None and row.ratio.count else "not measured"
            status = "NOT met" if row.verdict is Verdict.NOT_MET else row.verdict.value
            out.append(f"- {status}: {row.comparison} = {value} (goal {row.goal.text()})")
    return "\n".join(out) + "\n"


def strategy_markdown(strategies_raw: dict[str, Any]) -> str:
    """The strategy comparison as one Markdown table per model (the strategies measurement's raw numbers)."""
    target = strategies_raw.get("target_accuracy", 0.0)
    headers = ("strategy", "Keras", "engine (its default here)", "samples/s / fastest [IQR]", "samples/s",
               f"s to {target:.2f} held-out", "first step after launch (s)", "peak RSS / process (MiB)",
               "final accuracy")
    out: list[str] = []
    for model, table in strategies_raw.get("models", {}).items():
        out += [f"**{model.upper()}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        for cell in table:
            first = [cell["label"], cell["keras"], cell["engine"]]
            if "why_not" in cell or "failed" in cell:
                why = f"cannot run: {cell['why_not']}" if "why_not" in cell else f"n/a: {cell['failed']}"
                out.append("| " + " | ".join([*first, why.replace("|", "/")] + [""] * (len(headers) - 4)) + " |")
                continue
            ratio = cell["ratio"]
            reached = (f"{cell['seconds_to_target']:.1f}" if cell["reached_target"] == cell["runs"] else
                       f"not reached in {cell['runs'] - cell['reached_target']} of {cell['runs']} runs")
            out.append("| " + " | ".join([
                *first, f"{ratio['median']:.2f} [{ratio['low']:.2f}-{ratio['high']:.2f}]",
                f"{cell['samples_per_second']:.0f}", reached, f"{cell['first_step_seconds']:.1f}",
                f"{cell['peak_rss_mib']:.0f}", f"{cell['final_accuracy']:.3f}",
            ]) + " |")
        out.append("")
    return "\n".join(out)


def results_json(results: Sequence[MeasurementResult], machine: dict[str, Any], date: str, duration: float,
                 runs: list[dict[str, Any]]) -> str:
    """results.json: the machine, every row and every raw number."""
    payload = {
        "date": date,
        "duration_seconds": round(duration, 1),
        "machine": machine,
        "measurements": {
            result.name: {"title": result.title, "rows": [row.to_json() for row in result.rows],
                          "notes": result.notes, "raw": result.raw}
            for result in results
        },
        "runs": runs,
    }
    return json.dumps(payload, indent=1, default=float)

