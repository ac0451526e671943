"""``smddp bench`` says where it is: each job's line gives its number, the time spent and an estimate of the time left
(from the jobs run so far, a job's own earlier round first, never beyond the budget)."""

from __future__ import annotations

import io
import re

import pytest

from smddp_compat.bench import run as bench_run
from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import Job, JobRun, Launcher
from smddp_compat.bench.run import estimate_left, format_duration, run_jobs

LINE = re.compile(r"^\[(\d+)/(\d+)\] round (\d+): (\S+) \(elapsed (\S+), (~(\S+) left|at most (\S+) left: the budget)\)"
                  r" \.\.\. ([\d.]+) s ok$")


def test_durations_read_as_people_read_them() -> None:
    assert [format_duration(s) for s in (0, 44.6, 60, 130, 3599, 3600, 3900)] == [
        "0s", "45s", "1m00s", "2m10s", "59m59s", "1h00m", "1h05m"]


def test_the_estimate_uses_a_jobs_earlier_round_then_the_mean_and_stops_at_the_budget() -> None:
    a = Job("train.py", Launcher.LOCAL_MODE, 2, repeat=True)
    b = Job("train.py", Launcher.HOROVODRUN, 2, repeat=True)
    c = Job("overhead.py", Launcher.SMDDPRUN_GLOO, 2)
    assert estimate_left([a, b], {}, 600.0) is None  # nothing ran yet: the line states the budget instead
    assert estimate_left([c, a, b], {a.key: 10.0, b.key: 30.0}, 600.0) == pytest.approx(20.0 + 10.0 + 30.0)
    assert estimate_left([c, a, b], {a.key: 10.0, b.key: 30.0}, 45.0) == 45.0


def test_each_job_line_counts_the_jobs_the_time_spent_and_the_time_left(tmp_path, monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(bench_run.time, "time", lambda: clock[0])
    taken = {"overhead.py": 30.0, "train.py": 90.0}

    def fake_run_job(job: Job, config: BenchConfig, round_index: int, timeout: float) -> JobRun:
        clock[0] += taken[job.program]
        return JobRun(job, round_index, True, "", clock[0], taken[job.program], [], "")

    monkeypatch.setattr(bench_run, "run_job", fake_run_job)
    jobs = [Job("overhead.py", Launcher.SMDDPRUN_GLOO, 2), Job("train.py", Launcher.LOCAL_MODE, 2, repeat=True)]
    config = BenchConfig(out_dir=tmp_path, measurements=("overhead",), rounds=2, budget=3000.0)
    out = io.StringIO()
    runs = run_jobs(config, jobs, clock[0] + config.budget, out)
    lines = out.getvalue().splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(m[1], m[2], m[3]) for m in parsed] == [("1", "3", "1"), ("2", "3", "1"), ("3", "3", "2")]
    assert [m[5] for m in parsed] == ["0s", "30s", "2m00s"]
    assert parsed[0][8] == "50m00s"  # before any job ran: the budget
    assert parsed[1][7] == "1m00s"   # the mean so far (30 s) for each of the 2 jobs left, then...
    assert parsed[2][7] == "1m30s"   # ...the train job's own first round
    assert sum(len(r) for r in runs.values()) == 3
