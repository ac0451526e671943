"""The twin's reaper: removes a job's containers, network and staged data if the twin itself dies first.

A twin that is stopped by a signal cleans up after itself. One that is killed outright (SIGKILL, an out-of-memory
kill, a closed terminal taking its process group) cannot, and its containers would run on with no time limit. So
every twin job starts this small watcher in a session of its own: it waits for the twin's process to end and, if
the twin did not dismiss it first, removes everything labelled with the job's id, the job's network, and the staged
folders it was given. The twin dismisses it (SIGTERM) once it has cleaned up by itself.

Run as ``python -m smddp_compat.local_mode.docker._reaper --pid PID --started T --docker DOCKER --job-id ID
--network NAME [--remove PATH ...]``.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["reaper_argv", "main"]

_POLL_SECONDS = 1.0
_CALL_SECONDS = 120.0


def reaper_argv(*, pid: int, started: float, docker: str, job_id: str, label: str, network: str,
                remove: Sequence[str]) -> list[str]:
    """The command that starts a reaper for the twin process ``pid`` (created at ``started``, psutil's time)."""
    argv = [sys.executable, "-m", __name__, "--pid", str(pid), "--started", repr(started), "--docker", docker,
            "--job-id", job_id, "--label", label, "--network", network]
    for path in remove:
        argv += ["--remove", path]
    return argv


def _twin_alive(pid: int, started: float) -> bool:
    import psutil

    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0  # the same process, not a reused pid
    except psutil.Error:
        return False


def _docker(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=_CALL_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode("utf-8", "replace")


def main(argv: Sequence[str] | None = None) -> int:
    """Waits for the twin to end, then removes what its job left (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="smddp-twin-reaper")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--started", type=float, required=True)
    parser.add_argument("--docker", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--network", required=True)
    parser.add_argument("--remove", action="append", default=[])
    args = parser.parse_args(argv)
    # Dismissed by the twin (it cleaned up itself): leave at once, touching nothing.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the twin is the twin's to handle
    while _twin_alive(args.pid, args.started):
        time.sleep(_POLL_SECONDS)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # from here on, finish the cleaning
    ids = _docker([args.docker, "ps", "--all", "--quiet", "--filter", f"label={args.label}={args.job_id}"]).split()
    if ids:
        _docker([args.docker, "rm", "--force", *ids])
    _docker([args.docker, "network", "rm", args.network])
    for path in args.remove:
        shutil.rmtree(path, ignore_errors=True)
    print(f"smddp twin reaper: job {args.job_id}'s twin (pid {args.pid}) ended without cleaning up; removed "
          f"{len(ids)} container(s), network {args.network}" + (f", {', '.join(args.remove)}" if args.remove else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
