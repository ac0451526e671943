"""Building the kit's image: one build at a time on a machine, and a context that run outputs do not change."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from smddp_compat.image import build
from smddp_compat.image.errors import ImageBuildError


def test_a_second_build_waits_for_the_first_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "BUILD_LOCK", tmp_path / "image-build.lock")
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with build.one_build_at_a_time(60):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    assert holding.wait(30)
    out = io.StringIO()
    with pytest.raises(ImageBuildError) as refused:
        with build.one_build_at_a_time(1.5, out):
            pass
    assert "still locked after 2 s" in str(refused.value) and str(tmp_path / "image-build.lock") in str(refused.value)
    assert "another build of the kit's image is running: waiting for it" in out.getvalue()

    threading.Timer(1.0, release.set).start()
    started = time.monotonic()
    with build.one_build_at_a_time(30):
        waited = time.monotonic() - started
    thread.join(10)
    assert 0.5 < waited < 10, waited


def test_the_bench_output_folder_is_not_part_of_the_image() -> None:
    # bench/results is where smddp bench and smddp matrix write by default: a run during a build or a test must not
    # change the image's digest (the doctor then calls the image stale).
    assert build._ignore("/kit/bench", ["results", "run.py", "__pycache__"]) == {"results", "__pycache__"}
    assert build._ignore("/kit/smddp_compat", ["results", "cli.py"]) == set()
