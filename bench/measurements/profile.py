"""8. Where a 64 MB allreduce spends its time on the default 2-rank engine (Horovod over MPI), and one tuning.

The parts of the path (``bench/programs/allreduce_profile.py``) are timed in turns with the whole Horovod allreduce
in one job; each row is a part's time over the whole's, so the rows show which part is the largest. The job runs
with the kit's settings (MPI ranks get Open MPI's segmented ring from 4 MB, and large buffers on transparent huge
pages, ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``: a fresh 64 MB output tensor faults in 2 MB pages instead of 4 KB
ones) and, alternating round by round, without huge pages (``hugetlb=0``): the before/after of that tuning. (The
bandwidth measurement compares every other setting side by side.) ``MPI_Allreduce`` alone (mpi4py) runs in a job of
its own without Horovod, since beside Horovod's background thread it would measure their contention; it is shown as
its fraction of the copy's bandwidth, beside the Horovod allreduce's.
"""

from __future__ import annotations

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import engine_launcher, mpi_unavailable_reason
from smddp_compat.bench.jobs import Job
from smddp_compat.bench.results import MeasurementResult, Row, RunsByJob, not_measured, ok_runs, pooled_samples
from smddp_compat.bench.stats import paired_ratios, summarise
from smddp_compat.bench.measurements.bandwidth import size_text

__all__ = ["NAME", "TITLE", "jobs", "summarise_runs", "NO_HUGE_PAGES"]

NAME = "profile"
TITLE = "8. Where a 64 MB allreduce spends its time: Horovod/MPI, 2 ranks (part / whole Horovod allreduce)"
RANKS = 2
#: The settings compared with the kit's: no huge pages (the kit's MPI ranks have them).
NO_HUGE_PAGES = (("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0"),)
_PARTS = {
    "output_alloc": "allocating and first touching the output",
    "copy": "one copy of the tensor (Horovod's input-to-output copy)",
    "add": "the reduction's arithmetic (a + b)",
}


def _job(config: BenchConfig, env: tuple[tuple[str, str], ...] = (), mpi_alone: bool = False) -> Job:
    size, reps = (1 << 20, "3") if config.quick else (64 << 20, "6")
    variant = "mpi-alone" if mpi_alone else "no-huge-pages" if env else "kit-settings"
    return Job("allreduce_profile.py", engine_launcher("mpi"), RANKS,
               ("--size", str(size), "--reps", reps, "--variant", variant, *(("--mpi-alone",) if mpi_alone else ())),
               env, repeat=True)


def jobs(config: BenchConfig) -> list[Job]:
    """The profile job with the kit's settings, without huge pages (not in ``--quick``: the same job with one variable
    changed), and MPI alone (none without mpirun)."""
    if mpi_unavailable_reason():
        return []
    return [_job(config), *(() if config.quick else (_job(config, NO_HUGE_PAGES),)), _job(config, mpi_alone=True)]


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Each part over the whole, the whole against a copy, and huge pages against the defaults."""
    result = MeasurementResult(NAME, TITLE)
    if mpi_unavailable_reason():
        result.rows.append(Row("profile of Horovod/MPI", None, None, f"n/a: {mpi_unavailable_reason()}"))
        return result
    base_runs = ok_runs(runs, _job(config))
    before_runs = ok_runs(runs, _job(config, NO_HUGE_PAGES))
    if not base_runs:
        result.rows.append(Row("profile of Horovod/MPI", None, None, not_measured(runs, _job(config))))
        return result
    nbytes = int(base_runs[0].ranks[0]["bytes"])
    pooled = pooled_samples(base_runs, ("seconds",))
    whole_ms = summarise(pooled["horovod"]).median * 1e3
    for part, label in _PARTS.items():
        result.rows.append(Row(
            f"{size_text(nbytes)}: {label} / Horovod allreduce", paired_ratios(pooled[part], pooled["horovod"]),
            None, f"{summarise(pooled[part]).median * 1e3:.1f} ms vs {whole_ms:.1f} ms",
        ))
    horovod_fraction = paired_ratios(pooled["copy"], pooled["horovod"])
    result.rows.append(Row(f"{size_text(nbytes)}: copy bandwidth fraction, Horovod allreduce", horovod_fraction, None,
                           "copy time / allreduce time, timed in turns"))
    alone_runs = ok_runs(runs, _job(config, mpi_alone=True))
    if alone_runs:
        alone = pooled_samples(alone_runs, ("seconds",))
        result.rows.append(Row(
            f"{size_text(nbytes)}: copy bandwidth fraction, MPI_Allreduce alone (mpi4py, a job without Horovod)",
            paired_ratios(alone["copy"], alone["mpi"]), None,
            f"{summarise(alone['mpi']).median * 1e3:.1f} ms per call; the Horovod allreduce's fraction: "
            f"{horovod_fraction.median:.2f}",
        ))
    result.raw = {"bytes": nbytes, "default": pooled, "runs": [run.to_json() for run in runs(_job(config))]}
    if alone_runs:
        result.raw["mpi_alone"] = alone
    if before_runs:
        before = pooled_samples(before_runs, ("seconds",))
        rounds = sorted({run.round for run in base_runs} & {run.round for run in before_runs})
        per_round = [
            summarise(pooled_samples([r for r in base_runs if r.round == n], ("seconds",))["horovod"]).median
            / summarise(pooled_samples([r for r in before_runs if r.round == n], ("seconds",))["horovod"]).median
            for n in rounds
        ]
        result.rows.append(Row(
            f"{size_text(nbytes)} Horovod allreduce time, with huge pages (kit) / without (hugetlb=0)",
            summarise(per_round), None,
            f"{whole_ms:.1f} ms vs {summarise(before['horovod']).median * 1e3:.1f} ms; copy fraction "
            f"{paired_ratios(pooled['copy'], pooled['horovod']).median:.2f} vs "
            f"{paired_ratios(before['copy'], before['horovod']).median:.2f}",
        ))
        result.raw["no_huge_pages"] = before
    return result
