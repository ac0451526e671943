"""The host side of one job process in a container: runs its ``docker exec`` and turns signals into the container's.

The supervisor (``smddp_compat.launcher.run_process_group``) stops a process by sending SIGTERM to its process group,
then SIGKILL after its grace period. A bare ``docker exec`` client would exit at once on SIGTERM, leaving the process
running in the container and its last output unread. This wrapper instead::

    python3 -I _exec_client.py DOCKER CONTAINER NAME GRACE AGENT -- DOCKER_EXEC_ARGV...

starts the client in its own session (out of reach of the group's signals; its output goes straight to ours), and on
SIGTERM/SIGINT runs ``docker exec CONTAINER python3 AGENT signal NAME SIGNUM`` (AGENT: ``_agent.py``'s path there) so that the process itself gets
the signal, then keeps waiting: the process's output keeps flowing until it exits. Shortly before GRACE has passed it
SIGKILLs the process the same way and ends the client, so nothing outlives the supervisor's own deadline. It exits
with the client's code, except that 128+N (how docker reports a process killed by signal N) makes it die of signal
N itself, so that the supervisor reports "killed by signal N" as it does for a process run directly.

Standard library only, run by path: it starts in milliseconds and imports nothing of the kit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

# The in-container agent sits beside this file; it is imported by path (this script runs isolated, python3 -I).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _agent import RERAISED_SIGNALS  # noqa: E402

_POLL_SECONDS = 0.05
_SIGNAL_SECONDS = 10.0


def _signal_in_container(docker: str, container: str, agent: str, name: str, signum: int) -> None:
    try:
        subprocess.run(  # noqa: S603 - argument list
            [docker, "exec", container, "python3", agent, "signal", name, str(int(signum))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_SIGNAL_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        pass


def main(argv: list[str]) -> int:
    """Runs the client; see the module docstring."""
    docker, container, name, grace_text, agent = argv[:5]
    client_argv = argv[argv.index("--") + 1 :]
    grace = float(grace_text)
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    client = subprocess.Popen(client_argv, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603
    forwarded = 0
    kill_at: float | None = None
    try:
        while client.poll() is None:
            if len(received) > forwarded:
                _signal_in_container(docker, container, agent, name, received[forwarded])
                forwarded = len(received)
                if kill_at is None:
                    kill_at = time.monotonic() + max(grace - 1.0, 0.5)
            if kill_at is not None and time.monotonic() >= kill_at:
                _signal_in_container(docker, container, agent, name, signal.SIGKILL)
                try:
                    client.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    client.kill()
                break
            time.sleep(_POLL_SECONDS)
    finally:
        if client.poll() is None:
            client.kill()
        client.wait()
    code = client.returncode
    if code < 0:
        code = 128 - code
    if code - 128 in RERAISED_SIGNALS:
        _die_of(code - 128)
    return code


def _die_of(signum: int) -> None:
    """Ends this process by signal ``signum`` (returns only if that signal cannot end it)."""
    try:
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except (OSError, ValueError):
        return
    time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
