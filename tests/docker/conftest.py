"""Fixtures for the SageMaker twin's tests: the Docker engine, the kit's image, a fake AWS, leak checks.

No Docker engine means these tests cannot run: they are skipped with the reason outside CI, and fail in CI
(``CI=true``), which always starts an engine (``.ci/docker.sh``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from smddp_compat.image import DockerUnavailableError, Engine, find_engine
from smddp_compat.image.commands import capture
from smddp_compat.local_mode.docker._containers import TWIN_LABEL
from tests.conftest import skip_or_fail_without_docker
from tests.fake_aws import Aws, aws, moto_url  # noqa: F401 - fixtures

BUILD_LOG = "/tmp/smddp-docker-image-build.log"
#: How long a new twin container or network may take to go away before it counts as this test's leftover (another
#: worker's job may still be running; a whole twin job takes about two minutes here).
_OTHER_JOBS_SECONDS = 300.0


@pytest.fixture(scope="session")
def docker_engine() -> Engine:
    """A Docker engine that answers; without one, skips the test (counted in the terminal summary), or fails it
    under CI."""
    try:
        return find_engine()
    except DockerUnavailableError as exc:
        skip_or_fail_without_docker(exc)
        raise


@pytest.fixture(scope="session")
def kit_image(docker_engine: Engine) -> str:
    """The kit's training image, from ``smddp image`` (its tag is the last line it prints; built when missing:
    ~10 minutes on 2 cores; CI builds it beforehand)."""
    # pytest-xdist's workers each ask: one builds, the others wait for it (smddp_compat.image.one_build_at_a_time).
    done = subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", "image", "--log", BUILD_LOG],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"smddp image failed: {done.stderr[-3000:]}"
    tag = done.stdout.strip().splitlines()[-1]
    assert tag.startswith("smddp-compat:"), done.stdout
    return tag


def _twin_entries(docker_engine: Engine) -> set[str]:
    """The twin's containers and networks on the engine now (``ps:<id>``, ``network:<id>``)."""
    found: set[str] = set()
    for what in (["ps", "--all"], ["network", "ls"]):
        code, output = capture([docker_engine.docker, *what, "--quiet", "--filter", f"label={TWIN_LABEL}"],
                               timeout=60)
        assert code == 0, output
        found.update(f"{what[0]}:{entry}" for entry in output.split())
    return found


@pytest.fixture(scope="session")
def _leftover_suspects(docker_engine: Engine) -> Iterator[dict[str, str]]:
    """Twin entries that were new at some test's end, each with that test's id; at the end of this worker's session
    the ones still there fail it, naming their tests. Under pytest-xdist a new entry may be another worker's job still
    running: checking at the end, not at each test's, costs no test a wait for another worker's job."""
    suspects: dict[str, str] = {}
    yield suspects
    deadline = time.monotonic() + _OTHER_JOBS_SECONDS
    left = set(suspects)
    while left and time.monotonic() < deadline:
        left &= _twin_entries(docker_engine)
        if left:
            time.sleep(2)
    assert not left, "twin jobs left these behind: " + "; ".join(
        f"{entry} (new at the end of {suspects[entry]})" for entry in sorted(left))


@pytest.fixture
def no_leftovers(docker_engine: Engine, _leftover_suspects: dict[str, str],
                 request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails if a twin job the test ran leaves a container or a network behind (entries that were already there,
    or belong to another twin job running beside it, are not this test's): what is new at the test's end and not gone
    by the end of the session (:func:`_leftover_suspects`)."""
    before = _twin_entries(docker_engine)
    yield
    for entry in _twin_entries(docker_engine) - before:
        _leftover_suspects.setdefault(entry, request.node.nodeid)
