"""Supervision of a group of processes that form one job.

The group lives and dies together, as ranks under ``mpirun`` do: output is streamed line by line with a prefix,
the first process that fails (or a timeout, or a signal to the supervisor) stops all the others, first politely
(SIGTERM to each process group) and then for good (SIGKILL after ``grace`` seconds). Nothing is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Sequence

from smddp_compat.errors import LaunchError, UsageError

__all__ = ["ProcessSpec", "ProcessResult", "GroupResult", "run_process_group"]

_POLL_SECONDS = 0.05
_PUMP_JOIN_SECONDS = 5.0


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a job.

    Attributes:
        argv: The command as a list of arguments (never a shell string).
        env: The complete environment of the process.
        label: Prefix of each output line, printed as ``[label] line``.
        cwd: Working directory, or None for the supervisor's.
        log_path: File that every output line (without prefix) is appended to, or None.
        host: Host name used in failure messages.
        console_hides: Lines for which it returns True go to ``log_path`` but not to the console (e.g.
            :func:`~smddp_compat.launcher.tensorflow_log_filter`); None shows every line.
    """

    argv: list[str]
    env: dict[str, str]
    label: str
    cwd: str | None = None
    log_path: str | None = None
    host: str = "localhost"
    console_hides: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.argv, (list, tuple)) or not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise UsageError(f"ProcessSpec.argv must be a non-empty list of strings, got {self.argv!r}.")


@dataclass
class ProcessResult:
    """How one process ended.

    Attributes:
        spec: The process's spec.
        returncode: Exit code (negative: killed by that signal), or None if it could not be reaped.
        duration: Seconds from start to exit.
    """

    spec: ProcessSpec
    returncode: int | None
    duration: float


@dataclass
class GroupResult:
    """How a group of processes ended.

    Attributes:
        results: One result per spec, in the order given.
        ok: True when every process exited with code 0.
        reason: Empty when ok; otherwise what went wrong first, naming the process and host.
        failed: The process that failed first, or None (success, timeout or interruption).
        duration: Seconds from the first start to the last exit.
        timed_out: True when the group was stopped because ``timeout`` passed.
        interrupted: The signal number that stopped the group (SIGINT, SIGTERM), or None.
    """

    results: list[ProcessResult]
    ok: bool
    reason: str
    failed: ProcessResult | None
    duration: float
    timed_out: bool = False
    interrupted: int | None = None

    @property
    def exit_code(self) -> int:
        """A shell-style exit code for the whole group (0, the failed code, 124 timeout, 128+signal)."""
        if self.ok:
            return 0
        if self.interrupted is not None:
            return 128 + self.interrupted
        if self.timed_out:
            return 124
        code = self.failed.returncode if self.failed is not None else None
        if code is None:
            return 1
        return code if code > 0 else 128 - code


@dataclass
class _Running:
    spec: ProcessSpec
    popen: subprocess.Popen
    started: float
    pump: threading.Thread
    ended: float | None = None
    log: IO[bytes] | None = None
    output_lock: threading.Lock = field(default_factory=threading.Lock)


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _pump_output(running: _Running, stream: IO[str], stream_lock: threading.Lock) -> None:
    prefix = f"[{running.spec.label}] "
    assert running.popen.stdout is not None
    for raw in iter(running.popen.stdout.readline, b""):
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if running.log is not None:
            running.log.write(raw if raw.endswith(b"\n") else raw + b"\n")
            running.log.flush()
        if running.spec.console_hides is not None and running.spec.console_hides(text):
            continue
        with stream_lock:
            stream.write(prefix + text + "\n")
            stream.flush()
    running.popen.stdout.close()


