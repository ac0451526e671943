"""The lifeline: a launcher's processes end when the launcher dies, however it dies.

A launcher stopped by a signal stops its processes itself (:mod:`._supervisor`); one killed outright (SIGKILL, an
out-of-memory kill) cannot, and its processes live in sessions of their own. So each process group first starts
this watcher, in its own session, reading a pipe from the launcher: the PID of every process started, then ``done``
once all are reaped. It notes those processes and, every quarter second, their descendants (mpirun's ranks have
process groups of their own). If the pipe ends without ``done`` (the kernel closed the dead launcher's end), it
sends SIGTERM to every process and group it noted, SIGKILL after the grace period, and removes the folders it was
given, as horovodrun's middleman process does. Run by path (:func:`lifeline_argv`), importing nothing of the kit,
so it starts in tens of milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

import psutil

__all__ = ["lifeline_argv", "DISMISS", "main"]

#: The line the launcher writes once it has reaped every process: the watcher then leaves, touching nothing.
DISMISS = "done"

_POLL_SECONDS = 0.25
# The grace period a watcher gives the processes, at most: it runs after the launcher died, with no one to wait for.
_MAX_GRACE_SECONDS = 10.0


def lifeline_argv(launcher_pid: int, grace: float, remove: Sequence[str] = ()) -> list[str]:
    """The command that starts a watcher for the launcher ``launcher_pid``."""
    argv = [sys.executable, "-I", os.path.abspath(__file__), "--launcher", str(launcher_pid), "--grace", repr(grace)]
    for path in remove:
        argv += ["--remove", path]
    return argv


class _Watched:
    """The processes the watcher will end: each (pid, creation time), so a PID reused later is never touched."""

    def __init__(self) -> None:
        self.processes: dict[int, float] = {}
        self.groups: set[int] = set()
        self._lock = threading.Lock()

    def add(self, pid: int, *, leader: bool) -> None:
        with contextlib.suppress(psutil.Error), self._lock:
            if pid not in self.processes:
                self.processes[pid] = psutil.Process(pid).create_time()
            if leader:
                self.groups.add(pid)  # started in a session of its own: its PID is its process group's

    def add_descendants(self, roots: Sequence[int]) -> None:
        for root in roots:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(root).children(recursive=True):
                    self.add(child.pid, leader=False)

    def alive(self) -> list[psutil.Process]:
        live = []
        with self._lock:
            items = list(self.processes.items())
        for pid, created in items:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                if abs(process.create_time() - created) < 0.01 and process.status() != psutil.STATUS_ZOMBIE:
                    live.append(process)
        return live

    def signal_groups(self, signum: int) -> None:
        for group in sorted(self.groups):
            with contextlib.suppress(OSError):
                os.killpg(group, signum)

    def signal_all(self, signum: int) -> None:
        self.signal_groups(signum)
        for process in self.alive():
            with contextlib.suppress(psutil.Error):
                process.send_signal(signum)


def _wait(processes: Callable[[], list[psutil.Process]], deadline: float) -> None:
    while processes() and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS / 5)


def _read_pipe(watched: _Watched, dismissed: threading.Event, ended: threading.Event) -> None:
    for line in sys.stdin:
        word = line.strip()
        if word == DISMISS:
            dismissed.set()
        elif word.isdigit():
            watched.add(int(word), leader=True)
    ended.set()


def main(argv: Sequence[str] | None = None) -> int:
    """Watches the launcher's pipe; ends the noted processes if the launcher dies (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="smddp-lifeline")
    parser.add_argument("--launcher", type=int, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--remove", action="append", default=[])
    args = parser.parse_args(argv)
    # Signals meant for the launcher (a Ctrl-C, a closed terminal) are the launcher's to answer.
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    watched = _Watched()
    dismissed, ended = threading.Event(), threading.Event()
    threading.Thread(target=_read_pipe, args=(watched, dismissed, ended), daemon=True).start()
    while not ended.wait(_POLL_SECONDS):
        watched.add_descendants(list(watched.processes))
    if dismissed.is_set():
        return 0
    watched.add_descendants(list(watched.processes))
    stopped = len(watched.alive())
    deadline = time.monotonic() + min(max(args.grace, 0.0), _MAX_GRACE_SECONDS)
    # The processes the launcher started first: mpirun then stops its ranks and removes its session folder itself.
    watched.signal_groups(signal.SIGTERM)
    _wait(lambda: [p for p in watched.alive() if p.pid in watched.groups], deadline)
    watched.signal_all(signal.SIGTERM)
    _wait(watched.alive, deadline)
    watched.signal_all(signal.SIGKILL)
    for path in args.remove:
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):  # the launcher's terminal may be gone with it
        print(f"smddp lifeline: the launcher (pid {args.launcher}) died without stopping its processes; stopped "
              f"{stopped} process(es)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
