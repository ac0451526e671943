"""The process backend never throws a job's checkpoints away: without ``checkpoint_path`` they are kept with the
job's output (``<output>/<job>/checkpoints/``, uploaded there for an ``s3://`` output), the summary says where, and a
second run given that folder starts from them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from smddp_compat.local_mode import JobSpec, run

pytestmark = pytest.mark.processes

# Writes a checkpoint per host and reports what the checkpoint folder held when it started.
_SCRIPT = """#!/bin/sh
echo "found: $(ls "$SAGEMAKER_BASE_DIR/checkpoints" | tr '\\n' ' ')"
echo "$SM_CURRENT_HOST" > "$SAGEMAKER_BASE_DIR/checkpoints/ckpt-$SM_CURRENT_HOST-$2"  # arguments: --run NAME
"""


def _job(tmp_path: Path, output: str, name: str, **options: object) -> tuple[str, bool]:
    printed, result = _run_job(tmp_path, output, name, **options)
    return printed, result.ok


def _run_job(tmp_path: Path, output: str, name: str, **options: object) -> tuple[str, Any]:
    source = tmp_path / "code"
    source.mkdir(exist_ok=True)
    (source / "train.sh").write_text(_SCRIPT)
    spec = JobSpec(entry_point="train.sh", source_dir=str(source), instance_count=2, output_path=output,
                   job_name=name, hyperparameters={"run": name}, max_run=60, **options)  # type: ignore[arg-type]
    stream = io.StringIO()
    result = run(spec, stream=stream)
    return stream.getvalue(), result


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


def test_sagemakers_default_checkpoint_folder_is_each_hosts_own_and_nothing_lands_in_this_machines_opt_ml(
    tmp_path: Path, no_leftover_job_dirs: None
) -> None:
    """AWS's notebooks pass ``checkpoint_local_path="/opt/ml/checkpoints/"``: in a local_process job that is each
    host's own checkpoints folder (kept with the job's output); no folder of this machine's ``/opt/ml`` is made or
    read, so a second job starts from nothing; a JobSpec naming a machine folder there is refused."""
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.errors import ConfigurationError
    from smddp_compat.estimators import TensorFlow

    if Path("/opt/ml").exists():
        pytest.skip("this machine has an /opt/ml folder: the test proves none is made")
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.sh").write_text(_SCRIPT)
    for name in ("notebook-1", "notebook-2"):
        estimator = TensorFlow(entry_point="train.sh", source_dir=str(source), instance_type="local_process",
                               instance_count=2, framework_version="2.21", py_version="py311", model_dir=False,
                               hyperparameters={"run": name}, checkpoint_local_path="/opt/ml/checkpoints/",
                               output_path=str(tmp_path / "out"))
        assert estimator.fit(job_name=name).ok
        kept = tmp_path / "out" / name / "checkpoints"
        assert sorted(p.name for p in kept.iterdir()) == [f"ckpt-algo-1-{name}", f"ckpt-algo-2-{name}"]
        assert not Path("/opt/ml").exists()
    with pytest.raises(ConfigurationError, match=r"checkpoint_path='/opt/ml/checkpoints'.*Fix: leave it out"):
        JobSpec(entry_point="train.sh", source_dir=str(source), checkpoint_path="/opt/ml/checkpoints")


def test_a_checkpoint_s3_uri_is_where_each_host_starts_from_and_stores_its_checkpoints(
    tmp_path: Path, moto_s3: str, no_leftover_job_dirs: None
) -> None:
    """``checkpoint_s3_uri`` as SageMaker keeps it: two jobs with different URIs both start empty; a third given the
    first's URI starts from the first's checkpoints (in every host's own folder) and adds its own there;
    DescribeTrainingJob answers CheckpointConfig; an unreadable bucket is one line before anything starts."""
    import boto3

    from smddp_compat.local_mode import ConfigurationError

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="ckpt")

    def stored(prefix: str) -> list[str]:
        listed = s3.list_objects_v2(Bucket="ckpt", Prefix=prefix).get("Contents", [])
        return sorted(item["Key"][len(prefix):] for item in listed)

    for name, uri in (("a", "s3://ckpt/run-a"), ("b", "s3://ckpt/run-b")):
        printed, result = _run_job(tmp_path, str(tmp_path / "out"), name, checkpoint_s3_uri=uri)
        assert result.ok, printed
        assert printed.count("found: \n") == 2, printed  # both hosts started empty
        assert stored(f"run-{name}/") == [f"ckpt-algo-1-{name}", f"ckpt-algo-2-{name}"]
        assert f"  checkpoints: {uri}\n" in printed, printed
        assert result.describe()["CheckpointConfig"] == {"S3Uri": uri, "LocalPath": "/opt/ml/checkpoints"}
        assert not (tmp_path / "out" / name / "checkpoints").exists()  # kept in S3, not beside the output

    printed, result = _run_job(tmp_path, str(tmp_path / "out"), "c", checkpoint_s3_uri="s3://ckpt/run-a")
    assert result.ok, printed
    assert printed.count("found: ckpt-algo-1-a ckpt-algo-2-a \n") == 2, printed
    assert stored("run-a/") == ["ckpt-algo-1-a", "ckpt-algo-1-c", "ckpt-algo-2-a", "ckpt-algo-2-c"]

    # The estimator's local_process job with AWS's notebook settings: the same store.
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.estimators import TensorFlow

    estimator = TensorFlow(entry_point="train.sh", source_dir=str(tmp_path / "code"), instance_type="local_process",
                           instance_count=2, framework_version="2.21", py_version="py311", model_dir=False,
                           hyperparameters={"run": "e"}, checkpoint_s3_uri="s3://ckpt/run-b",
                           checkpoint_local_path="/opt/ml/checkpoints/", output_path=str(tmp_path / "out"))
    assert estimator.fit(job_name="e").ok
    assert stored("run-b/") == ["ckpt-algo-1-b", "ckpt-algo-1-e", "ckpt-algo-2-b", "ckpt-algo-2-e"]
    assert estimator.latest_training_job.describe()["CheckpointConfig"]["S3Uri"] == "s3://ckpt/run-b"

    with pytest.raises(ConfigurationError, match=r"checkpoint_s3_uri='s3://no-such-bucket/x': could not be read"):
        _run_job(tmp_path, str(tmp_path / "out"), "d", checkpoint_s3_uri="s3://no-such-bucket/x")
    assert not (tmp_path / "out" / "d").exists()