def _signal_group(running: _Running, signum: int) -> None:
    try:
        os.killpg(running.popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_all(group: list[_Running], grace: float) -> None:
    """SIGTERM every live process group, SIGKILL what is left after ``grace`` s, reap everything."""
    for running in group:
        if running.popen.poll() is None:
            _signal_group(running, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(r.popen.poll() is None for r in group):
        time.sleep(_POLL_SECONDS)
    for running in group:
        # Kill the whole group even if its leader is gone: children it forked may still hold resources.
        _signal_group(running, signal.SIGKILL)
    for running in group:
        try:
            running.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


def _start(spec: ProcessSpec, stream: IO[str], stream_lock: threading.Lock) -> _Running:
    log = None
    if spec.log_path:
        os.makedirs(os.path.dirname(os.path.abspath(spec.log_path)), exist_ok=True)
        log = open(spec.log_path, "ab")  # noqa: SIM115 - closed by run_process_group
    try:
        popen = subprocess.Popen(  # noqa: S603 - argv is a list, no shell
            spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise LaunchError(
            f"could not start process [{spec.label}] on {spec.host}: {exc.strerror or exc} "
            f"(command: {spec.argv!r}). Check that the program exists and is executable."
        ) from exc
    running = _Running(spec=spec, popen=popen, started=time.monotonic(), pump=threading.Thread(), log=log)
    running.pump = threading.Thread(
        target=_pump_output, args=(running, stream, stream_lock), name=f"pump-{spec.label}", daemon=True
    )
    running.pump.start()
    return running


def run_process_group(
    specs: Sequence[ProcessSpec],
    *,
    timeout: float | None = None,
    grace: float = 5.0,
    stream: IO[str] | None = None,
    failure_reason: Callable[[ProcessSpec], str | None] | None = None,
) -> GroupResult:
    """Runs processes as one job: all succeed, or all are stopped.

    Args:
        specs: The processes to start, in rank order.
        timeout: Seconds after which the whole group is stopped (None: no limit).
        grace: Seconds between SIGTERM and SIGKILL when the group is stopped.
        stream: Where prefixed output goes (default: ``sys.stdout``).
        failure_reason: Called with the spec of the first failed process; returns the reason it recorded
            (e.g. its failure file) or None.

    Returns:
        How the group ended.

    Raises:
        UsageError: No specs, or a non-positive timeout or grace.
        LaunchError: A process could not be started (the ones already started are stopped first).
    """
    if not specs:
        raise UsageError("run_process_group needs at least one ProcessSpec, got none.")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"timeout must be a positive number of seconds or None, got {timeout!r}.")
    if grace <= 0:
        raise UsageError(f"grace must be a positive number of seconds, got {grace!r}.")
    out = stream if stream is not None else sys.stdout
    stream_lock = threading.Lock()
    group: list[_Running] = []
    previous_handlers: dict[int, object] = {}

    def on_signal(signum: int, _frame: object) -> None:
        raise _Interrupted(signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous_handlers[signum] = signal.signal(signum, on_signal)

    start = time.monotonic()
    failed: _Running | None = None
    timed_out = False
    interrupted: int | None = None
    try:
        try:
            for spec in specs:
                group.append(_start(spec, out, stream_lock))
            while True:
                live = 0
                for running in group:
                    code = running.popen.poll()
                    if code is None:
                        live += 1
                        continue
                    if running.ended is None:
                        running.ended = time.monotonic()
                    if code != 0 and failed is None:
                        failed = running
                if failed is not None or live == 0:
                    break
                if timeout is not None and time.monotonic() - start > timeout:
                    timed_out = True
                    break
                time.sleep(_POLL_SECONDS)
        except _Interrupted as exc:
            interrupted = exc.signum
        except BaseException:
            _stop_all(group, grace)
            raise
        _stop_all(group, grace)
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        for running in group:
            running.pump.join(timeout=_PUMP_JOIN_SECONDS)
            if running.log is not None:
                running.log.close()

    end = time.monotonic()
    results = [
        ProcessResult(spec=r.spec, returncode=r.popen.returncode, duration=(r.ended or end) - r.started)
        for r in group
    ]
    reason = ""
    failed_result: ProcessResult | None = None
    if failed is not None:
        failed_result = results[group.index(failed)]
        assert failed_result.returncode is not None
        reason = (
            f"process [{failed.spec.label}] on host {failed.spec.host} "
            f"{_describe_exit(failed_result.returncode)}"
        )
        recorded = failure_reason(failed.spec) if failure_reason is not None else None
        if recorded:
            reason += f": {recorded.strip()}"
        reason += "; the other processes were stopped"
    elif timed_out:
        reason = f"the job exceeded its time limit of {timeout:g} s and was stopped"
    elif interrupted is not None:
        reason = f"the job was interrupted by {signal.Signals(interrupted).name} and stopped"
    ok = failed is None and not timed_out and interrupted is None and all(r.returncode == 0 for r in results)
    return GroupResult(
        results=results,
        ok=ok,
        reason=reason,
        failed=failed_result,
        duration=end - start,
        timed_out=timed_out,
        interrupted=interrupted,
    )
