"""Supervision of a group of processes that form one job.

The group lives and dies together, as ranks under ``mpirun`` do: output is streamed line by line with a prefix,
and the first process that fails (or a timeout, or a signal to the supervisor) stops all the others, with SIGTERM
to each process group and SIGKILL after ``grace`` seconds. Nothing is left running, whatever happens on the way:

* The stop signals (:data:`STOP_SIGNALS`: SIGINT, SIGTERM, SIGHUP, SIGQUIT) are only noted by the signal handler,
  never raised from it, so a signal cannot break off a start or a stop half done; the supervisor's loops act on the
  note. A signal while a stop waits out its grace period ends the wait at once (SIGKILL).
* A launcher killed outright (SIGKILL) cannot stop anything: its lifeline watcher (:mod:`._lifeline`) does.
* Output is drained from every process until it ends: a console that cannot be written any more (``smddprun ... |
  head -1``) is dropped and the log files go on; a log file that cannot be written (a full disk) is dropped and the
  console goes on; each failure is told once on standard error. No process blocks on a full pipe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Iterator, Sequence

import psutil

from smddp_compat.errors import LaunchError, UsageError
from smddp_compat.launcher._console import ConsoleStream, notice, why
from smddp_compat.launcher._lifeline import DISMISS, lifeline_argv
from smddp_compat.launcher._option_types import is_positive_seconds
from smddp_compat.launcher._own_network import OwnNetwork, own_network as job_network

__all__ = [
    "ProcessSpec", "ProcessResult", "GroupResult", "OutputRoute", "STOP_SIGNALS", "StopSignalled", "run_process_group",
    "describe_failure", "memory_note", "oom_kill_count", "stop_signals_raise", "private_tmpdir",
]

#: The signals that stop a job as a stop from outside does (Ctrl-C, a stop, a closed terminal, Ctrl-backslash): each is
#: only noted by the handler, and the job ends with exit code 128 + the signal.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

class StopSignalled(Exception):
    """A stop signal that arrived while a job was being prepared, before its processes are supervised: raised from
    the handler :func:`stop_signals_raise` installs, caught by the code that installed it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_signals_handled(on_signal: Callable[[int, object], None]) -> Iterator[None]:
    """Within the block, each of :data:`STOP_SIGNALS` calls ``on_signal`` (from the main thread only: elsewhere
    nothing is installed, signals being the main thread's); the previous handlers come back when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within the block (from the main thread), each of :data:`STOP_SIGNALS` raises :class:`StopSignalled`.

    For the preparation of a job: nothing runs yet that a stop must wait for, and the code that prepares cleans up
    in its ``finally`` blocks. :func:`run_process_group` installs its own handlers while it supervises.
    """
    def on_signal(signum: int, _frame: object) -> None:
        raise StopSignalled(signum)

    with stop_signals_handled(on_signal):
        yield


@contextlib.contextmanager
def stop_signals_noted() -> Iterator[list[int]]:
    """Within the block (from the main thread), each of :data:`STOP_SIGNALS` is only appended to the list it yields,
    never raised where the code happens to be: for a loop that acts on a stop at its next step (a tuning job)."""
    heard: list[int] = []
    with stop_signals_handled(lambda signum, _frame: heard.append(signum)):
        yield heard


#: For a process carrying several ranks' output (mpirun): called with each line it prints (None at the end of its
#: output), returns the lines that are complete, each as (label of its prefix, text, log file or None).
OutputRoute = Callable[["str | None"], "list[tuple[str, str, str | None]]"]

#: The longest piece of a process's output held at once: a longer line (a progress bar without newlines, a dumped
#: array) is passed on in pieces of this size, each saying so, so memory stays bounded whatever a process prints.
MAX_LINE_BYTES = 1 << 20

