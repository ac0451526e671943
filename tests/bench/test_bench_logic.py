"""The bench's host-side logic without running jobs: merging, scheduling, statistics, options, goals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import default_engine, engine_launcher
from smddp_compat.bench.jobs import MAIN_JOB, Job, JobRun, Launcher, merge_jobs
from smddp_compat.bench._report import format_markdown, format_table
from smddp_compat.bench.results import Goal, MeasurementResult, Row, Verdict
from smddp_compat.bench.stats import MIN_SAMPLES_FOR_SPREAD, paired_ratios, summarise
from smddp_compat.bench.measurements import MEASUREMENTS
from smddp_compat.bench.run import _schedule, main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.processes
def test_importing_bench_does_not_import_tensorflow():
    code = "import sys, smddp_compat.bench, smddp_compat.bench.run; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def test_jobs_with_the_same_key_merge_their_parts():
    a = Job("collectives.py", Launcher.SMDDPRUN_GLOO, 2, ("--x", "1"), parts=frozenset({"bandwidth"}))
    b = Job("collectives.py", Launcher.SMDDPRUN_GLOO, 2, ("--x", "1"), parts=frozenset({"fp16"}), repeat=True)
    c = Job("collectives.py", Launcher.SMDDPRUN_MPI, 2, ("--x", "1"), parts=frozenset({"fp16"}))
    merged = merge_jobs([a, b, c])
    assert [job.launcher for job in merged] == [Launcher.SMDDPRUN_GLOO, Launcher.SMDDPRUN_MPI]
    assert merged[0].parts == {"bandwidth", "fp16"} and merged[0].repeat
    assert merged[0].program_argv() == ["--x", "1", "--parts", "bandwidth,fp16"]


def test_schedule_repeats_compared_jobs_in_reversed_order():
    once = Job("overhead.py", Launcher.SMDDPRUN_GLOO, 2)
    a = Job("train.py", Launcher.LOCAL_MODE, 2, repeat=True)
    b = Job("train.py", Launcher.HOROVODRUN, 2, repeat=True)
    schedule = _schedule([once, a, b], rounds=3)
    assert schedule == [(0, once), (0, a), (0, b), (1, b), (1, a), (2, a), (2, b)]


def test_every_measurement_asks_for_jobs_in_full_and_quick_mode(tmp_path):
    for quick in (False, True):
        config = BenchConfig(out_dir=tmp_path, measurements=tuple(MEASUREMENTS), quick=quick)
        jobs = merge_jobs(job for module in MEASUREMENTS.values() for job in module.jobs(config))
        programs = {job.program for job in jobs}
        assert programs == {"overhead.py", "collectives.py", "mwms_allreduce.py", "train.py", "allreduce_profile.py",
                            "strategies.py", MAIN_JOB}
        launchers = {job.launcher for job in jobs}
        assert {Launcher.MWMS, Launcher.LOCAL_MODE, Launcher.HOROVODRUN, Launcher.TWIN} <= launchers
    # the default engine's 2-rank collectives job serves bandwidth, small tensors and fp16 at once, and repeats
    # only the bandwidth sweep (the engine comparison) in later rounds
    default = engine_launcher(default_engine(2))
    shared = [job for job in jobs if job.program == "collectives.py" and job.ranks == 2 and job.launcher == default]
    assert len(shared) == 1 and shared[0].parts == {"bandwidth", "small_tensors", "fp16"}, shared
    assert shared[0].for_round(1).parts == {"bandwidth"}


def test_statistics_median_spread_and_pairs():
    summary = summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (summary.median, summary.low, summary.high, summary.count) == (3.0, 2.0, 4.0, 5)
    assert summary.text() == "3.00 [2.00-4.00]"
    assert summarise([]).count == 0 and summarise([]).text() == "n/a"
    ratio = paired_ratios([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert ratio.median == pytest.approx(2.0) and ratio.high == pytest.approx(2.0)


def test_too_few_samples_give_no_interquartile_range():
    assert summarise([0.99, 1.1]).text() == "1.04 (too few samples for an IQR)"
    assert summarise([1.0] * (MIN_SAMPLES_FOR_SPREAD - 1)).has_spread is False
    assert summarise([1.0] * MIN_SAMPLES_FOR_SPREAD).has_spread is True
    row = Row("x", summarise([0.5, 0.6]), Goal("<=", 1.02))
    assert row.verdict is Verdict.TOO_FEW_SAMPLES and row.met is None


def test_goals_are_met_only_when_the_whole_interquartile_range_is_on_their_side():
    spread = [0.76, 0.8, 0.96, 1.1, 1.27]  # median 0.96 under the goal, IQR 0.80-1.10 across it
    assert Goal("<=", 1.02).judge(summarise(spread)) is Verdict.UNRESOLVED
    assert Row("x", summarise(spread), Goal("<=", 1.02)).met is None
    assert Goal("<=", 1.2).judge(summarise(spread)) is Verdict.MET
    assert Goal("<=", 0.7).judge(summarise(spread)) is Verdict.NOT_MET
    assert Goal(">=", 0.5).judge(summarise([0.5, 0.55, 0.6, 0.7, 0.8])) is Verdict.MET
    assert Goal(">=", 0.5).judge(summarise([0.05, 0.06, 0.07, 0.08, 0.09])) is Verdict.NOT_MET
    assert Row("x", summarise([1.5, 1.6, 1.7, 1.8, 1.9]), Goal("<=", 1.1)).met is False
    assert Row("x", None, Goal("<=", 1.1)).verdict is Verdict.NOT_MEASURED
    assert Row("x", None, Goal("<=", 1.1)).met is None and Row("x", None).verdict is None


def test_the_report_shows_each_verdict_and_the_rules():
    result = MeasurementResult("m", "1. title", rows=[
        Row("spans", summarise([0.76, 0.8, 0.96, 1.1, 1.27]), Goal("<=", 1.02)),
        Row("few", summarise([0.99, 1.0]), Goal("<=", 1.02)),
        Row("none", None, Goal("<=", 1.02), "not measured: /proc/self/io could not be read"),
        Row("met", summarise([0.9] * 5), Goal("<=", 1.02)),
    ])
    markdown = format_markdown([result], {"cores": 2}, "today", 60.0, "smddp bench")
    assert "| spans | 0.96 [0.80-1.10] | 5 | <= 1.02 | unresolved |" in markdown
    assert "| few | 0.99 (too few samples for an IQR) | 2 | <= 1.02 | too few samples |" in markdown
    assert "| none | not measured | 0 | <= 1.02 | not measured | not measured: /proc/self/io" in markdown
    assert "| met | 0.90 [0.90-0.90] | 5 | <= 1.02 | yes |" in markdown
    assert "- unresolved: the IQR spans the goal: spans = 0.96 [0.80-1.10] (goal <= 1.02)" in markdown
    assert "A goal is met only when its whole IQR is on the goal's side" in markdown
    assert "unresolved" in format_table([result]) and "whole IQR" in format_table([result])


def _collectives_run(job, ranks):
    return JobRun(job=job, round=0, ok=True, reason="", started=0.0, duration=1.0, ranks=ranks, log_path="")


def test_fp16_bytes_are_not_measured_when_proc_self_io_was_unreadable(tmp_path):
    from smddp_compat.bench.measurements import compression

    config = BenchConfig(out_dir=tmp_path, measurements=("fp16",), quick=True)
    part = {str(2**20): {"seconds": {"none": [0.01] * 5, "fp16": [0.02] * 5},
                         "bytes_written": {"none": [], "fp16": []},  # what a rank records when it cannot read it
                         "payload_bytes": {"none": 2**20, "fp16": 2**19}}}
    result = compression.summarise_runs(config, lambda job: [_collectives_run(job, [{"fp16": part}] * 2)])
    moved = {row.comparison.split(": ", 1)[1].split(" ")[0]: row for row in result.rows if "bytes moved" in row.comparison}
    assert moved["Horovod/Gloo"].ratio is None
    assert moved["Horovod/Gloo"].detail.startswith("not measured: /proc/self/io could not be read")
    if "Horovod/MPI" in moved:
        assert moved["Horovod/MPI"].ratio is None and moved["Horovod/MPI"].detail.startswith("not measured: shared memory")


def test_the_eager_reference_is_paired_with_grouped_calls_timed_beside_it(tmp_path):
    from smddp_compat.bench.measurements import small_tensors

    config = BenchConfig(out_dir=tmp_path, measurements=("small_tensors",), quick=True)
    (job,) = small_tensors.jobs(config)
    part = {"count": 4, "total_bytes": 4096, "seconds": {
        "per_tensor_function": [1.0] * 6, "grouped": [1.0] * 6,
        "per_tensor_eager": [8.0, 9.0, 10.0], "grouped_beside_eager": [2.0, 3.0, 2.5]}}
    result = small_tensors.summarise_runs(config, lambda _: [_collectives_run(job, [{"small_tensors": part}] * 2)])
    eager = next(row for row in result.rows if "eager" in row.comparison)
    assert eager.ratio.count == 6 and eager.ratio.median == pytest.approx(4.0)  # 8/2, 9/3, 10/2.5 on each rank
    assert eager.detail == "9000 ms vs 2500 ms (reference)"


@pytest.mark.parametrize(
    "argv, named",
    [(["--only", "bandwidth,nope"], "'nope'"), (["--rounds", "0"], "--rounds"), (["--budget", "-5"], "--budget")],
)
def test_bad_options_exit_2_naming_the_value(capsys, argv, named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "error" in err
