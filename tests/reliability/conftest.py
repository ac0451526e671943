"""Shared helpers of the reliability tests: running smddprun and ``smddp``, and counting what a job leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil
import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"
REPO = Path(__file__).resolve().parents[2]


def quiet_env(**extra: str) -> dict[str, str]:
    """This environment with TensorFlow's C++ logging off and unbuffered Python output."""
    env = dict(os.environ)
    env.update({"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def smddprun(*args: str) -> list[str]:
    """The argv of ``smddprun args...`` (as the console script runs it)."""
    return [sys.executable, "-m", "smddp_compat.launcher", *args]


def smddp(*args: str) -> list[str]:
    """The argv of ``smddp args...`` (what the console script runs: ``smddp_compat.commands.cli:main``)."""
    return [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; sys.exit(main())", *args]


@dataclass
class Launched:
    """A finished launcher process."""

    returncode: int
    stdout: str
    stderr: str
    ended: float  # time.time() when it exited
    descendants: set[int]  # every pid seen below it while it ran

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def launch(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 180, cwd: str | None = None,
           on_line: Callable[[str], None] | None = None) -> Launched:
    """Runs a launcher, records every descendant it starts, and calls ``on_line(line)`` for each stdout line.

    Raises:
        subprocess.TimeoutExpired: The launcher did not end within ``timeout`` (its whole group is killed first).
    """
    proc = subprocess.Popen(argv, env=env or quiet_env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    me = psutil.Process(proc.pid)
    descendants: set[int] = set()
    out: list[str] = []
    err: list[str] = []

    def watch_children() -> None:
        while proc.poll() is None:
            try:
                descendants.update(p.pid for p in me.children(recursive=True))
            except psutil.Error:
                pass
            time.sleep(0.1)

    def read(stream: IO[str], lines: list[str], callback: Callable[[str], None] | None) -> None:
        for line in stream:
            lines.append(line)
            if callback is not None:
                callback(line.rstrip("\n"))

    assert proc.stdout is not None and proc.stderr is not None
    threads = [
        threading.Thread(target=watch_children, daemon=True),
        threading.Thread(target=read, args=(proc.stdout, out, on_line), daemon=True),
        threading.Thread(target=read, args=(proc.stderr, err, None), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        raise
    ended = time.time()
    for thread in threads:
        thread.join(timeout=10)
    return Launched(proc.returncode, "".join(out), "".join(err), ended, descendants)


def alive(pids: set[int]) -> list[psutil.Process]:
    """The processes of ``pids`` still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                out.append(process)
        except psutil.NoSuchProcess:
            pass
    return out


def processes_running(marker: str) -> list[psutil.Process]:
    """Every process on the machine whose command line mentions ``marker``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if process.pid != os.getpid() and any(marker in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            pass
    return found


@pytest.fixture
def private_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private temporary folder for this test and its subprocesses (tempfile.tempdir and TMPDIR)."""
    private = tmp_path_factory.mktemp("private-tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    yield private
