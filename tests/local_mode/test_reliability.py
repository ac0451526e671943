"""Reliability and hygiene of local jobs: kill -9 of a process, many jobs in a row leave nothing behind, secrets
stay out of files, the code copy leaves secrets out, shared checkpoints, shell entry points."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from smddp_compat.local_mode import JobSpec, run

pytestmark = pytest.mark.processes

STOP_LIMIT_SECONDS = 10.0


def _wait_for(path: Path, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.05)
    return int(path.read_text())


def test_kill_9_of_one_process_ends_the_job_and_names_it(tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None) -> None:
    work = tmp_path / "work"
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(scripts_dir),
        instance_count=2,
        distribution="smddp",
        hyperparameters={"sleep": 120},
        output_path=str(tmp_path / "out"),
        work_dir=str(work),
        job_name="killed",
        max_run=120,
    )
    killed_at: list[float] = []

    def kill_rank_1() -> None:
        pid = _wait_for(work / "killed" / "algo-2" / "output" / "data" / "pid-1")
        _wait_for(work / "killed" / "algo-1" / "output" / "data" / "pid-0")
        killed_at.append(time.monotonic())
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_rank_1, daemon=True)
    killer.start()
    result = run(spec, stream=io.StringIO())
    ended_at = time.monotonic()
    killer.join(timeout=5)
    assert killed_at, "the killer thread did not kill"
    assert ended_at - killed_at[0] < STOP_LIMIT_SECONDS
    assert result.status == "Failed" and result.failed_label == "algo-2,1"
    assert result.exit_code == 128 + signal.SIGKILL
    assert "[algo-2,1] on host algo-2 was killed by signal SIGKILL" in (result.failure_reason or "")
    pid_0 = int((work / "killed" / "algo-1" / "output" / "data" / "pid-0").read_text())
    assert not psutil.pid_exists(pid_0) or psutil.Process(pid_0).status() == psutil.STATUS_ZOMBIE


def test_secrets_stay_out_of_config_files_logs_and_the_code_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leftover_job_dirs: None
) -> None:
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID0000")
    source = tmp_path / "src"
    (source / ".git").mkdir(parents=True)
    (source / ".git" / "config").write_text("[core]\n")
    (source / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={secret}\n")
    (source / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    for name in (".netrc", "id_rsa", "x.key"):  # the upload's exclusions apply to the local copy too
        (source / name).write_text(f"machine example.com password {secret}\n")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    (source / "pkg").mkdir()
    (source / "pkg" / "helper.py").write_text("VALUE = 1\n")
    (source / "train.py").write_text(
        "import os, sys\nfrom pkg.helper import VALUE\nprint('value', VALUE, 'args', sys.argv[1:])\n"
        "assert 'AWS_SECRET_ACCESS_KEY' in os.environ  # the job itself may use the credentials\n"
    )
    spec = JobSpec(
        entry_point="train.py",
        source_dir=str(source),
        instance_count=2,
        hyperparameters={"epochs": 1},
        output_path=str(tmp_path / "out"),
        work_dir=str(tmp_path / "work"),
        job_name="secrets",
        max_run=60,
    )
    stream = io.StringIO()
    result = run(spec, stream=stream)
    assert result.ok, stream.getvalue()
    assert "value 1 args ['--epochs', '1']" in stream.getvalue()
    code = tmp_path / "work" / "secrets" / "algo-1" / "code"
    assert sorted(str(p.relative_to(code)) for p in code.rglob("*")) == ["pkg", "pkg/helper.py", "train.py"]
    for folder in (tmp_path / "work", tmp_path / "out"):
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.endswith(".tar.gz"):
                text = path.read_text(errors="replace")
                assert secret not in text and "AKIAEXAMPLEKEYID0000" not in text, path
    assert secret not in stream.getvalue()


def test_shell_entry_point_and_shared_checkpoints(tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None) -> None:
    checkpoints = tmp_path / "checkpoints"
    spec = JobSpec(
        entry_point="show_args.sh",
        source_dir=str(scripts_dir),
        instance_count=2,
        hyperparameters={"mode": "fast", "n": 3},
        checkpoint_path=str(checkpoints),
        output_path=str(tmp_path / "out"),
        max_run=60,
    )
    stream = io.StringIO()
    assert run(spec, stream=stream).ok, stream.getvalue()
    output = stream.getvalue()
    for label in ("algo-1,0", "algo-2,1"):
        assert f"[{label}] arg: --mode\n[{label}] arg: fast\n" in output or (
            f"[{label}] arg: --mode" in output and f"[{label}] arg: fast" in output
        )
        assert f"[{label}] arg: -n" in output and f"[{label}] arg: 3" in output
    assert sorted(p.name for p in checkpoints.iterdir()) == ["marker-algo-1", "marker-algo-2"]
