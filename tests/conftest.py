"""Session-wide test settings and hooks.

Horovod jobs whose engine is not named run on Gloo here (``SMDDP_ENGINE=gloo`` unless the caller set it): smddprun's
own rule picks MPI only when every rank has an idle core, so without this a test's engine would depend on the
machine's load at that moment. The tests that are about an engine name it (``--mpi``/``--gloo``, or
``SMDDP_ENGINE`` per test), on both engines where it matters.

The Docker-backend tests never disappear silently.

Without a Docker engine the docker-backend tests skip; the terminal summary then says how many were skipped and how to
run them. Under CI (``CI=true``) a missing engine is an error instead (see ``tests/docker/conftest.py``), so CI cannot
pass without running them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from smddp_compat.image.train import SHORT_TOOLKIT_WAITS
from tests import tiers

os.environ.setdefault("SMDDP_ENGINE", "gloo")

#: The start of the skip reason of every Docker-backend test that found no engine.
DOCKER_SKIP_REASON = "no usable Docker engine"


def docker_missing_is_an_error(environ: dict[str, str]) -> bool:
    """Whether a missing Docker engine fails the run (in CI) rather than skipping the Docker tests."""
    return environ.get("CI", "").lower() == "true"


def skip_or_fail_without_docker(exc: Exception) -> None:
    """What a test does when no Docker engine answers: skips (counted in the summary), or fails under CI."""
    if docker_missing_is_an_error(dict(os.environ)):
        pytest.fail(f"CI=true needs a Docker engine for the docker-backend tests ({DOCKER_SKIP_REASON}: {exc})")
    pytest.skip(f"{DOCKER_SKIP_REASON}: {exc}")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: reason")
        return str(longrepr[2])
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Prints how many Docker-backend tests were skipped for want of an engine, and how to run them."""
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if DOCKER_SKIP_REASON in
               _skip_reason(report)]
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} Docker-backend tests SKIPPED: {DOCKER_SKIP_REASON}",
                                   yellow=True, bold=True)
        terminalreporter.write_line(
            "Start an engine (source .ci/docker.sh && smddp_docker_start) and run pytest again to run them; "
            "with CI=true a missing engine fails the run."
        )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", default=None, metavar="NAMES",
                     help=f"run only the tests of these tiers (comma-separated: {', '.join(tiers.TIERS)}); "
                          "see tests/tiers.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Puts every test in its tier (tests/tiers.py) and keeps only the tiers ``--tier`` names."""
    tiers.assign_tiers(items)
    tiers.select_tiers(config, items, config.getoption("--tier"))


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real ``mlflow server`` on loopback for the session's tracked jobs (:mod:`tests.mlflow_server`), started on
    first use (skipped without the mlflow extra); its users tell their runs apart by experiment and run names."""
    pytest.importorskip("mlflow", reason="the mlflow extra (setup.sh installs it)")
    from tests.mlflow_server import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _short_toolkit_waits(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twin jobs of the docker and e2e tiers cut the training toolkit's fixed 30 s sleeps after an MPI or SMDDP launch
    (``SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1``, the twin's documented default switch; the rest of SageMaker's start
    sequence is unchanged). Tests marked ``faithful_toolkit_waits`` keep them."""
    waiting_tier = tiers.has_tier(request.node, "docker") or tiers.has_tier(request.node, "e2e")
    if waiting_tier and not request.node.get_closest_marker("faithful_toolkit_waits"):
        monkeypatch.setenv(SHORT_TOOLKIT_WAITS, "1")
    else:
        monkeypatch.delenv(SHORT_TOOLKIT_WAITS, raising=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A unit-tier test's fixtures may not start processes either."""
    with tiers.guard(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A unit-tier test may not start a process (tests/tiers.py)."""
    with tiers.guard(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A unit-tier test that tried to start a process fails, saying which marker it needs."""
    report = yield
    tiers.violation_report(item, report)
    return report
