"""Fixtures of the bench's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tiers import one_at_a_time


@pytest.fixture
def cores_to_itself() -> Iterator[None]:
    """The bench and matrix smokes keep both cores busy with real training jobs: under pytest-xdist they run one after
    the other (one lock), while the other workers run the tests whose time is waiting (the twin's)."""
    with one_at_a_time("cpu-bound-smokes"):
        yield
