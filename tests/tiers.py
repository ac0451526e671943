"""The test tiers: every test belongs to exactly one, by what it needs, and the fast tier cannot hold a slow test.

=============  ==========================================================  ==========================================
tier (marker)  what its tests need                                         how a test gets there
=============  ==========================================================  ==========================================
``unit``       nothing outside the pytest process (threads, moto's         the default
               in-process server, TensorFlow in process)
``processes``  real processes on loopback (launchers, jobs, the CLIs)      ``pytest.mark.processes`` on the test or
                                                                           its module (``pytestmark``)
``docker``     the Docker engine (the twin, the kit's image, the SDK's     any test that uses the ``docker_engine``
               local mode)                                                 fixture, or everything in ``tests/docker/``
``e2e``        long end-to-end runs (the bench and matrix smokes, the      ``pytest.mark.e2e``
               docs, Horovod's own suites, soaks)
=============  ==========================================================  ==========================================

A ``unit`` test runs with process creation blocked: a test that starts a process (``subprocess``, ``os.fork``,
``os.system``, ``multiprocessing``, ``os.posix_spawn``) fails with a message naming the command and the marker it
needs, so a new slow test cannot land in the fast tier by forgetting its marker. A ``docker`` test is recognised by
its fixture, so it cannot forget either.

``--tier NAMES`` (comma-separated) runs the tests of those tiers only; ``bash tests/run`` runs every tier, the
fast tier first and stopping at its first failure (what ``.ci/run`` calls). Tests run side by side in the last tier
must not disturb each other's jobs: a Docker test removes or checks only its own containers and networks, and tests
that share something fixed (the SDK local mode's ``sagemaker-local`` network; both cores, for the bench and matrix
smokes) hold one lock, :func:`one_at_a_time` (pytest-xdist's ``xdist_group`` does nothing under pytest 9.2: xdist
3.8 renames the test through an attribute pytest no longer reads)::

    .venv/bin/pytest --tier unit -x
    .venv/bin/pytest --tier processes -n 3
    .venv/bin/pytest --tier docker,e2e -n 3
"""

from __future__ import annotations

import _posixsubprocess
import fcntl
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

TIERS = ("unit", "processes", "docker", "e2e")
"""The tiers, fastest first (the order ``.ci/run`` runs them)."""

DOCKER_FIXTURE = "docker_engine"
"""The fixture every Docker-engine test uses, directly or through another fixture."""

DOCKER_FOLDER = Path(__file__).resolve().parent / "docker"

_VIOLATIONS = pytest.StashKey[dict[str, list[str]]]()
_TIER = pytest.StashKey[str]()


@contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Holds the machine-wide lock ``name`` for the block: one holder at a time, whichever pytest-xdist worker (or
    pytest run) asks; released when the block ends, also if the process dies."""
    with open(Path(tempfile.gettempdir()) / f"smddp-tests-{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def tier_of(item: pytest.Item) -> str:
    """The tier of one collected test (see the module's table)."""
    if DOCKER_FIXTURE in getattr(item, "fixturenames", ()) or item.get_closest_marker("docker") \
            or DOCKER_FOLDER in Path(str(item.path)).parents:
        return "docker"
    for tier in ("e2e", "processes"):
        if item.get_closest_marker(tier):
            return tier
    return "unit"


def assign_tiers(items: list[pytest.Item]) -> None:
    """Marks each test with its tier's marker, so that ``-m`` selects by tier. A test in a slower tier than its
    module's marker says (an ``e2e`` test in a ``processes`` module, a Docker test anywhere) is in that slower tier
    only."""
    for item in items:
        tier = tier_of(item)
        if not item.get_closest_marker(tier):
            item.add_marker(tier)
        item.stash[_TIER] = tier


def select_tiers(config: pytest.Config, items: list[pytest.Item], wanted: str | None) -> None:
    """Keeps only the tests of the tiers named in ``wanted`` (``--tier unit`` or ``--tier docker,e2e``); the others
    are deselected. Selects by each test's one tier, so a test is never in two tiers' runs."""
    if not wanted:
        return
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = sorted(set(names) - set(TIERS))
    if unknown:
        raise pytest.UsageError(f"--tier {wanted!r}: unknown tier {', '.join(unknown)}; the tiers are "
                                f"{', '.join(TIERS)} (comma-separated)")
    keep = [item for item in items if item.stash.get(_TIER, None) in names]
    dropped = [item for item in items if item.stash.get(_TIER, None) not in names]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def has_tier(item: pytest.Item, tier: str) -> bool:
    """Whether the test is in ``tier`` (its one tier, not merely a marker it inherits)."""
    return item.stash.get(_TIER, None) == tier


def _blocked(what: str, record: list[str]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        shown = args[0] if args else kwargs
        record.append(f"{what}({shown!r:.200})")
        raise RuntimeError(f"a unit-tier test may not start a process ({what}); mark it pytest.mark.processes")
    return refuse


@contextmanager
def processes_blocked(record: list[str]) -> Iterator[None]:
    """Within the block, every way to start a process raises and is recorded in ``record``."""
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, what: str) -> None:
        if hasattr(owner, name):
            patches.append((owner, name, getattr(owner, name)))
            setattr(owner, name, _blocked(what, record))

    original_execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> Any:
        record.append(f"subprocess({args!r:.200})")
        raise RuntimeError("a unit-tier test may not start a process; mark it pytest.mark.processes")

    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
    patch(_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec")
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp"):
        patch(os, name, f"os.{name}")
    try:
        yield
    finally:
        subprocess.Popen._execute_child = original_execute  # type: ignore[attr-defined]
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


def guard(item: pytest.Item, phase: str) -> Any:
    """A context for one phase (``setup`` or ``call``) of a test: blocks process creation for ``unit`` tests."""
    if not has_tier(item, "unit"):
        return nullcontext()
    return processes_blocked(item.stash.setdefault(_VIOLATIONS, {}).setdefault(phase, []))


def violation_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """Turns the report of a ``unit`` test that tried to start a process into a failure that says what to do
    (whatever the test itself made of the refusal)."""
    attempts = item.stash.get(_VIOLATIONS, {}).get(report.when, [])
    if not attempts:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} is in the fast tier (unit: in-process only) but started a process: {attempts[0]}"
        + (f" (and {len(attempts) - 1} more)" if len(attempts) > 1 else "")
        + ". Fix: mark the test (or its module: pytestmark = pytest.mark.processes) with pytest.mark.processes, "
        "or pytest.mark.e2e if it is a long end-to-end run; see tests/tiers.py."
    )
