"""Soak: 50 consecutive short 2-rank jobs (30 under smddprun, 20 through local_mode, of distribution smddp or mpi; one
in five fails on purpose) leave no process, listening port (Horovod's rendezvous servers closed), shared-memory
segment, temporary folder (local_mode's job trees, the stall watchdog's status folders), open file or thread
behind: the only test of many jobs in a row."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from smddp_compat.local_mode import JobSpec, run
from tests.reliability.conftest import PROGRAMS, processes_running, quiet_env, smddprun

PROGRAM = PROGRAMS / "short_rank.py"


def _listening(pids: set[int]) -> set[tuple[str, int]]:
    """Listening TCP sockets on the machine that belong to ``pids`` (or whose owner cannot be told)."""
    out = set()
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and (conn.pid is None or conn.pid in pids):
            out.add((conn.laddr.ip, conn.laddr.port))
    return out


def _ours() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.children(recursive=True))}


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.e2e
def test_fifty_short_jobs_leave_nothing_behind(tmp_path: Path, private_tmp: Path) -> None:
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    listening_before = _listening(_ours())
    shm_before = _shm()
    fds_before = me.num_fds()
    threads_before = threading.active_count()
    started = time.monotonic()
    env = quiet_env(TMPDIR=str(private_tmp))
    outcomes = []
    for n in range(50):
        fail = n % 5 == 4
        extra = ["--fail-rank", "1"] if fail else []
        if n < 30:
            proc = subprocess.run(smddprun("-np", "2", "--timeout", "60", "--grace", "2", "--stall-check-seconds", "30",
                                           sys.executable, str(PROGRAM), *extra),
                                  env=env, capture_output=True, text=True, timeout=90)
            assert proc.returncode == (3 if fail else 0), proc.stdout + proc.stderr
            assert proc.stdout.count("rank ") == 2 or fail
        else:
            distribution = "mpi" if n % 2 and not fail else "smddp"  # (short_rank.py fails by HOROVOD_RANK)
            spec = JobSpec(entry_point=PROGRAM.name, source_dir=str(PROGRAMS), instance_count=2, distribution=distribution,
                           hyperparameters={"fail-rank": 1} if fail else {}, output_path=str(tmp_path / "out"),
                           job_name=f"soak-{n}", max_run=60)
            result = run(spec, stream=io.StringIO(), grace=2)
            assert result.ok is not fail, result.failure_reason
        outcomes.append(fail)
    elapsed = time.monotonic() - started
    print(f"soak: 50 jobs ({sum(outcomes)} failing on purpose) in {elapsed:.1f} s")

    assert {p.pid for p in me.children(recursive=True)} - children_before == set()
    assert processes_running(str(PROGRAM)) == []
    assert _listening(_ours()) - listening_before == set()
    assert _shm() - shm_before == set()
    assert sorted(p.name for p in private_tmp.iterdir()) == []  # local_mode's job trees, smddprun's stall folders
    assert me.num_fds() <= fds_before
    assert threading.active_count() <= threads_before