_POLL_SECONDS = 0.05
# After the processes were reaped: how long the output of all of them together may take to be written out.
_PUMP_JOIN_SECONDS = 5.0
# After SIGKILL: how long to wait, for all processes together, until each is reaped (a process in the middle of an
# uninterruptible system call takes a moment; one that never returns must not hold the launcher for ever).
_REAP_SECONDS = 5.0


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
        route_output: For a process carrying several ranks' output: where each line goes (its label and log
            file replace ``label`` and ``log_path``); None for a process that is one rank.
        console_hides: Lines for which it returns True go to the log file but not to the console (e.g.
            :func:`~smddp_compat.launcher.tensorflow_log_filter`); None shows every line.
        serves: A server beside the job's programs (a parameter server): once every other process has exited 0,
            it is stopped and the job has succeeded, whether or not anything used it (SageMaker's TensorFlow
            toolkit ends a host when its script ends). Exiting non-zero before that still fails the job.
        enter: A command that joins the process's namespaces, then runs ``argv`` (e.g. ``nsenter --target PID
            --mount --``: a local host's own ``/opt/ml``); empty for none. Never part of the command shown.
    """

    argv: list[str]
    env: dict[str, str]
    label: str
    cwd: str | None = None
    log_path: str | None = None
    host: str = "localhost"
    route_output: OutputRoute | None = None
    console_hides: Callable[[str], bool] | None = None
    serves: bool = False
    enter: tuple[str, ...] = ()

    @property
    def command(self) -> list[str]:
        """What is run: :attr:`enter`, then :attr:`argv`."""
        return [*self.enter, *self.argv]

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
        ok: True when every process exited with code 0 (a server, :attr:`ProcessSpec.serves`, also when it was
            stopped after the others had).
        reason: Empty when ok; otherwise what went wrong first, naming the process and host.
        failed: The process that failed first, or None (success, timeout or interruption).
        duration: Seconds from the first start to the last exit.
        timed_out: True when the group was stopped because ``timeout`` passed.
        interrupted: The signal number that stopped the group (one of :data:`STOP_SIGNALS`), or None.
        oom_kills: How many processes the kernel's out-of-memory killer ended in the job's memory cgroup while the
            group ran (None: the count cannot be read here).
    """

    results: list[ProcessResult]
    ok: bool
    reason: str
    failed: ProcessResult | None
    duration: float
    timed_out: bool = False
    interrupted: int | None = None
    oom_kills: int | None = None

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


