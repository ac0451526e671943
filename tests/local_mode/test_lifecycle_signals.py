"""A SIGTERM or SIGINT while a job's hosts are being prepared ends the job Stopped, with nothing left on disk (the
one lifecycle's handler, local_mode/lifecycle.py; the twin has the same through the same code)."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import pytest

from smddp_compat.local_mode import JobSpec
from smddp_compat.local_mode.backends import ProcessBackend
from smddp_compat.local_mode.runner import ProcessJob


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_preparation_stops_the_job_and_removes_its_tree(signum: int, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("raise SystemExit('never runs')\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    spec = JobSpec("train.py", source_dir=str(source), channels={"train": str(data)}, instance_count=2,
                   output_path=str(tmp_path / "out"), job_name="signalled")
    prepared = ProcessJob._prepare
    roots: list[Path] = []

    def prepare_then_signal(job: ProcessJob, root: Path) -> object:
        roots.append(root)
        prepared(job, root)  # the hosts' trees, code and channels are there now
        os.kill(os.getpid(), signum)
        time.sleep(10)  # the lifecycle's handler ends the preparation before this does
        raise AssertionError("the signal did not end the preparation")

    monkeypatch.setattr(ProcessJob, "_prepare", prepare_then_signal)
    before = signal.getsignal(signum)
    result = ProcessBackend(stream=io.StringIO()).run(spec)

    assert (result.status, result.secondary_status, result.exit_code) == ("Stopped", "Stopped", 128 + signum)
    assert roots and not roots[0].exists(), "the job's temporary tree was left"
    assert signal.getsignal(signum) is before  # the caller's handler is back
    assert (data / "rows.csv").read_text() == "1,2\n"
