"""Helpers shared by the docker backend's tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import inspect
import io
import os
import tempfile
from pathlib import Path
from typing import IO
from unittest import mock

import smddp_compat.launcher
from local_mode import JobSpec, run
from local_mode.docker import DockerBackend, Engine
from local_mode.docker._commands import capture
from local_mode.docker._compose import JOB_LABEL
from local_mode.result import JobResult

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
LOCAL_MODE_SCRIPTS = ROOT / "tests" / "local_mode" / "scripts"
ENTRY_POINTS = ROOT / "entry_points"
BUILD_LOG = os.path.join(tempfile.gettempdir(), "smddp-docker-image-build.log")


def run_in_docker(spec: JobSpec, backend: DockerBackend, live: IO[str] | None = None) -> tuple[JobResult, str]:
    """Runs a local_mode job with the docker backend; returns its result and everything it printed.

    With ``live``, the output goes there as it comes instead (and the returned text is empty).

    Through ``run(spec, backend=...)`` once local_mode's runner takes a backend; until then the backend's
    ``run_process_group`` (same signature) takes the place of the launcher's for the job.
    """
    stream = live if live is not None else io.StringIO()
    captured = (lambda: "") if live is not None else stream.getvalue  # type: ignore[union-attr]
    if "backend" in inspect.signature(run).parameters:
        return run(spec, stream=stream, backend=backend), captured()
    with mock.patch.object(smddp_compat.launcher, "run_process_group", backend.run_process_group):
        result = run(spec, stream=stream)
    return result, captured()


def job_containers(engine: Engine) -> list[str]:
    """IDs of every container (running or not) labelled as a docker-backend job's."""
    code, output = capture([engine.docker, "ps", "--all", "--quiet", "--filter", f"label={JOB_LABEL}"], timeout=60)
    assert code == 0, output
    return output.split()
