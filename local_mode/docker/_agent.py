"""The in-container side of the docker backend: PID 1 of each job container, and the wrapper of each process.

Three modes (standard library only: it runs in any image with ``python3``, including a user's own, from the kit's
folder mounted in the container)::

    python3 _agent.py idle GRACE            PID 1: keeps the container up; on SIGTERM (docker stop) sends SIGTERM to
                                            every other process of the container (kill(-1) from PID 1 reaches exactly
                                            those), SIGKILL after GRACE seconds, then exits; reaps orphans meanwhile.
    python3 _agent.py run NAME -- ARGV...   Runs ARGV (a job process, started by ``docker exec``) in its own process
                                            group, records its pid as NAME, passes SIGTERM/SIGINT on to that group,
                                            and exits with its code (killed by signal N: dies of signal N, which
                                            docker exec reports as 128+N).
    python3 _agent.py signal NAME SIGNUM    Sends SIGNUM to the process group of the process recorded as NAME.

``docker exec`` cannot signal what it started, hence ``run``/``signal``: the host side (``_exec_client.py``) turns
the SIGTERM the supervisor sends into ``signal NAME 15`` inside the container, and keeps streaming the process's
output until it has exited (a training script checkpoints on SIGTERM and says so).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

_POLL_SECONDS = 0.1
_PID_DIR = "/tmp/smddp-agent"
# Signals whose default action ends a process without a core dump: a process killed by one is reported as such.
RERAISED_SIGNALS = frozenset(
    {signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE, signal.SIGALRM,
     signal.SIGTERM}
)  # fmt: skip


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _others_alive() -> bool:
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                    state = stat.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                return True
    return False


def idle(grace: float) -> int:
    """PID 1: idles until SIGTERM or SIGINT, then stops the container's other processes."""
    stop = {"requested": False}

    def on_stop(_signum: int, _frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    while not stop["requested"]:
        _reap()
        time.sleep(0.5)
    if os.getpid() == 1:
        try:
            os.kill(-1, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _others_alive():
            _reap()
            time.sleep(_POLL_SECONDS)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap()
    return 0


def _pid_file(name: str) -> str:
    return os.path.join(_PID_DIR, "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) + ".pid")


def run(name: str, argv: list[str]) -> int:
    """Runs one job process; see the module docstring."""
    child = subprocess.Popen(argv, start_new_session=True)  # noqa: S603 - argument list
    os.makedirs(_PID_DIR, exist_ok=True)
    with open(_pid_file(name), "w", encoding="ascii") as record:
        record.write(str(child.pid))

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    try:
        os.killpg(child.pid, signal.SIGKILL)  # what the process left behind in its group
    except (ProcessLookupError, PermissionError):
        pass
    if -code in RERAISED_SIGNALS:
        # Die of the same signal, so that docker exec reports 128+N. Signals that would dump core or stop this
        # wrapper are reported as the exit code 128+N instead.
        if code != -signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    return code if code >= 0 else 128 - code


def send(name: str, signum: int) -> int:
    """Sends ``signum`` to the process group recorded as ``name``; 1 when there is none."""
    try:
        with open(_pid_file(name), encoding="ascii") as record:
            pid = int(record.read().strip())
        os.killpg(pid, signum)
    except (OSError, ValueError):
        return 1
    return 0


def main(argv: list[str]) -> int:
    """Dispatches to a mode (``idle`` when none is given)."""
    if not argv or argv[0] not in ("idle", "run", "signal"):
        return idle(float(argv[0]) if argv else 5.0)
    if argv[0] == "idle":
        return idle(float(argv[1]) if len(argv) > 1 else 5.0)
    if argv[0] == "signal":
        return send(argv[1], int(argv[2]))
    separator = argv.index("--")
    return run(argv[1], argv[separator + 1 :])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
