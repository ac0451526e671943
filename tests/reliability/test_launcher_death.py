"""A launcher's processes die with it, however the launcher ends (issue 35, class 1).

- a closed terminal (SIGHUP) or Ctrl-\\ (SIGQUIT) stops the job as SIGTERM does: every rank ended, exit 128 + N;
- a launcher killed outright (SIGKILL: nothing of it runs any more) is outlived by its lifeline watcher, which ends
  every rank within seconds and removes the launcher's temporary folders (the MPI engine's per-rank spec files,
  which hold each rank's whole environment, are already gone: each is removed as soon as its rank read it);
- the same for ``smddp local`` (the process backend), whose job then ends ``Stopped``, its temporary tree removed;
- a preparation the file system refuses (a full disk, a file-size limit) ends in one line naming the fix, and leaves
  no folder that would make the job's name taken.

The ranks are the TF-free ``programs/fault_rank.py``, which write their PIDs so that psutil can tell whether any is
left running.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.conftest import PROGRAMS, alive, quiet_env, smddp, smddprun
from tests.reliability.test_launcher_faults import Running, assert_no_traceback, no_rank_left, rank_pids

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]

RANK = str(PROGRAMS / "fault_rank.py")
# From the launcher's death to the last rank's: the watcher polls every 0.25 s, then SIGTERM ends a fault_rank.
DEATH_BOUND_SECONDS = 5.0


def _ranks_up(job: Running, count: int) -> None:
    for rank in range(count):
        job.wait_for_line(lambda line, rank=rank: line.endswith(f"rank {rank} up"))


def _gone_within(pid_dir: Path, seconds: float) -> float:
    """Seconds until every rank that wrote its PID has ended (fails the test past ``seconds``)."""
    pids = rank_pids(pid_dir)
    assert pids, "the ranks never wrote their PIDs"
    start = time.monotonic()
    while alive(pids) and time.monotonic() - start < seconds:
        time.sleep(0.05)
    left = alive(pids)
    assert left == [], f"ranks still running {seconds} s after the launcher died: {[p.pid for p in left]}"
    return time.monotonic() - start


@pytest.mark.parametrize("engine, signum", [("gloo", signal.SIGHUP), ("mpi", signal.SIGHUP),
                                            ("gloo", signal.SIGQUIT)])
def test_a_closed_terminal_or_a_quit_stops_every_rank(tmp_path: Path, engine: str, signum: int) -> None:
    pid_dir = tmp_path / "pids"
    with no_rank_left(pid_dir):
        job = Running(smddprun("-np", "2", f"--{engine}", "--grace", "3", sys.executable, RANK,
                               "--pid-dir", str(pid_dir)))
        _ranks_up(job, 2)
        job.proc.send_signal(signum)
        code, _ = job.wait()
        assert_no_traceback(job)
        assert code == 128 + signum, job.text_stderr
        assert f"interrupted by {signal.Signals(signum).name}" in job.text_stderr


@pytest.mark.parametrize("engine", ["gloo", "mpi"])
def test_a_launcher_killed_outright_leaves_no_rank_and_no_file(tmp_path: Path, engine: str) -> None:
    pid_dir, scratch = tmp_path / "pids", tmp_path / "tmp"
    scratch.mkdir()
    mpi_init = ["--mpi-init"] if engine == "mpi" else []
    with no_rank_left(pid_dir):
        job = Running(smddprun("-np", "2", f"--{engine}", sys.executable, RANK, "--pid-dir", str(pid_dir), *mpi_init),
                      env=quiet_env(TMPDIR=str(scratch)))
        _ranks_up(job, 2)
        shared_memory = set()  # what the ranks mapped from /dev/shm: Open MPI's segments (mpirun dies unwarned too)
        if engine == "mpi":
            specs = list(scratch.glob("smddp-mpi-ranks-*/rank-*.json"))
            assert specs == [], f"a rank's environment file outlived its reading: {specs}"
            for pid in rank_pids(pid_dir):
                maps = Path(f"/proc/{pid}/maps").read_text()
                shared_memory |= {row.split()[-1] for row in maps.splitlines() if " /dev/shm/" in row}
            assert [name for name in shared_memory if "vader_segment" in name], shared_memory
        job.proc.send_signal(signal.SIGKILL)
        job.wait()
        took = _gone_within(pid_dir, DEATH_BOUND_SECONDS)
        print(f"{engine}: every rank ended {took:.2f} s after smddprun was killed")
        deadline = time.monotonic() + DEATH_BOUND_SECONDS
        while list(scratch.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(scratch.iterdir()) == [], "the killed launcher's temporary folders were left"
        assert [name for name in shared_memory if os.path.exists(name)] == [], "shared memory was left"
        assert "died without stopping its processes" in job.text_stderr


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGKILL])
def test_smddp_local_ends_its_processes_whichever_way_it_dies(tmp_path: Path, signum: int) -> None:
    pid_dir, output, scratch = tmp_path / "pids", tmp_path / "out", tmp_path / "tmp"
    scratch.mkdir()
    with no_rank_left(pid_dir):
        job = Running(smddp("local", RANK, "--output", str(output), "--job-name", "dies", "--max-run", "120",
                            "--hyperparameters", f"pid-dir={pid_dir}"), env=quiet_env(TMPDIR=str(scratch)))
        _ranks_up(job, 1)
        assert list(scratch.glob("smddp-local-dies-*")), "the job's tree is not where the test looks"
        job.proc.send_signal(signum)
        code, _ = job.wait()
        _gone_within(pid_dir, DEATH_BOUND_SECONDS)
        deadline = time.monotonic() + DEATH_BOUND_SECONDS
        while list(scratch.glob("smddp-local-dies-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(scratch.glob("smddp-local-dies-*")) == [], "the job's temporary tree was left"
        if signum != signal.SIGKILL:
            assert_no_traceback(job)
            assert code == 128 + signum, job.text_stderr
            assert "Stopped" in "\n".join(job.stdout + job.stderr), job.text_stderr


def test_a_preparation_the_file_system_refuses_ends_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """The code copy hits the file-size limit (as a full TMPDIR would refuse it: the same OSError path)."""
    source, output = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    (source / "train.py").write_text("print('trained')\n")
    (source / "weights.bin").write_bytes(b"w" * (2 << 20))

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    job = Running(smddp("local", "train.py", "--source-dir", str(source), "--output", str(output), "--job-name",
                        "full"), preexec_fn=small_files)
    code, _ = job.wait()
    assert_no_traceback(job)
    assert code == 1, job.text_stderr
    assert "the job's hosts could not be prepared" in job.text_stderr
    assert "give a folder on a disk with room (--work-dir, or the TMPDIR environment variable)" in job.text_stderr
    assert not output.exists() or list(output.iterdir()) == [], list(output.rglob("*"))


def test_a_stray_sigterm_to_one_host_never_reports_a_completed_job(tmp_path: Path) -> None:
    """SIGTERM to one host's script, from outside the job: the script checkpoints and returns, and the job ends
    ``Failed`` with the Stopped reason, never ``Completed`` with an empty model (it used to exit 0)."""
    pid_dir, output = tmp_path / "pids", tmp_path / "out"
    pid_dir.mkdir()
    job = Running(smddp("local", str(PROGRAMS / "stoppable.py"), "--instance-count", "2", "--output", str(output),
                        "--job-name", "stray", "--max-run", "120", "--hyperparameters", f"pid-dir={pid_dir}"))
    job.wait_for_line(lambda line: "step 5" in line)
    deadline = time.monotonic() + 30
    while not (pid_dir / "algo-2.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(int((pid_dir / "algo-2.pid").read_text()), signal.SIGTERM)
    code, _ = job.wait()
    assert_no_traceback(job)
    text = "\n".join(job.stdout + job.stderr)
    assert code == 128 + signal.SIGTERM, text[-3000:]
    assert "ended Failed" in text and "Completed" not in text, text[-3000:]
    assert "Stopped: the script received SIGTERM and stopped before it finished" in text, text[-3000:]
    assert alive({int((pid_dir / f"algo-{n}.pid").read_text()) for n in (1, 2)}) == []
