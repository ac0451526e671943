"""The bench's host-side logic without running jobs: merging, scheduling, statistics, options, goals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench._config import BenchConfig
from bench._engines import default_engine, engine_launcher
from bench._jobs import Job, Launcher, merge_jobs
from bench._results import Goal, Row
from bench._statistics import paired_ratios, summarise
from bench.measurements import MEASUREMENTS
from bench.run import _schedule, main

REPO = Path(__file__).resolve().parents[2]


def test_importing_bench_does_not_import_tensorflow():
    code = "import sys, bench, bench.run; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
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
        assert programs == {"overhead.py", "collectives.py", "mwms_allreduce.py", "train.py", "allreduce_profile.py"}
        launchers = {job.launcher for job in jobs}
        assert {Launcher.MWMS, Launcher.LOCAL_MODE, Launcher.HOROVODRUN} <= launchers
    # the default engine's 2-rank collectives job serves bandwidth, small tensors and fp16 at once, and repeats
    # only the bandwidth sweep (the engine comparison) in later rounds
    default = engine_launcher(default_engine(2))
    shared = [job for job in jobs if job.program == "collectives.py" and job.ranks == 2 and job.launcher == default]
    assert len(shared) == 1 and shared[0].parts == {"bandwidth", "small_tensors", "fp16"}, shared
    assert shared[0].for_round(1).parts == {"bandwidth"}


def test_statistics_median_spread_and_pairs():
    summary = summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (summary.median, summary.low, summary.high, summary.count) == (3.0, 2.0, 4.0, 5)
    assert summarise([]).count == 0 and summarise([]).text() == "n/a"
    ratio = paired_ratios([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert ratio.median == pytest.approx(2.0) and ratio.high == pytest.approx(2.0)


def test_goals_are_checked_against_the_median():
    assert Goal("<=", 1.02).met(1.01) and not Goal("<=", 1.02).met(1.03)
    assert Goal(">=", 0.5).met(0.5) and Goal(">=", 0.5).met(float("nan")) is None
    assert Row("x", summarise([1.5, 1.6, 1.7]), Goal("<=", 1.1)).met is False
    assert Row("x", None, Goal("<=", 1.1)).met is None


@pytest.mark.parametrize(
    "argv, named",
    [(["--only", "bandwidth,nope"], "'nope'"), (["--rounds", "0"], "--rounds"), (["--budget", "-5"], "--budget")],
)
def test_bad_options_exit_2_naming_the_value(capsys, argv, named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "error" in err
