"""Smoke test: the whole bench in its tiny ``--quick`` configuration, every measurement, real jobs on loopback."""

from __future__ import annotations

import json
import signal
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smddp_compat.bench.measurements import MEASUREMENTS

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(900)  # one round of every measurement's real jobs, the twin's among them (each code path once)
@pytest.mark.usefixtures("cores_to_itself")
def test_quick_bench_runs_every_measurement_and_writes_its_outputs(tmp_path):
    """Every rank program, launcher and engine of the bench once (a variant that only changes one setting of a job is
    left out of --quick), every measurement's rows, and the outputs."""
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "smddp_compat.bench", "--quick", "--rounds", "1", "--out", str(out), "--budget", "700",
         "--job-timeout", "200"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=850,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    for module in MEASUREMENTS.values():
        assert module.TITLE in proc.stdout, (module.TITLE, output)
    assert "Total bench time" in proc.stdout

    results = json.loads((out / "results.json").read_text())
    assert set(results["measurements"]) == set(MEASUREMENTS)
    assert all(run["ok"] for run in results["runs"]), results["runs"]
    for name, measurement in results["measurements"].items():
        assert measurement["rows"], name
        for row in measurement["rows"]:
            if row["ratio"] is None:  # only a measurement that cannot be taken (MPI moves no socket bytes) says so
                assert "bytes moved: Horovod/MPI" in row["comparison"], (name, row)
                assert row["detail"].startswith("not measured"), (name, row)
                continue
            assert row["ratio"]["count"] > 0, (name, row)
            assert row["ratio"]["median"] > 0, (name, row)

    # Measured facts that must hold whatever the load: fp16 halves what Gloo writes to its sockets, the MLP and the
    # CNN ran on both APIs (on Gloo, the engine --quick times them on), and the raw-Horovod run did not load
    # smddp_compat.
    fp16_rows = {row["comparison"]: row for row in results["measurements"]["fp16"]["rows"]}
    gloo_bytes = next(row for label, row in fp16_rows.items() if "bytes moved: Horovod/Gloo" in label)
    assert 0.45 <= gloo_bytes["ratio"]["median"] <= 0.55, gloo_bytes
    assert set(results["measurements"]["overhead"]["raw"]["gloo"]) >= {"cnn", "mlp"}
    assert results["measurements"]["memory"]["raw"]["compat_loaded_in_raw_run"] is False

    # each trainer of the strategy program trained on 2 hosts (the Horovod-style one as the SMDDP face), and the
    # README's main job ran in the twin (the suite's only run of it there) through SageMaker's phases to its held-out
    # accuracy, the toolkit's wait timed apart (cut in --quick: the faithful 30 s have their own test,
    # test_one_command.py)
    cells = results["measurements"]["strategies"]["raw"]["models"]["mlp"]
    assert {cell["strategy"] for cell in cells if cell.get("samples_per_second", 0) > 0} == {
        "smddp", "mwms", "mwms_fit", "dtensor", "parameter_server"}, cells
    [twin] = [run for run in results["runs"] if run["job"] == "main-job-smddp-local-docker-2-short-waits"]
    marks = twin["marks"]
    assert 0 < marks["toolkit up"] < marks["script invoked"] < marks["test accuracy"] <= twin["duration"], twin
    assert 0 <= marks["toolkit wait ends"] - marks["toolkit wait begins"] < 10, twin

    assert (out / "bandwidth.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "strategies.png").read_bytes()[:8] == PNG_MAGIC
    report = (out / "report.md").read_text()
    assert "| comparison |" in report and results["date"] in report


def test_a_job_that_times_out_is_stopped_and_reported_as_n_a(tmp_path):
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "smddp_compat.bench", "--quick", "--only", "memory", "--job-timeout", "4", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "n/a: timed out after 4 s" in proc.stdout and "some jobs did not run" in proc.stderr
    results = json.loads((out / "results.json").read_text())
    row = results["measurements"]["memory"]["rows"][0]
    assert row["ratio"] is None and row["met"] is None
    assert processes_with_environment(f"BENCH_RESULT_DIR={out}") == []


def processes_with_environment(prefix: str) -> list[int]:
    """PIDs of the processes with an environment entry starting with ``prefix`` (each job's processes get
    ``BENCH_RESULT_DIR=<out>/jobs/<job>/result``)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            entries = environ.read_bytes().split(b"\0")
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if any(entry.startswith(prefix.encode()) for entry in entries):
            found.append(int(environ.parent.name))
    return found


def test_sigterm_stops_the_running_job_and_the_bench(tmp_path):
    """SIGTERM while a job runs: the job's processes are stopped and the bench exits 143 at once, without starting the
    next job (before, the supervisor's stop read as one failed job and the bench went on)."""
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "smddp_compat.bench", "--quick", "--only", "memory,scaling", "--out", str(out)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not processes_with_environment(f"BENCH_RESULT_DIR={out}") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert processes_with_environment(f"BENCH_RESULT_DIR={out}"), "no job started within 120 s"
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    assert "stopped by SIGTERM" in stderr
    assert stdout.count("] round ") == 1, stdout  # no job after the interrupted one
    assert processes_with_environment(f"BENCH_RESULT_DIR={out}") == []
