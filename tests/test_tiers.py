"""The tiers hold: a unit-tier test that starts a process fails and says which marker it needs; markers and
fixtures put tests in their tiers; ``--tier`` selects each test in exactly one tier's run (tests/tiers.py)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

_CONFTEST = """
from tests.conftest import pytest_addoption, pytest_collection_modifyitems  # noqa: F401
from tests.conftest import pytest_runtest_call, pytest_runtest_makereport, pytest_runtest_setup  # noqa: F401
import pytest

@pytest.fixture
def docker_engine():
    return "engine"
"""

_TESTS = """
import os
import subprocess
import sys
import pytest

def test_in_process():
    assert sum(range(4)) == 6

def test_starts_a_process_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_swallows_the_refusal():
    try:
        os.system("true")
    except Exception:
        pass

@pytest.mark.processes
def test_starts_a_process_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.e2e
def test_long():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_uses_docker(docker_engine):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_sample=_TESTS)
    return pytester


def test_a_unit_test_that_starts_a_process_fails_naming_the_marker(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("--tier", "unit", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*test_starts_a_process_unmarked is in the fast tier*started a process*",
                                 "*Fix: mark the test*pytest.mark.processes*"])
    # A test that catches the refusal still fails: the guard reports what was attempted, not what the test made of it.
    result.stdout.fnmatch_lines(["*test_swallows_the_refusal is in the fast tier*os.system*"])


@pytest.mark.parametrize(("tier", "expected"), [
    ("processes", "test_starts_a_process_marked"),
    ("e2e", "test_long"),
    ("docker", "test_uses_docker"),
])
def test_each_tier_selects_its_own_tests(suite: pytest.Pytester, tier: str, expected: str) -> None:
    result = suite.runpytest_inprocess("--tier", tier, "--collect-only", "-q", "-p", "no:cacheprovider")
    collected = [line.split("::")[-1] for line in result.stdout.lines if "::" in line]
    assert collected == [expected]


def test_every_test_is_in_exactly_one_tier(suite: pytest.Pytester) -> None:
    counts = []
    for tier in ("unit", "processes", "docker", "e2e"):
        result = suite.runpytest_inprocess("--tier", tier, "--collect-only", "-q", "-p", "no:cacheprovider")
        counts.append(sum("::" in line for line in result.stdout.lines))
    assert counts == [3, 1, 1, 1]


def test_an_unknown_tier_is_refused_with_the_list(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("--tier", "fast", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tier 'fast': unknown tier fast; the tiers are unit, processes, docker, e2e*"])
