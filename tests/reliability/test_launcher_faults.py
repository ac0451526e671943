"""Faults around the launchers, injected for real: every launcher ends every process it started, whatever happens,
and refuses inputs that would end in a traceback or be silently misread.

- a signal at a bad moment: SIGINT/SIGTERM while the grace period of a stop runs (after a failure, after the time
  limit, after a first signal), and SIGINT right after a rank's process was created;
- an output sink that fails: the console closed (``smddprun ... | head -1``), a log file on a full disk
  (``/dev/full``) or past the file-size limit (``RLIMIT_FSIZE``);
- numbers that are not numbers of seconds (NaN, infinity, zero, negative, absurdly large) given to any numeric
  option of ``smddprun`` or ``smddp local`` or to the Python APIs behind them;
- a ``--log-dir`` that cannot be written.

The ranks are small TF-free programs (``programs/fault_rank.py``) that write their PIDs to a folder, so each test
checks with psutil that none of them is left running.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from smddp_compat.errors import UsageError
from tests.reliability.conftest import PROGRAMS, alive, quiet_env, smddp, smddprun

pytestmark = pytest.mark.timeout(180)

RANK = str(PROGRAMS / "fault_rank.py")
# Long enough that a stop which waited it out would be plain to see; the bound asserted is far below it.
LONG_GRACE = "30"
# From the signal (or the end of the job's work) to the launcher's exit; "grace + a few seconds" with the grace cut.
STOP_BOUND_SECONDS = 5.0
# A job that hangs is given this long before the test calls it a hang (the job itself needs 1-3 s).
HANG_SECONDS = 60.0


class Running:
    """A launcher started in its own session, its stdout and stderr read line by line in threads."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, read_stdout: bool = True,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.proc = subprocess.Popen(argv, env=env or quiet_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True, preexec_fn=preexec_fn)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True)]
        if read_stdout:
            self._threads.append(threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout),
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    def _read(self, stream, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for_line(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> None:
        """Waits until a stdout line satisfies ``predicate`` (fails the test if none does in time)."""
        with self._changed:
            found = self._changed.wait_for(lambda: any(predicate(line) for line in self.stdout), timeout=timeout)
        assert found, f"no expected line within {timeout} s; stdout: {self.stdout[-20:]} stderr: {self.stderr}"

    def wait(self, timeout: float = HANG_SECONDS) -> tuple[int, float]:
        """The launcher's exit code and the time.monotonic() it ended; kills its session if it hangs."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            pytest.fail(f"the launcher hung (still running after {timeout:.0f} s); stderr: {self.text_stderr}")
        ended = time.monotonic()
        for thread in self._threads:
            thread.join(timeout=10)
        return code, ended

    @property
    def text_stderr(self) -> str:
        return "\n".join(self.stderr)


def rank_pids(pid_dir: Path) -> set[int]:
    """The PIDs the ranks wrote."""
    return {int(path.read_text()) for path in pid_dir.glob("rank.*.pid")}


@contextlib.contextmanager
def no_rank_left(pid_dir: Path, extra_pid_file: Path | None = None) -> Iterator[None]:
    """Asserts at the end that no rank (PID written by the rank, or by the test driver) is still running; kills
    leftovers so a failing run does not spill into the next test."""
    pid_dir.mkdir(exist_ok=True)
    failed = True
    try:
        yield
        failed = False
    finally:
        pids = rank_pids(pid_dir)
        if extra_pid_file is not None and extra_pid_file.exists():
            pids |= {int(line) for line in extra_pid_file.read_text().split()}
        # The launcher reaps its ranks before it exits: a rank still running now was left behind.
        left = alive(pids)
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
        if not failed:
            assert pids, "the ranks never wrote their PIDs"
            assert left == [], f"processes left running: {[p.pid for p in left]}"


def assert_no_traceback(running: Running) -> None:
    assert "Traceback" not in running.text_stderr, running.text_stderr
    assert "Exception ignored" not in running.text_stderr, running.text_stderr


# -- 1. a signal at a bad moment --------------------------------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.parametrize(
    "trigger, options, rank_options, signum, exit_code",
    [
        # rank 1 fails; rank 0 ignores SIGTERM, so the grace period runs; Ctrl-C in it
        ("failure", (), ("--fail-rank", "1"), signal.SIGINT, 3),
        # the time limit passes; both ranks ignore SIGTERM; SIGTERM (a stop from outside) in the grace period
        ("timeout", ("--timeout", "2"), (), signal.SIGTERM, 124),
        # a first SIGTERM stops the job; both ranks ignore it; a second signal (Ctrl-C) kills at once
        ("signal", (), (), signal.SIGINT, 128 + signal.SIGTERM),
    ],
)
def test_a_signal_during_the_grace_period_ends_every_rank_at_once(
    tmp_path: Path, trigger: str, options: tuple[str, ...], rank_options: tuple[str, ...], signum: int,
    exit_code: int,
) -> None:
    pid_dir = tmp_path / "pids"
    with no_rank_left(pid_dir):
        job = Running(smddprun("-np", "2", "--gloo", "--grace", LONG_GRACE, *options, sys.executable, RANK,
                               "--pid-dir", str(pid_dir), "--ignore-sigterm", *rank_options))
        job.wait_for_line(lambda line: line == "[0] rank 0 up")
        job.wait_for_line(lambda line: line == "[1] rank 1 up")
        if trigger == "signal":
            job.proc.send_signal(signal.SIGTERM)
        job.wait_for_line(lambda line: line == "[0] got SIGTERM")  # the grace period has begun
        sent = time.monotonic()
        job.proc.send_signal(signum)
        code, ended = job.wait()
        print(f"{trigger}: {signal.Signals(signum).name} in the grace period -> launcher ended "
              f"{ended - sent:.2f} s later")
        assert_no_traceback(job)
        assert code == exit_code, job.text_stderr
        assert ended - sent < STOP_BOUND_SECONDS, f"the grace period ({LONG_GRACE} s) was not cut short"
        assert "smddprun: job failed after" in job.text_stderr
        assert f"{signal.Signals(signum).name} during the stop" in job.text_stderr


@pytest.mark.processes
def test_a_signal_right_after_a_rank_was_created_orphans_nothing(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    spawned = tmp_path / "spawned.pids"
    with no_rank_left(pid_dir, extra_pid_file=spawned):
        job = Running([sys.executable, str(PROGRAMS / "signal_after_spawn.py"), "-np", "2", "--gloo", "--grace", "2",
                       sys.executable, RANK, "--pid-dir", str(pid_dir)],
                      env=quiet_env(SPAWNED_PIDS_FILE=str(spawned)))
        code, _ = job.wait()
        assert_no_traceback(job)
        assert code == 128 + signal.SIGINT, job.text_stderr
        assert "interrupted by SIGINT" in job.text_stderr
        assert len(spawned.read_text().split()) == 2
        assert alive({int(pid) for pid in spawned.read_text().split()}) == [], "a rank was left running"


# -- 2. an output sink that fails -------------------------------------------------------------------------------------

LINES = 3000  # ~300 KB per rank: a rank whose output is not drained blocks after 64 KB


def _count(lines: list[str], prefix: str) -> int:
    return sum(1 for line in lines if line.startswith(prefix))


@pytest.mark.processes
@pytest.mark.parametrize("engine", ["gloo", "mpi"])
def test_a_closed_console_keeps_the_logs_and_never_blocks_a_rank(tmp_path: Path, engine: str) -> None:
    pid_dir, logs = tmp_path / "pids", tmp_path / "logs"
    with no_rank_left(pid_dir):
        # --timeout: a launcher that stops draining the ranks would hang for ever without it.
        job = Running(smddprun("-np", "2", f"--{engine}", "--timeout", "30", "--log-dir", str(logs), sys.executable,
                               RANK, "--pid-dir", str(pid_dir), "--lines", str(LINES)), read_stdout=False)
        assert job.proc.stdout is not None
        job.proc.stdout.readline()
        job.proc.stdout.close()  # as `| head -1` does
        started = time.monotonic()
        code, ended = job.wait()
        print(f"closed console ({engine}): job ended {ended - started:.2f} s after the console closed")
        assert_no_traceback(job)
        assert code == 0, job.text_stderr
        warnings = [line for line in job.stderr if "standard output" in line]
        assert len(warnings) == 1 and "cannot be written" in warnings[0], job.text_stderr
        for rank in (0, 1):
            assert _count((logs / f"rank.{rank}.log").read_text().splitlines(), "line ") == LINES


def _file_size_limit() -> None:
    limit = 64 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.processes
@pytest.mark.parametrize(
    "fault, engine",
    [("dev-full", "gloo"), ("dev-full", "mpi"), ("file-size-limit", "gloo")],
)
def test_a_log_file_that_cannot_be_written_keeps_the_console_and_never_blocks_a_rank(
    tmp_path: Path, fault: str, engine: str
) -> None:
    pid_dir, logs = tmp_path / "pids", tmp_path / "logs"
    logs.mkdir()
    if fault == "dev-full":
        (logs / "rank.0.log").symlink_to("/dev/full")  # every write: ENOSPC, as on a full disk
    with no_rank_left(pid_dir):
        job = Running(smddprun("-np", "2", f"--{engine}", "--timeout", "30", "--log-dir", str(logs), sys.executable,
                               RANK, "--pid-dir", str(pid_dir), "--lines", str(LINES)),
                      preexec_fn=_file_size_limit if fault == "file-size-limit" else None)
        code, _ = job.wait()
        assert_no_traceback(job)
        assert code == 0, job.text_stderr
        for rank in (0, 1):
            assert _count(job.stdout, f"[{rank}] line ") == LINES, "the console lost lines"
        failed_logs = ["rank.0.log"] if fault == "dev-full" else ["rank.0.log", "rank.1.log"]
        for name in failed_logs:
            warnings = [line for line in job.stderr if f"{logs / name}" in line]
            reason = "No space left on device" if fault == "dev-full" else "File too large"
            assert len(warnings) == 1 and reason in warnings[0], job.text_stderr
        if fault == "dev-full":
            assert _count((logs / "rank.1.log").read_text().splitlines(), "line ") == LINES


@pytest.mark.processes
def test_smddp_local_with_a_closed_console_does_not_hang(tmp_path: Path) -> None:
    """``smddp local ... | head -1``: the process backend keeps draining its processes and ends with the job, whose
    exit code it keeps (0), without a traceback for the summary it can no longer print."""
    pid_dir, output = tmp_path / "pids", tmp_path / "out"
    with no_rank_left(pid_dir):
        job = Running(smddp("local", RANK, "--output", str(output), "--job-name", "closed-console", "--max-run", "30",
                            "--hyperparameters", f"pid-dir={pid_dir}", f"lines={LINES}"), read_stdout=False)
        assert job.proc.stdout is not None
        job.proc.stdout.readline()
        job.proc.stdout.close()
        code, _ = job.wait()
        assert code != 124, f"the job ran into its time limit: its output was no longer drained\n{job.text_stderr}"
        assert code == 0 and "Traceback" not in job.text_stderr, job.text_stderr
        assert "standard output cannot be written any more (Broken pipe)" in job.text_stderr, job.text_stderr
        log = output / "closed-console" / "logs" / "algo-1.log"
        assert _count(log.read_text().splitlines(), "line ") == LINES


@pytest.mark.processes
def test_a_line_without_end_is_passed_on_in_bounded_pieces(tmp_path: Path) -> None:
    """A rank prints 96 MiB without a newline: the launcher passes it on in pieces of 1 MiB, each saying it was cut,
    and its memory stays far below the line (it used to hold about 5 times each line: +981 MiB for 200 MiB)."""
    mebibytes = 96
    job = subprocess.Popen(smddprun("-np", "1", "--gloo", sys.executable, str(PROGRAMS / "long_line.py"),
                                    str(mebibytes)),
                           env=quiet_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    launcher = psutil.Process(job.pid)
    peak = 0
    sampler_done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not sampler_done.is_set():
            with contextlib.suppress(psutil.Error):
                peak = max(peak, launcher.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert job.stdout is not None
    lengths = [len(line) for line in job.stdout]
    code = job.wait(timeout=120)
    sampler_done.set()
    sampler.join()
    assert code == 0
    pieces = [n for n in lengths if n > 1 << 20]
    assert len(pieces) == mebibytes, lengths[:5]
    assert peak < 80 * (1 << 20), f"the launcher held {peak / (1 << 20):.0f} MiB for a {mebibytes} MiB line"


# -- 3. numbers that are not numbers of seconds -----------------------------------------------------------------------

NOT_SECONDS = ["nan", "NaN", "inf", "-inf", "1e400", "0", "-1", "1e12", "soon"]
SMDDPRUN_SECONDS = ["--timeout", "--grace", "--gloo-timeout", "--stall-check-seconds", "--stall-shutdown-seconds"]


def _refused(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("value", NOT_SECONDS)
@pytest.mark.parametrize("option", SMDDPRUN_SECONDS)
def test_smddprun_refuses_seconds_that_are_not(option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from smddp_compat.launcher import main

    # -np 0: a launcher that accepted the value still starts nothing (it stops at -np).
    # option=value: argparse reads a lone "-inf" as an option, not as the value.
    error = _refused(main, ["-np", "0", f"{option}={value}", sys.executable, "-c", "pass"], capsys)
    assert f"argument {option}: " in error and f"got {value!r}" in error, error
    assert "a finite number > 0 and at most 31536000" in error, error
    assert "Traceback" not in error


@pytest.mark.parametrize("value", ["nan", "inf", "1.5", "two"])
def test_smddprun_refuses_a_number_of_ranks_that_is_not_whole(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from smddp_compat.launcher import main

    error = _refused(main, ["-np", value, sys.executable, "-c", "pass"], capsys)
    assert "argument -np/--num-proc: " in error and f"got {value!r}" in error and "whole number" in error, error


LOCAL_CASES = [
    # (arguments, option, value, words naming the allowed range)
    *[([f"--max-run={v}"], "--max-run", v, "a finite number of seconds > 0") for v in ("nan", "inf", "-inf", "1e400")],
    *[(["--backend", "docker", "--request", "missing.json", "--stop-grace", v], "--stop-grace", v,
       "a finite number > 0 and at most 31536000") for v in ("nan", "inf", "0", "-5", "1e12")],
    *[(["--backend", "docker", "--request", "missing.json", "--gpus-per-host", v], "--gpus-per-host", v,
       "a whole number >= 1") for v in ("nan", "inf", "0", "-1", "1.5")],
    *[([option, v], option, v, "a whole number")
      for option in ("--instance-count", "--processes-per-host", "--devices-per-process")
      for v in ("nan", "inf", "2.5")],
]


@pytest.mark.parametrize("argv, option, value, allowed", LOCAL_CASES, ids=[f"{c[1]}={c[2]}" for c in LOCAL_CASES])
def test_smddp_local_refuses_numbers_that_are_not(argv: list[str], option: str, value: str, allowed: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from smddp_compat.commands.local_cli import main

    if "--request" not in argv:
        argv = [RANK, *argv]
    error = _refused(main, argv, capsys)
    assert f"argument {option}: " in error and f"got {value!r}" in error and allowed in error, error


@pytest.mark.parametrize("setting", [{"timeout": math.nan}, {"timeout": math.inf}, {"grace": math.nan},
                                     {"grace": math.inf}, {"timeout": -math.inf}])
def test_run_process_group_refuses_non_finite_seconds(setting: dict[str, float]) -> None:
    from smddp_compat.launcher import ProcessSpec, run_process_group

    name, value = next(iter(setting.items()))
    with pytest.raises(UsageError, match=rf"{name} must be a positive number of seconds.*got {value!r}"):
        run_process_group([ProcessSpec([sys.executable, "-c", "pass"], dict(os.environ), "0")], **setting)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_the_rendezvous_refuses_a_non_finite_timeout(value: float) -> None:
    from smddp_compat.launcher import HorovodRendezvous, HostSlots

    with pytest.raises(UsageError, match="rendezvous timeout must be a finite number of seconds > 0"):
        HorovodRendezvous([HostSlots("localhost", 1)], timeout=value)


# -- 4. a --log-dir that cannot be written ----------------------------------------------------------------------------


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[None]:
    """``path`` as a folder nobody can write to: a read-only tmpfs for root (whom permission bits do not stop)."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True,
                             timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=True)


@pytest.mark.processes
@pytest.mark.parametrize("case", ["a-file-in-the-way", "under-a-file", "read-only-folder"])
def test_an_unwritable_log_dir_is_refused_before_any_rank_starts(tmp_path: Path, case: str) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder")
    log_dir = {"a-file-in-the-way": blocker, "under-a-file": blocker / "logs",
               "read-only-folder": tmp_path / "read-only" / "logs"}[case]
    with read_only_folder(tmp_path / "read-only") if case == "read-only-folder" else contextlib.nullcontext():
        job = Running(smddprun("-np", "2", "--gloo", "--log-dir", str(log_dir), sys.executable, RANK,
                               "--pid-dir", str(pid_dir)))
        code, _ = job.wait()
    assert_no_traceback(job)
    assert code == 2, job.text_stderr
    assert rank_pids(pid_dir) == set(), "a rank started"
    errors = [line for line in job.stderr if line.startswith("smddprun: error:")]
    assert len(errors) == 1 and len(job.stderr) == 1, job.text_stderr
    assert f"--log-dir {log_dir}" in errors[0] and "give a folder you can write to" in errors[0], errors[0]
    assert re.search(r"\((Not a directory|File exists|Read-only file system|Permission denied)\)", errors[0]), errors[0]
