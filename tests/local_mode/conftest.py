"""Fixtures for the local_mode tests: the test entry points, a clean output folder, leak checks, moto's S3 server."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture
def scripts_dir() -> Path:
    """The folder of the purpose-made entry points (used as source_dir)."""
    return SCRIPTS


@pytest.fixture
def no_leftover_job_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Gives the test a private temporary folder (TMPDIR too, for subprocesses) and fails the test if local_mode
    leaves anything in it. Private, because other jobs on the machine create their own temporary folders."""
    private = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    yield
    left = sorted(p.name for p in private.iterdir())
    assert left == [], f"local_mode left temporary files behind: {left}"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (real HTTP), with AWS_ENDPOINT_URL and fake credentials set; yields its URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield url
    finally:
        server.stop()
