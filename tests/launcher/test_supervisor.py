"""The process-group supervisor with real (TF-free) processes: output, failure, timeouts, signals, cleanup."""

import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from smddp_compat.errors import LaunchError, UsageError
from smddp_compat.launcher import ProcessSpec, run_process_group


def spec(label: str, code: str, tmp_path=None, **kwargs) -> ProcessSpec:
    return ProcessSpec(argv=[sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ), label=label, **kwargs)


@pytest.mark.processes
def test_output_is_prefixed_and_logged(tmp_path):
    out = io.StringIO()
    log = tmp_path / "logs" / "r0.log"
    result = run_process_group(
        [spec("0", "print('hello'); print('world')", log_path=str(log)), spec("1", "print('other')")],
        stream=out, timeout=30,
    )
    assert result.ok and result.exit_code == 0 and result.reason == ""
    lines = out.getvalue().splitlines()
    assert "[0] hello" in lines and "[0] world" in lines and "[1] other" in lines
    assert log.read_text() == "hello\nworld\n"


@pytest.mark.processes
def test_one_failure_stops_the_others_quickly(tmp_path):
    marker = tmp_path / "failure"
    marker.write_text("bad hyperparameter lr=-1")
    started = time.monotonic()
    result = run_process_group(
        [spec("0", "import time; time.sleep(120)"), spec("1", "import sys, time; time.sleep(0.5); sys.exit(7)",
                                                          host="algo-2")],
        stream=io.StringIO(), timeout=60, grace=3,
        failure_reason=lambda s: marker.read_text() if s.label == "1" else None,
    )
    assert time.monotonic() - started < 10
    assert not result.ok and result.exit_code == 7
    assert result.failed is not None and result.failed.spec.label == "1"
    assert "[1] on host algo-2 exited with code 7: bad hyperparameter lr=-1" in result.reason
    assert result.results[0].returncode == -signal.SIGTERM


@pytest.mark.processes
def test_a_server_is_stopped_once_the_programs_have_succeeded_and_fails_the_job_only_while_they_run():
    """A server beside the programs (a parameter server nothing uses) ends the job's success, not its wait; its exit
    code after that stop is no failure. A server that fails while the programs run still fails the job."""
    server = spec("ps", "import time; print('serving', flush=True); time.sleep(600)", serves=True)
    out = io.StringIO()
    result = run_process_group([server, spec("0", "print('trained')"), spec("1", "print('trained')")],
                               stream=out, timeout=60, grace=3)
    assert result.ok and result.exit_code == 0 and result.reason == "", result.reason
    assert result.results[0].returncode == -signal.SIGTERM  # stopped, once both programs had exited 0
    assert [r.returncode for r in result.results[1:]] == [0, 0]

    failing = spec("ps", "import sys; sys.exit(3)", serves=True, host="algo-2")
    result = run_process_group([failing, spec("0", "import time; time.sleep(600)")], stream=io.StringIO(),
                               timeout=60, grace=3)
    assert not result.ok and result.exit_code == 3
    assert "process [ps] on host algo-2 exited with code 3" in result.reason
    assert result.results[1].returncode == -signal.SIGTERM


@pytest.mark.processes
def test_sigterm_ignoring_process_is_killed_after_grace():
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(120)
    """
    started = time.monotonic()
    result = run_process_group([spec("0", code), spec("1", "import sys; sys.exit(1)")],
                               stream=io.StringIO(), timeout=60, grace=1)
    assert time.monotonic() - started < 10
    assert result.results[0].returncode == -signal.SIGKILL


@pytest.mark.processes
def test_kill_9_of_a_rank_ends_the_job_and_names_it():
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(120)"
    out = io.StringIO()

    def killer():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for line in out.getvalue().splitlines():
                if line.startswith("[1] "):
                    os.kill(int(line.split()[1]), signal.SIGKILL)
                    return
            time.sleep(0.05)

    import threading

    thread = threading.Thread(target=killer)
    thread.start()
    started = time.monotonic()
    result = run_process_group([spec("0", code), spec("1", code, host="algo-1")], stream=out, timeout=60, grace=2)
    thread.join()
    assert time.monotonic() - started < 10
    assert result.exit_code == 128 + signal.SIGKILL
    assert "[1] on host algo-1 was killed by signal SIGKILL" in result.reason


@pytest.mark.processes
def test_timeout_stops_everything():
    result = run_process_group([spec("0", "import time; time.sleep(60)")], stream=io.StringIO(), timeout=1, grace=1)
    assert result.timed_out and result.exit_code == 124
    assert "time limit of 1 s" in result.reason


@pytest.mark.processes
def test_grandchildren_are_not_left_behind(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(120)
    """
    result = run_process_group([spec("0", code), spec("1", "import sys, time; time.sleep(1.5); sys.exit(2)")],
                               stream=io.StringIO(), timeout=60, grace=1)
    assert result.exit_code == 2
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(grandchild) and psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "grandchild still running"
        time.sleep(0.05)


@pytest.mark.processes
def test_sigint_to_the_supervisor_stops_the_job(tmp_path):
    script = tmp_path / "supervise.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        from smddp_compat.launcher import ProcessSpec, run_process_group
        code = "import time; print('up', flush=True); time.sleep(120)"
        specs = [ProcessSpec([sys.executable, "-c", code], dict(os.environ), str(i)) for i in range(2)]
        result = run_process_group(specs, timeout=60, grace=2)
        print("REASON", result.reason, flush=True)
        sys.exit(result.exit_code)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    seen = 0
    while seen < 2:
        if proc.stdout.readline().rstrip().endswith("up"):
            seen += 1
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGINT
    assert "interrupted by SIGINT" in out
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive


@pytest.mark.processes
def test_missing_program_is_a_launch_error():
    with pytest.raises(LaunchError, match="no-such-program"):
        run_process_group([ProcessSpec(["no-such-program"], dict(os.environ), "0")], stream=io.StringIO())


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout": 0}, "timeout must be a positive"),
    ({"grace": -1}, "grace must be a positive"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(UsageError, match=message):
        run_process_group([spec("0", "pass")], **kwargs)


def test_spec_rejects_string_commands():
    with pytest.raises(UsageError, match="non-empty list of strings"):
        ProcessSpec(argv="python train.py", env={}, label="0")  # type: ignore[arg-type]
