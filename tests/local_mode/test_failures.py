"""Failure behaviour of local jobs: one failed process stops the rest within 10 s with its reason; max_run is
enforced; Ctrl-C / SIGTERM stop everything; nothing (process, grandchild, temporary folder) is left behind."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest

from smddp_compat.local_mode import JobFailedError, JobSpec, run

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[2]
STOP_LIMIT_SECONDS = 10.0


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pids_from(tarball: str, prefix: str) -> list[int]:
    with tarfile.open(tarball) as archive:
        pids = []
        for member in archive.getmembers():
            if os.path.basename(member.name).startswith(prefix):
                handle = archive.extractfile(member)
                assert handle is not None
                pids.append(int(handle.read()))
        return pids


def test_one_failed_process_stops_the_others_and_reports_its_reason(
    tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None
) -> None:
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(scripts_dir),
        instance_count=2,
        distribution="mpi",
        hyperparameters={"fail-index": 1, "delay": 1.5, "sleep": 120, "spawn-child": 1},
        output_path=str(tmp_path / "out"),
        job_name="fails",
        max_run=120,
    )
    stream = io.StringIO()
    started = time.monotonic()
    result = run(spec, stream=stream)
    elapsed = time.monotonic() - started
    output = stream.getvalue()

    assert result.status == "Failed" and not result.ok
    assert result.exit_code == 3
    assert result.failed_label == "algo-2,1"
    assert "algo-2" in result.failure_reason and "ValueError: the loss became NaN at step 7" in result.failure_reason
    assert f"failure reason: {result.failure_reason}" in output  # printed in the summary
    assert elapsed < 1.5 + STOP_LIMIT_SECONDS, f"the job took {elapsed:.1f} s to stop"
    survivor = next(p for p in result.processes if p.spec.label == "algo-1,0")
    assert survivor.returncode is not None and survivor.returncode < 0  # stopped by a signal, not finished
    # A failed job's model folders and output data are stored too, as SageMaker stores them (for diagnosis).
    assert result.artifacts.model == str(tmp_path / "out" / "fails" / "output" / "model.tar.gz")
    pids = _pids_from(result.artifacts.output, "pid-") + _pids_from(result.artifacts.output, "child-")
    assert len(pids) == 4
    assert not [pid for pid in pids if _alive(pid)], "a process or grandchild survived the job"
    with pytest.raises(JobFailedError) as caught:
        result.raise_for_status()
    assert caught.value.label == "algo-2,1" and caught.value.exit_code == 3 and caught.value.status == "Failed"


def test_failure_without_a_failure_file_names_the_process_and_exit_code(
    tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None
) -> None:
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(scripts_dir),
        instance_count=1,
        processes_per_host=2,
        distribution="dtensor",
        hyperparameters={"fail-index": 0, "delay": 0.5, "write-failure": 0},
        output_path=str(tmp_path / "out"),
        max_run=120,
    )
    result = run(spec, stream=io.StringIO())
    assert result.status == "Failed" and result.exit_code == 3
    assert result.failure_reason is not None
    assert "[algo-1,0]" in result.failure_reason and "exited with code 3" in result.failure_reason


def test_max_run_is_enforced(tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None) -> None:
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(scripts_dir),
        instance_count=2,
        hyperparameters={"sleep": 120},
        output_path=str(tmp_path / "out"),
        max_run=2,
    )
    stream = io.StringIO()
    started = time.monotonic()
    result = run(spec, stream=stream)
    elapsed = time.monotonic() - started
    assert result.status == "Stopped" and result.exit_code == 124
    assert result.failure_reason is not None and result.failure_reason.startswith("MaxRuntimeExceeded")
    assert result.secondary_status == "MaxRuntimeExceeded"
    assert "max_run=2 s" in result.failure_reason
    assert 2 <= elapsed < 2 + STOP_LIMIT_SECONDS
    # A stopped job still gets its artifacts, as on SageMaker.
    assert result.artifacts.model is not None and Path(result.artifacts.model).is_file()
    assert not [pid for pid in _pids_from(result.artifacts.output, "pid-") if _alive(pid)]


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"])
def test_a_signal_to_smddp_local_stops_every_process(
    tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None, signum: int, exit_code: int
) -> None:
    work = tmp_path / "work"
    command = [
        sys.executable, "-c", "import sys; from smddp_compat.commands.local_cli import main; sys.exit(main(sys.argv[1:]))",
        "fail_or_sleep.py", "--source-dir", str(scripts_dir), "--instance-count", "2",
        "--hyperparameters", "sleep=120", "spawn-child=1",
        "--output", str(tmp_path / "out"), "--work-dir", str(work), "--job-name", "interrupted",
    ]
    cli = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pid_files = [work / "interrupted" / f"algo-{n}" / "output" / "data" / f"{kind}-{n - 1}" for n in (1, 2) for kind in ("pid", "child")]
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text() for p in pid_files):
            assert time.monotonic() < deadline, "the processes did not start"
            assert cli.poll() is None, cli.stdout.read() if cli.stdout else ""
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in pid_files]
        sent = time.monotonic()
        cli.send_signal(signum)
        output, _ = cli.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(timeout=10)
    assert cli.returncode == exit_code, output
    assert stopped_in < STOP_LIMIT_SECONDS
    assert f"interrupted by {signal.Signals(signum).name}" in output
    assert "local job interrupted: Stopped" in output
    assert not [pid for pid in pids if _alive(pid)], "a process survived the interruption"


@pytest.mark.parametrize("engine", ["gloo", "mpi"])
def test_one_host_job_is_supervised_alike_on_both_engines(
    tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    from smddp_compat.launcher._mpi_group import mpirun_unavailable_reason

    if engine == "mpi" and mpirun_unavailable_reason():
        pytest.skip(str(mpirun_unavailable_reason()))
    monkeypatch.setenv("SMDDP_ENGINE", engine)
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(scripts_dir),
        instance_count=1,
        processes_per_host=2,
        distribution="smddp",
        hyperparameters={"fail-index": 1, "delay": 1.5, "sleep": 120, "spawn-child": 1},
        output_path=str(tmp_path / "out"),
        job_name=f"fails-{engine}",
        max_run=120,
    )
    stream = io.StringIO()
    started = time.monotonic()
    result = run(spec, stream=stream)
    elapsed = time.monotonic() - started
    output = stream.getvalue()
    assert f"[local_mode] engine {engine} (" in output
    assert all(f"[algo-1,{rank}] process {rank} started" in output for rank in range(2)), output
    assert result.status == "Failed" and result.exit_code == 3
    assert result.failed_label == "algo-1,1"
    assert result.failure_reason.startswith("process [algo-1,1] on host algo-1 exited with code 3: ValueError: the loss")
    assert elapsed < 1.5 + STOP_LIMIT_SECONDS, f"the job took {elapsed:.1f} s to stop"
    log = (tmp_path / "out" / f"fails-{engine}" / "logs" / "algo-1.log").read_text()
    assert "process 1 started" in log
    pids = _pids_from(result.artifacts.output, "pid-") + _pids_from(result.artifacts.output, "child-")
    assert len(pids) == 4
    assert not [pid for pid in pids if _alive(pid)], "a process or grandchild survived the job"
