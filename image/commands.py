"""Running one external command (docker, debootstrap, tar) with a time limit, its output kept in a log file.

Image builds print hundreds of lines; they go to a log file and, optionally, to a stream. What is kept in memory is
only the last lines, for the error message when the command fails.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["CommandResult", "run_command", "capture"]

_TAIL_LINES = 30


@dataclass
class CommandResult:
    """How a command ended.

    Attributes:
        returncode: Its exit code (None: stopped after the time limit).
        tail: Its last output lines.
        timed_out: True when it was stopped because the time limit passed.
    """

    argv: list[str]
    returncode: int | None
    tail: list[str]
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with code 0."""
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One message: what ended how, and the last lines of output."""
        how = "timed out" if self.timed_out else f"exited with code {self.returncode}"
        last = "\n".join(f"    {line}" for line in self.tail[-15:])
        return f"`{' '.join(self.argv[:4])}{' ...' if len(self.argv) > 4 else ''}` {how}; last output:\n{last}"


def _kill_group(popen: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(popen.pid, signal.SIGTERM)
        popen.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        popen.wait(timeout=10)


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    log_path: str | None = None,
    stream: IO[str] | None = None,
    prefix: str = "",
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | int | None = subprocess.DEVNULL,
    cwd: str | None = None,
) -> CommandResult:
    """Runs ``argv`` (a list, never a shell string) to its end or until `timeout` seconds, when its whole process
    group is stopped; returns how it ended (never raises for a non-zero exit). Its output is appended to `log_path`
    and written to `stream` with `prefix` (each when not None); `env`: the full environment (None: this process's).

    Raises:
        FileNotFoundError: The program does not exist.
    """
    tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
    log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115 - closed below
    try:
        popen = subprocess.Popen(  # noqa: S603 - argument list, no shell
            list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
        )

        def pump() -> None:
            assert popen.stdout is not None
            for raw in iter(popen.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                tail.append(line)
                if log is not None:
                    log.write(line + "\n")
                    log.flush()
                if stream is not None:
                    stream.write(prefix + line + "\n")
                    stream.flush()

        reader = threading.Thread(target=pump, name="command-output", daemon=True)
        reader.start()
        timed_out = False
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(popen)
        except BaseException:
            _kill_group(popen)
            raise
        reader.join(timeout=10)
        return CommandResult(list(argv), None if timed_out else popen.returncode, list(tail), timed_out)
    finally:
        if log is not None:
            log.close()


def capture(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> tuple[int | None, str]:
    """Runs a short command (``env``: the full environment, or None for this process's) for at most ``timeout``
    seconds: ``(returncode, stripped stdout+stderr)``; ``(None, "")`` on timeout, ``(127, message)`` when the
    program is missing."""
    try:
        done = subprocess.run(  # noqa: S603 - argument list, no shell
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
            env=dict(env) if env is not None else None, check=False,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    except FileNotFoundError as exc:
        return 127, str(exc)
    return done.returncode, done.stdout.decode("utf-8", errors="replace").strip()
