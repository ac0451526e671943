"""The process backend never throws a job's checkpoints away: without ``checkpoint_path`` they are kept with the
job's output (``<output>/<job>/checkpoints/``, uploaded there for an ``s3://`` output), the summary says where, and a
second run given that folder starts from them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from smddp_compat.local_mode import JobSpec, run

pytestmark = pytest.mark.processes

# Writes a checkpoint per host and reports what the checkpoint folder held when it started.
_SCRIPT = """#!/bin/sh
echo "found: $(ls "$SAGEMAKER_BASE_DIR/checkpoints" | tr '\\n' ' ')"
echo "$SM_CURRENT_HOST" > "$SAGEMAKER_BASE_DIR/checkpoints/ckpt-$SM_CURRENT_HOST-$2"  # arguments: --run NAME
"""


def _job(tmp_path: Path, output: str, name: str, **options: object) -> tuple[str, bool]:
    source = tmp_path / "code"
    source.mkdir(exist_ok=True)
    (source / "train.sh").write_text(_SCRIPT)
    spec = JobSpec(entry_point="train.sh", source_dir=str(source), instance_count=2, output_path=output,
                   job_name=name, hyperparameters={"run": name}, max_run=60, **options)  # type: ignore[arg-type]
    stream = io.StringIO()
    ok = run(spec, stream=stream).ok
    return stream.getvalue(), ok


def test_checkpoints_are_kept_with_the_output_and_a_second_run_resumes_from_them(
    tmp_path: Path, no_leftover_job_dirs: None
) -> None:
    printed, ok = _job(tmp_path, str(tmp_path / "out"), "first")
    assert ok, printed
    kept = tmp_path / "out" / "first" / "checkpoints"
    assert sorted(p.name for p in kept.iterdir()) == ["ckpt-algo-1-first", "ckpt-algo-2-first"]
    assert f"  checkpoints: {kept} (to resume from them: --checkpoint-dir {kept})" in printed, printed

    printed, ok = _job(tmp_path, str(tmp_path / "out"), "second", checkpoint_path=str(kept))
    assert ok, printed
    assert "found: ckpt-algo-1-first ckpt-algo-2-first" in printed, printed
    assert not (tmp_path / "out" / "second" / "checkpoints").exists()  # they went where they were asked to


def test_checkpoints_of_a_job_with_an_s3_output_are_uploaded_beside_its_artifacts(
    tmp_path: Path, moto_s3: str, no_leftover_job_dirs: None
) -> None:
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="jobs")
    printed, ok = _job(tmp_path, "s3://jobs/runs", "on-s3")
    assert ok, printed
    keys = sorted(item["Key"] for item in s3.list_objects_v2(Bucket="jobs", Prefix="runs/on-s3/checkpoints/")["Contents"])
    assert keys == ["runs/on-s3/checkpoints/ckpt-algo-1-on-s3", "runs/on-s3/checkpoints/ckpt-algo-2-on-s3"]
    assert "  checkpoints: s3://jobs/runs/on-s3/checkpoints\n" in printed, printed
