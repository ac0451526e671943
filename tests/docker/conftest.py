"""Fixtures for the docker backend's tests: the engine (tests skip when no daemon answers), the kit's image (built
once per session when missing), and leak checks."""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator

import pytest
from tests.conftest import DOCKER_SKIP_REASON, docker_missing_is_an_error
from tests.docker.docker_job_helpers import BUILD_LOG, job_containers

from local_mode.docker import DockerBackend, DockerUnavailableError, Engine, find_engine
from local_mode.docker._commands import capture


@pytest.fixture(scope="session")
def docker_engine() -> Engine:
    """A Docker engine that answers; without one, skips the test (counted in the terminal summary), or fails it
    under CI."""
    try:
        return find_engine()
    except DockerUnavailableError as exc:
        if docker_missing_is_an_error(dict(os.environ)):
            pytest.fail(f"CI=true needs a Docker engine for the docker-backend tests ({DOCKER_SKIP_REASON}: {exc})")
        pytest.skip(f"{DOCKER_SKIP_REASON}: {exc}")


@pytest.fixture(scope="session")
def docker_backend(docker_engine: Engine) -> DockerBackend:
    """The docker backend on the kit's image (built once, ~6 minutes on 2 cores, when the engine does not hold it;
    CI builds it beforehand with `python -m local_mode.docker build`)."""
    return DockerBackend(engine=docker_engine, build_log=BUILD_LOG, job_name="test")


# Temporary folders of these tests' jobs only (other jobs may run on the machine at the same time): local_mode's job
# roots (every job name here starts with "docker-") and the backend's compose folders (backend job names below).
_OWN_FOLDERS = ("smddp-local-docker-*", "smddp-test-*", "smddp-interrupted-*", "smddp-user-image-*")


def _temp_folders() -> set[str]:
    found: set[str] = set()
    for pattern in _OWN_FOLDERS:
        found.update(glob.glob(os.path.join(tempfile.gettempdir(), pattern)))
    return found - {BUILD_LOG}


@pytest.fixture
def no_leftovers(docker_engine: Engine) -> Iterator[None]:
    """Fails the test if it leaves a job container, a compose network or a temporary folder behind."""
    before_networks = capture([docker_engine.docker, "network", "ls", "--quiet"], timeout=60)[1].split()
    before_folders = _temp_folders()
    yield
    assert job_containers(docker_engine) == [], "a docker-backend job left containers behind"
    after_networks = capture([docker_engine.docker, "network", "ls", "--quiet"], timeout=60)[1].split()
    assert set(after_networks) - set(before_networks) == set(), "a docker-backend job left a network behind"
    assert _temp_folders() - before_folders == set(), "a docker-backend job left a temporary folder behind"
