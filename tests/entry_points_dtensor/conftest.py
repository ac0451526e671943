"""Fixtures of the DTensor entry-point tests (the process helpers are shared with tests/entry_points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.entry_points.script_runs import Layout, make_layout


@pytest.fixture
def job(tmp_path: Path) -> Layout:
    """A fresh SageMaker-like job layout in the test's temporary directory."""
    return make_layout(tmp_path / "job")
