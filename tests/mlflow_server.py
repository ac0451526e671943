"""A real MLflow tracking server on loopback for the tests: ``mlflow server`` (one worker, no job runner) on a free
port, its store in a folder of the test's; stopped with its process group. It can be stopped and started again on
the same port and store (a server that goes away mid-job)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from smddp_compat.commands.doctor import mlflow_server_executable

__all__ = ["MlflowServer"]

_READY_SECONDS = 90.0
# The checkout these tests are in (also when the kit under test is installed elsewhere, as in .venv-sdk3).
_CHECKOUT = Path(__file__).resolve().parents[1]


class MlflowServer:
    """``mlflow server --backend-store-uri sqlite:///FOLDER/mlflow.db`` on ``127.0.0.1:PORT``.

    Attributes:
        folder: Its store and artifacts.
        port: Its port (chosen free when it first starts, kept across restarts).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """Its tracking URI."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MlflowServer:
        """Starts it and waits until ``/health`` answers (at most 90 s)."""
        if not self.port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
        self.folder.mkdir(parents=True, exist_ok=True)
        mlflow = mlflow_server_executable(_CHECKOUT)
        if not mlflow.exists():
            raise RuntimeError(f"{mlflow} is missing: the tracking server's environment; `bash setup.sh` makes it")
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - kept open while the server runs
        self._process = subprocess.Popen(
            [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, stdout=log, stderr=log,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + _READY_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(self.folder / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:  # noqa: S310 - loopback
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer in {_READY_SECONDS:.0f} s")

    def stop(self) -> None:
        """Stops its whole process group (at most 20 s, then killed)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
