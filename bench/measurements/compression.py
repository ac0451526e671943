"""4. fp16 compression: time and bytes moved by an allreduce with ``Compression.fp16`` vs. ``Compression.none``.

Bytes moved are what the rank process wrote to its sockets during the call (``wchar`` of ``/proc/self/io``): real
traffic for Gloo (TCP). MPI on one host moves data through shared memory without system calls, and a rank that cannot
read ``/proc/self/io`` counts nothing: both rows say "not measured" and give the payload (the tensor's bytes on the
wire format) beside it, which is computed, not measured.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import engine_label, horovod_engines
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.results import MeasurementResult, Row, RunsByJob, not_measured, ok_runs, pooled_samples
from smddp_compat.bench.stats import paired_ratios, summarise
from smddp_compat.bench.measurements.bandwidth import size_text
from smddp_compat.bench.measurements._collectives_job import collectives_job

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs"]

NAME = "fp16"
TITLE = "4. fp16 compression vs. none"
RANKS = 2


def _jobs(config: BenchConfig) -> dict[str, Job]:
    # Both engines: the time on the default one, the bytes that really move on Gloo's sockets.
    return {engine: collectives_job(config, engine, RANKS, {NAME}) for engine in horovod_engines()}


def jobs(config: BenchConfig) -> list[Job]:
    """The 2-rank collectives job of each engine, with this part."""
    return list(_jobs(config).values())


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """fp16 / none for time and bytes, per size and engine."""
    result = MeasurementResult(NAME, TITLE)
    for engine, job in _jobs(config).items():
        name = engine_label(engine, RANKS)
        ok = ok_runs(runs, job, NAME)
        if not ok:
            result.rows.append(Row(f"fp16 / none time: {name}", None, None, not_measured(runs, job)))
            continue
        result.raw[engine] = {}
        for size, first in ok[0].ranks[0][NAME].items():
            seconds = pooled_samples(ok, (NAME, size, "seconds"), ("none", "fp16"))
            written = pooled_samples(ok, (NAME, size, "bytes_written"), ("none", "fp16"))
            payload = first["payload_bytes"]
            label = f"{size_text(int(size))} fp16 / none"
            result.rows.append(Row(
                f"{label} time: {name}", paired_ratios(seconds["fp16"], seconds["none"]), None,
                f"{summarise(seconds['fp16']).median * 1e3:.0f} ms vs {summarise(seconds['none']).median * 1e3:.0f} ms",
            ))
            payload_text = f"payload {payload['fp16'] / 2**20:.1f} MB vs {payload['none'] / 2**20:.1f} MB"
            moved_none = summarise(written["none"]).median
            if engine != "gloo":
                moved = None
                detail = f"not measured: shared memory moves no socket bytes to count ({payload_text})"
            elif not written["none"] or not written["fp16"]:  # the ranks record nothing they could not read
                moved = None
                detail = f"not measured: /proc/self/io could not be read in the ranks ({payload_text})"
            elif not moved_none > 0:
                moved = None
                detail = f"not measured: no bytes were written to sockets ({payload_text})"
            else:
                moved = paired_ratios(written["fp16"], written["none"])
                detail = (f"{summarise(written['fp16']).median / 2**20:.1f} MB vs {moved_none / 2**20:.1f} MB "
                          "written to sockets per rank")
            result.rows.append(Row(f"{label} bytes moved: {name}", moved, None, detail))
            result.raw[engine][size] = {"seconds": seconds, "bytes_written": written, "payload_bytes": payload}
        result.raw[engine]["runs"] = [run.to_json() for run in runs(job)]
    return result