class _LogFiles:
    """The log files one process's output goes to, opened on first use; a file that fails once is dropped."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes] | None] = {}  # None: failed, written no more
        self._lock = threading.Lock()
        self._closed = False

    def open(self, path: str) -> None:
        """Opens ``path`` now (the process's own log, before it starts).

        Raises:
            OSError: It cannot be opened.
        """
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._files[path] = open(path, "ab")  # noqa: SIM115 - closed by close()

    def write(self, path: str | None, label: str, text: str) -> None:
        if path is None:
            return
        with self._lock:
            if self._closed:
                return
            if path not in self._files:
                try:
                    self.open(path)
                except OSError as exc:
                    self._drop(path, label, exc)
                    return
            log = self._files[path]
            if log is None:
                return
            try:
                log.write(text.encode("utf-8", errors="replace") + b"\n")
                log.flush()
            except (OSError, ValueError) as exc:  # a full disk, the file-size limit
                self._drop(path, label, exc)

    def _drop(self, path: str, label: str, exc: BaseException) -> None:
        log = self._files.get(path)
        self._files[path] = None
        if log is not None:
            with contextlib.suppress(OSError, ValueError):  # closing flushes what did not fit: it fails again
                log.close()
        notice(
            f"cannot write the log file {path} ({why(exc)}); the output of [{label}] still goes to the console, "
            "this file misses it from here on"
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for log in self._files.values():
                if log is not None:
                    with contextlib.suppress(OSError, ValueError):
                        log.close()


@dataclass
class _Running:
    spec: ProcessSpec
    popen: subprocess.Popen
    started: float
    pump: threading.Thread
    logs: _LogFiles
    ended: float | None = None
    descendants: list[psutil.Process] = field(default_factory=list)
    line_errors: int = 0


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def oom_kill_count() -> int | None:
    """How many processes the kernel's out-of-memory killer has ended in this process's memory cgroup (cgroup v2's
    ``memory.events`` or v1's ``memory.oom_control``), or None when neither can be read."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as handle:
            entries = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
    except OSError:
        return None
    candidates = [f"/sys/fs/cgroup{path}/memory.events" for _, controllers, path in entries if not controllers]
    candidates += [f"/sys/fs/cgroup/memory{path}/memory.oom_control" for _, controllers, path in entries
                   if "memory" in controllers.split(",")]
    for candidate in candidates:
        try:
            with open(candidate, encoding="ascii") as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def memory_note(oom_kills: int | None, returncode: int | None) -> str:
    """What a failure's reason adds about memory: the kernel's out-of-memory killer ended processes of the job's
    memory cgroup while it ran (``oom_kills`` > 0), or, when that cannot be told, that a SIGKILL nobody in the job
    sent is most often that killer."""
    if oom_kills:
        return (f"; the kernel's out-of-memory killer ended {oom_kills} process(es) while the job ran: it needs more "
                "memory than it has (fewer processes per host, smaller batches, or a machine with more memory)")
    if oom_kills is None and returncode == -signal.SIGKILL:
        return "; a SIGKILL the job did not send is most often the kernel's out-of-memory killer (see dmesg)"
    return ""


def describe_failure(spec: ProcessSpec, returncode: int, recorded: str | None) -> str:
    """The reason a job failed, naming the process that failed first and what it recorded (its failure file)."""
    reason = f"process [{spec.label}] on host {spec.host} {_describe_exit(returncode)}"
    if recorded:
        reason += f": {recorded.strip()}"
    return reason + "; the other processes were stopped"


def _write_line(running: _Running, console: ConsoleStream, label: str, text: str, log_path: str | None) -> None:
    running.logs.write(log_path, label, text)
    if running.spec.console_hides is not None and running.spec.console_hides(text):
        return
    console.write(f"[{label}] {text}\n")


def _handle_output(running: _Running, console: ConsoleStream, text: str | None) -> None:
    """One line of a process's output (None: its output ended) to the log files and the console."""
    route = running.spec.route_output
    if route is None:
        if text is not None:
            _write_line(running, console, running.spec.label, text, running.spec.log_path)
        return
    for label, line, log_path in route(text):
        _write_line(running, console, label, line, log_path)


def _line_text(raw: bytes) -> str:
    """One line of output as text; a piece of a line longer than :data:`MAX_LINE_BYTES` says that it was cut."""
    text = raw.decode("utf-8", errors="replace")
    if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
        return text + f" [line longer than {MAX_LINE_BYTES} bytes: cut here, continued on the next line]"
    return text.rstrip("\r\n")


def _pump_output(running: _Running, console: ConsoleStream) -> None:
    """Drains a process's output until it ends: nothing that goes wrong with a line stops the draining, or the
    process would block on a full pipe and the job hang."""
    stdout = running.popen.stdout
    assert stdout is not None
    try:
        # None after the last line: a route then gives back the lines still unfinished.
        for raw in itertools.chain(iter(lambda: stdout.readline(MAX_LINE_BYTES), b""), [None]):
            try:
                _handle_output(running, console, None if raw is None else _line_text(raw))
            except Exception as exc:  # noqa: BLE001 - a failing route or filter (a bug) must not stop the draining
                running.line_errors += 1
                if running.line_errors == 1:
                    notice(f"could not pass on a line of [{running.spec.label}]'s output ({exc!r}); its output is "
                            "still read, lines that fail so are dropped")
    finally:
        stdout.close()


def _signal_group(running: _Running, signum: int) -> None:
    try:
        os.killpg(running.popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants_elsewhere(running: _Running) -> list[psutil.Process]:
    """Live descendants of a process that are not in its process group (mpirun gives each rank its own)."""
    try:
        children = psutil.Process(running.popen.pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for child in children:
        try:
            if os.getpgid(child.pid) != running.popen.pid:
                out.append(child)
        except OSError:
            pass
    return out


def _stop_all(group: list[_Running], grace: float, signals: list[int], heeded: int) -> int | None:
    """SIGTERM every live process group, SIGKILL what is left after ``grace`` s, reap everything.

    ``signals`` are those received so far (the handler appends to it while this runs), ``heeded`` how many of them
    this stop already answers: one more ends the grace period at once, and is returned (else None).
    """
    for running in group:
        if running.popen.poll() is None:
            running.descendants = _descendants_elsewhere(running)
            _signal_group(running, signal.SIGTERM)
    cut: int | None = None
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(r.popen.poll() is None for r in group):
        if len(signals) > heeded:
            cut = signals[heeded]
            break
        time.sleep(_POLL_SECONDS)
    for running in group:
        # Kill the whole group even if its leader is gone: children it forked may still hold resources.
        _signal_group(running, signal.SIGKILL)
        for child in running.descendants:
            with contextlib.suppress(psutil.Error):
                child.kill()
    reaped_by = time.monotonic() + _REAP_SECONDS
    for running in group:
        try:
            running.popen.wait(timeout=max(0.0, reaped_by - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    return cut


class _Lifeline:
    """The watcher that ends the group's processes if this launcher dies without doing so (:mod:`._lifeline`)."""

    def __init__(self, grace: float, remove: Sequence[str]) -> None:
        try:
            self._watcher: subprocess.Popen[str] | None = subprocess.Popen(  # noqa: S603 - argv is a list
                lifeline_argv(os.getpid(), grace, remove), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                text=True, start_new_session=True)
        except OSError as exc:
            self._watcher = None
            notice(f"could not start the lifeline watcher ({why(exc)}); if this launcher is killed outright "
                   "(SIGKILL), its processes will go on running")

    def note(self, pid: int) -> None:
        """Tells the watcher about a process just started."""
        self._send(f"{pid}\n")

    def dismiss(self) -> None:
        """Every process was reaped: the watcher leaves, touching nothing."""
        self._send(f"{DISMISS}\n")
        if self._watcher is not None:
            with contextlib.suppress(OSError):
                self._watcher.stdin.close()  # type: ignore[union-attr]
            try:
                self._watcher.wait(timeout=_REAP_SECONDS)
            except subprocess.TimeoutExpired:
                self._watcher.kill()
                self._watcher.wait()

    def _send(self, line: str) -> None:
        if self._watcher is None:
            return
        try:
            self._watcher.stdin.write(line)  # type: ignore[union-attr]
            self._watcher.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):
            pass  # the watcher is gone: the processes are still ours to stop, as before


@contextlib.contextmanager
def private_tmpdir(specs: Sequence[ProcessSpec]) -> Iterator[tuple[list[ProcessSpec], str]]:
    """The specs with ``TMPDIR`` set to one fresh folder of the job's own, and that folder; removed with all it holds
    when the block ends. What the processes leave in their temporary folder is then gone with the job, also when they
    were killed before their own clean-up ran (TensorFlow's autograph writes a ``__autograph_generated_file*.py`` per
    converted function and removes it only at a normal exit). The folder is made inside the ``TMPDIR`` the processes
    were given (a job's own choice of disk stays its choice), else inside this process's temporary folder."""
    given = next((spec.env["TMPDIR"] for spec in specs if spec.env.get("TMPDIR")), None)
    directory = tempfile.mkdtemp(prefix="smddp-tmp-", dir=given if given and os.path.isdir(given) else None)
    try:
        yield [dataclasses.replace(spec, env={**spec.env, "TMPDIR": directory}) for spec in specs], directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _start(spec: ProcessSpec, console: ConsoleStream, lifeline: _Lifeline, network: OwnNetwork | None) -> _Running:
    logs = _LogFiles()
    if spec.log_path:
        try:
            logs.open(spec.log_path)
        except OSError as exc:
            raise LaunchError(
                f"could not open the log file {spec.log_path} of process [{spec.label}]: {why(exc)}. Give a log "
                "folder that can be written (a folder, not a file; on a disk with room)."
            ) from exc
    try:
        popen = subprocess.Popen(  # noqa: S603 - argv is a list, no shell
            network.enter(spec.command, spec.env) if network is not None else spec.command, env=spec.env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        logs.close()
        raise LaunchError(
            f"could not start process [{spec.label}] on {spec.host}: {exc.strerror or exc} "
            f"(command: {spec.argv!r}). Check that the program exists and is executable."
        ) from exc
    lifeline.note(popen.pid)
    running = _Running(spec=spec, popen=popen, started=time.monotonic(), pump=threading.Thread(), logs=logs)
    running.pump = threading.Thread(target=_pump_output, args=(running, console), name=f"pump-{spec.label}",
                                    daemon=True)
    running.pump.start()
    return running


def run_process_group(
    specs: Sequence[ProcessSpec],
    *,
    timeout: float | None = None,
    grace: float = 5.0,
    stream: IO[str] | None = None,
    failure_reason: Callable[[ProcessSpec], str | None] | None = None,
    remove_if_killed: Sequence[str] = (),
    own_network: bool = False,
    stop: threading.Event | None = None,
) -> GroupResult:
    """Runs processes as one job: all succeed, or all are stopped.

    Args:
        specs: The processes to start, in rank order.
        timeout: Seconds after which the whole group is stopped (None: no limit).
        grace: Seconds between SIGTERM and SIGKILL when the group is stopped.
        stream: Where prefixed output goes (default: ``sys.stdout``).
        failure_reason: Called with the spec of the first failed process; returns the reason it recorded
            (e.g. its failure file) or None.
        remove_if_killed: Folders the lifeline watcher removes if this launcher is killed outright (its own
            cleanup never runs then). The job's temporary folder (:func:`private_tmpdir`, each process's
            ``TMPDIR``) is always among them.
        own_network: Run the processes in a network of the job's own (:mod:`._own_network`): whatever they serve
            is reachable from the job only, never from another machine. For processes that all run on this
            machine and reach no server of the launcher's; where no such network can be made, they run on this
            machine's network and a warning says why.
        stop: Set from another thread to stop the group as a SIGTERM to this launcher would (SageMaker's
            StopTrainingJob: the group ends ``interrupted`` by SIGTERM, its reason saying it was asked to stop).

    Returns:
        How the group ended. A stop signal while the group is stopped (after a failure, after the time limit,
        or after a first signal) ends the grace period at once; the reason says so, and the exit code stays that
        of what stopped the group first.

    Raises:
        UsageError: No specs, or a timeout or grace that is not a finite number of seconds > 0.
        LaunchError: A process could not be started (the ones already started are stopped first).
    """
    if not specs:
        raise UsageError("run_process_group needs at least one ProcessSpec, got none.")
    if timeout is not None and not is_positive_seconds(timeout):
        raise UsageError(
            f"timeout must be a positive number of seconds or None, got {timeout!r}: give a finite number > 0, or "
            "None for no limit."
        )
    if not is_positive_seconds(grace):
        raise UsageError(
            f"grace must be a positive number of seconds, got {grace!r}: give a finite number > 0, e.g. 5."
        )
    with private_tmpdir(specs) as (job_specs, job_tmp), \
            (job_network(notice) if own_network else contextlib.nullcontext()) as network:
        return _supervise(job_specs, timeout, grace, stream, failure_reason, [job_tmp, *remove_if_killed], network,
                          stop)


def _asked_to_stop(stop: threading.Event | None, signals: list[int]) -> bool:
    """Whether ``stop`` was set; if so, notes it in ``signals`` as the SIGTERM it stands for."""
    if stop is None or not stop.is_set():
        return False
    signals.append(signal.SIGTERM)
    return True


def _supervise(specs: Sequence[ProcessSpec], timeout: float | None, grace: float, stream: IO[str] | None,
               failure_reason: Callable[[ProcessSpec], str | None] | None,
               remove_if_killed: Sequence[str], network: OwnNetwork | None,
               stop: threading.Event | None) -> GroupResult:
    """:func:`run_process_group`'s work, its arguments checked, each process given the job's temporary folder and
    started in ``network`` (None: this machine's)."""
    console = ConsoleStream(stream if stream is not None else sys.stdout)
    group: list[_Running] = []
    failed: _Running | None = None
    timed_out = False
    interrupted: int | None = None
    cut: int | None = None
    try:
        # A stop signal is only noted, never raised: an exception from a handler would surface wherever the main
        # thread happens to be (a process created but not yet in `group`, a stop half done) and leave processes
        # running. The previous handlers are back before the output pumps are joined.
        with stop_signals_noted() as signals:
            lifeline = _Lifeline(grace, remove_if_killed)
            start = time.monotonic()
            oom_kills_before = oom_kill_count()
            try:
                try:
                    for spec in specs:
                        if signals or _asked_to_stop(stop, signals):
                            break  # asked to stop: start no more
                        group.append(_start(spec, console, lifeline, network))
                    while not signals and not _asked_to_stop(stop, signals):
                        live = 0
                        for running in group:
                            code = running.popen.poll()
                            if code is None:
                                live += not running.spec.serves
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
                    else:
                        interrupted = signals[0]
                except BaseException:
                    _stop_all(group, grace, signals, heeded=len(signals))
                    raise
                # The signal that stopped the group is answered by this stop; any further one (or, for a failure
                # or a time-out, any one at all) cuts its grace period short.
                cut = _stop_all(group, grace, signals, heeded=1 if interrupted is not None else len(signals))
            finally:
                lifeline.dismiss()
    finally:
        joined_by = time.monotonic() + _PUMP_JOIN_SECONDS
        for running in group:
            running.pump.join(timeout=max(0.0, joined_by - time.monotonic()))
            running.logs.close()

    end = time.monotonic()
    results = [
        ProcessResult(spec=r.spec, returncode=r.popen.returncode, duration=(r.ended or end) - r.started)
        for r in group
    ]
    oom_kills_after = oom_kill_count()
    oom_kills = None if oom_kills_before is None or oom_kills_after is None else oom_kills_after - oom_kills_before
    reason = ""
    failed_result: ProcessResult | None = None
    if failed is not None:
        failed_result = results[group.index(failed)]
        assert failed_result.returncode is not None
        recorded = failure_reason(failed.spec) if failure_reason is not None else None
        reason = describe_failure(failed.spec, failed_result.returncode, recorded)
        reason += memory_note(oom_kills, failed_result.returncode)
    elif timed_out:
        reason = f"the job exceeded its time limit of {timeout:g} s and was stopped"
    elif interrupted is not None and stop is not None and stop.is_set() and interrupted == signal.SIGTERM:
        reason = "the job was asked to stop (StopTrainingJob) and stopped"
    elif interrupted is not None:
        reason = f"the job was interrupted by {signal.Signals(interrupted).name} and stopped"
    if cut is not None:
        reason += f"; {signal.Signals(cut).name} during the stop: what was left was killed at once (SIGKILL)"
    ok = failed is None and not timed_out and interrupted is None and all(
        r.returncode == 0 for r in results if not r.spec.serves)
    return GroupResult(results, ok, reason, failed_result, end - start, timed_out=timed_out, interrupted=interrupted,
                       oom_kills=oom_kills)
