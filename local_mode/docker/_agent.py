"""PID 1 of each job container: keeps the container up while the job's processes run in it, stops them on request.

The docker backend starts the job's processes with ``docker exec``; they are not this process's children, so a
plain init would not pass signals on to them. On SIGTERM (``docker stop``) this agent sends SIGTERM to every other
process of the container (``kill(-1)`` from PID 1 reaches exactly those), waits up to ``grace`` seconds for them to
end (a training script checkpoints on SIGTERM), then SIGKILLs what is left and exits. It also reaps the orphans a
PID 1 inherits.

Standard library only: it runs in any image that has ``python3``, including a user's own (``--image``), from the
kit's folder mounted in the container (``python3 /opt/smddp-kit/local_mode/docker/_agent.py GRACE``).
"""

from __future__ import annotations

import os
import signal
import sys
import time

_POLL_SECONDS = 0.1


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


def main(argv: list[str]) -> int:
    """Idles until SIGTERM or SIGINT, then stops the container's other processes.

    Args:
        argv: ``[GRACE]``: seconds between SIGTERM and SIGKILL (default 5).

    Returns:
        0.
    """
    grace = float(argv[0]) if argv else 5.0
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
