"""Without a Docker engine the docker-backend tests do not vanish: the summary counts them, and CI fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[1]
ONE_DOCKER_TEST = "tests/docker/test_twin.py::test_smdistributed_through_the_plain_sdk_v2_estimator"


def _pytest_without_docker(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update({"DOCKER_HOST": "unix:///nonexistent/docker.sock", "PYTHONPATH": str(REPO)})
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", ONE_DOCKER_TEST],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180)


def test_skipped_docker_tests_are_counted_in_the_summary() -> None:
    proc = _pytest_without_docker(ci=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 Docker-backend tests SKIPPED: no usable Docker engine" in proc.stdout, proc.stdout
    assert "smddp_docker_start" in proc.stdout


def test_a_missing_docker_engine_fails_the_run_under_ci() -> None:
    proc = _pytest_without_docker(ci="true")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CI=true needs a Docker engine for the docker-backend tests" in proc.stdout, proc.stdout
