"""The MPI engine (one mpirun, smddprun per rank) supervised like the Gloo path: prefixes, per-rank logs, the failed
rank and its failure file, kill -9, time limit, Ctrl-C, nothing left behind. Plain Python ranks (no TensorFlow);
tests/reliability runs TensorFlow ranks on both engines."""

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from smddp_compat.launcher import ProcessSpec
from smddp_compat.launcher._mpi_group import MpirunOutput, mpirun_unavailable_reason, run_mpi_group

pytestmark = pytest.mark.skipif(mpirun_unavailable_reason() is not None, reason=str(mpirun_unavailable_reason()))

REPO = Path(__file__).resolve().parents[2]
RANK = "int(os.environ['OMPI_COMM_WORLD_RANK'])"


def specs(code: str, ranks: int, tmp_path: Path | None = None, **env: str) -> list[ProcessSpec]:
    environ = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **env}
    return [
        ProcessSpec(
            argv=[sys.executable, "-c", textwrap.dedent(code)],
            env={**environ, "RANK_LABEL": f"algo-{rank % 2 + 1},{rank}"},
            label=f"algo-{rank % 2 + 1},{rank}",
            log_path=str(tmp_path / f"rank.{rank}.log") if tmp_path else None,
            host=f"algo-{rank % 2 + 1}",
            cwd=str(tmp_path) if tmp_path else None,
        )
        for rank in range(ranks)
    ]


@pytest.mark.processes
@pytest.mark.parametrize("ranks", [2, 3])
def test_each_rank_runs_its_own_spec_with_prefix_and_log(tmp_path, ranks):
    code = f"""
        import os, sys
        rank = {RANK}
        print("rank", rank, "of", os.environ["OMPI_COMM_WORLD_SIZE"], os.environ["RANK_LABEL"], os.getcwd())
        print("to stderr", rank, file=sys.stderr)
    """
    out = io.StringIO()
    result = run_mpi_group(specs(code, ranks, tmp_path), stream=out, timeout=120)
    assert result.ok and result.exit_code == 0 and result.reason == "", out.getvalue()
    assert [r.returncode for r in result.results] == [0] * ranks
    lines = out.getvalue().splitlines()
    for rank in range(ranks):
        label = f"algo-{rank % 2 + 1},{rank}"
        assert f"[{label}] rank {rank} of {ranks} {label} {tmp_path}" in lines
        assert f"[{label}] to stderr {rank}" in lines
        log = (tmp_path / f"rank.{rank}.log").read_text().splitlines()
        assert sorted(log) == sorted([f"rank {rank} of {ranks} {label} {tmp_path}", f"to stderr {rank}"])


@pytest.mark.processes
def test_the_failed_rank_its_code_and_failure_file_are_reported(tmp_path):
    (tmp_path / "failure-2").write_text("bad hyperparameter lr=-1\n")
    code = f"""
        import os, sys, time
        rank = {RANK}
        time.sleep(1 if rank == 2 else 60)
        sys.exit(5)
    """
    started = time.monotonic()
    result = run_mpi_group(
        specs(code, 3), stream=io.StringIO(), timeout=120, grace=2,
        failure_reason=lambda spec: (tmp_path / f"failure-{spec.label.split(',')[1]}").read_text(),
    )
    assert time.monotonic() - started < 15
    assert result.exit_code == 5
    assert result.failed is not None and result.failed.spec.label == "algo-1,2"
    assert result.reason == ("process [algo-1,2] on host algo-1 exited with code 5: bad hyperparameter lr=-1; "
                             "the other processes were stopped")


@pytest.mark.processes
def test_kill_9_of_a_rank_ends_the_job_within_seconds_and_names_it():
    code = f"import os, time; print('PID', {RANK}, os.getpid(), flush=True); time.sleep(120)"
    out = io.StringIO()
    killed: list[float] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for line in out.getvalue().splitlines():
                if line.startswith("[algo-2,1] PID 1 "):
                    killed.append(time.monotonic())
                    os.kill(int(line.split()[-1]), signal.SIGKILL)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    result = run_mpi_group(specs(code, 2), stream=out, timeout=120, grace=2)
    thread.join()
    assert killed and time.monotonic() - killed[0] < 10
    assert result.exit_code == 128 + signal.SIGKILL
    assert "process [algo-2,1] on host algo-2 was killed by signal SIGKILL" in result.reason


@pytest.mark.processes
def test_time_limit_stops_every_rank():
    code = f"import os, time; print('PID', os.getpid(), flush=True); time.sleep(120)"
    out = io.StringIO()
    result = run_mpi_group(specs(code, 2), stream=out, timeout=8, grace=2)
    assert result.timed_out and result.exit_code == 124
    pids = [int(line.split()[-1]) for line in out.getvalue().splitlines() if " PID " in line]
    assert len(pids) == 2
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.processes
def test_sigint_to_smddprun_stops_mpirun_and_its_ranks(tmp_path):
    code = "import time; print('up', flush=True); time.sleep(120)"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "smddp_compat.launcher", "-np", "2", "--mpi", "--grace", "2",
                             sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    seen = 0
    while seen < 2:
        line = proc.stdout.readline()
        assert line, "smddprun ended early"
        seen += line.rstrip().endswith("up")
    descendants = psutil.Process(proc.pid).children(recursive=True)
    assert len(descendants) >= 3  # mpirun and two ranks
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT
    assert "interrupted by SIGINT" in err
    _, alive = psutil.wait_procs(descendants, timeout=5)
    assert not alive


def test_a_failure_mpirun_reports_without_a_rank_is_explained():
    output = MpirunOutput(specs("pass", 2))
    assert output.route(None) == []
    for line in ["--------------------------------------------------------------------------",
                 "mpirun was unable to launch the specified application as it could not access",
                 "or execute an executable:"]:
        assert output.route(line) == [("mpirun", line, None)]
    assert output.failed_rank is None and "could not access" in " ".join(output.own_lines)


def test_mpirun_reports_are_read():
    output = MpirunOutput(specs("pass", 3))
    # Unbuffered writes of two ranks interleave on one line of mpirun's; each rank's line ends at its newline.
    assert output.route("[4411,1]<stdout>:hel[4411,0]<stdout>:wor[4411,1]<stdout>:lo") == [("algo-2,1", "hello", None)]
    assert output.route("[4411,0]<stderr>:oops") == [("algo-1,0", "oops", None)]
    assert output.route(None) == [("algo-1,0", "wor", None)]
    for line in ["  Process name: [[25598,1],2]", "  Exit code:    5"]:
        output.route(line)
    assert (output.failed_rank, output.failed_code) == (2, 5)
    later = MpirunOutput(specs("pass", 2))
    later.route("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).")
    assert (later.failed_rank, later.failed_code) == (1, -9)
