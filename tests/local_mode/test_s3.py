"""``s3://`` channels and outputs, through moto's S3 server on 127.0.0.1 (real HTTP, found via AWS_ENDPOINT_URL)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import boto3
import pytest

from smddp_compat.local_mode import ChannelError, JobSpec, run

BUCKET = "smddp-local-test"


@pytest.fixture
def s3(moto_s3: str):
    """A boto3 client on moto's server with an empty bucket."""
    client = boto3.client("s3", endpoint_url=moto_s3)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.mark.processes
def test_s3_channel_and_s3_output(tmp_path: Path, scripts_dir: Path, s3, no_leftover_job_dirs: None) -> None:
    s3.put_object(Bucket=BUCKET, Key="data/train/train.csv", Body=b"x,y\n1,2\n")
    s3.put_object(Bucket=BUCKET, Key="data/train/sub/more.csv", Body=b"x,y\n3,4\n")
    s3.put_object(Bucket=BUCKET, Key="data/train/", Body=b"")  # a "folder" marker, as consoles create them
    s3.put_object(Bucket=BUCKET, Key="data/test.csv", Body=b"x,y\n5,6\n")
    spec = JobSpec(
        entry_point="dump_env.py",
        source_dir=str(scripts_dir),
        instance_count=2,
        distribution="smddp",
        hyperparameters={"write-model": 1},
        channels={"train": f"s3://{BUCKET}/data/train", "test": f"s3://{BUCKET}/data/test.csv"},
        output_path=f"s3://{BUCKET}/jobs",
        job_name="s3-job",
        max_run=120,
    )
    stream = io.StringIO()
    result = run(spec, stream=stream)
    assert result.ok, stream.getvalue()
    assert result.artifacts.model == f"s3://{BUCKET}/jobs/s3-job/output/model.tar.gz"
    assert result.artifacts.output == f"s3://{BUCKET}/jobs/s3-job/output/output.tar.gz"
    assert result.artifacts.logs == {h: f"s3://{BUCKET}/jobs/s3-job/logs/{h}.log" for h in ("algo-1", "algo-2")}
    assert result.artifacts.output in stream.getvalue()

    keys = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="jobs/")["Contents"]}
    assert keys == {
        "jobs/s3-job/output/model.tar.gz",
        "jobs/s3-job/output/output.tar.gz",
        "jobs/s3-job/logs/algo-1.log",
        "jobs/s3-job/logs/algo-2.log",
    }
    model = tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=BUCKET, Key="jobs/s3-job/output/model.tar.gz")["Body"].read()))
    assert model.getnames() == ["model-0.txt", "model-1.txt"]  # every host's model folder, as on SageMaker
    output = tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=BUCKET, Key="jobs/s3-job/output/output.tar.gz")["Body"].read()))
    assert sorted(output.getnames()) == ["env-0.json", "env-1.json"]  # both hosts' output/data, merged
    handle = output.extractfile("env-1.json")
    assert handle is not None
    record = json.load(handle)
    assert record["channels"] == {"test": ["test.csv"], "train": ["sub/more.csv", "train.csv"]}
    log = s3.get_object(Bucket=BUCKET, Key="jobs/s3-job/logs/algo-2.log")["Body"].read().decode()
    assert "dumped environment of process 1 on algo-2" in log
    # No credential ever reaches the logs or the config files.
    assert "testing" not in log


def test_empty_s3_prefix_fails_before_anything_starts(
    tmp_path: Path, scripts_dir: Path, s3, no_leftover_job_dirs: None
) -> None:
    spec = JobSpec(
        entry_point="dump_env.py",
        source_dir=str(scripts_dir),
        channels={"train": f"s3://{BUCKET}/nothing/here"},
        output_path=str(tmp_path / "out"),
        job_name="empty-channel",
    )
    stream = io.StringIO()
    with pytest.raises(ChannelError, match="no object exists under this prefix") as caught:
        run(spec, stream=stream)
    assert caught.value.channel == "train"
    assert "dumped" not in stream.getvalue()
    assert not (tmp_path / "out" / "empty-channel" / "output").exists()


def test_missing_bucket_fails_with_the_uri(tmp_path: Path, scripts_dir: Path, moto_s3: str) -> None:
    spec = JobSpec(
        entry_point="dump_env.py",
        source_dir=str(scripts_dir),
        channels={"train": "s3://no-such-bucket/data"},
        output_path=str(tmp_path / "out"),
    )
    with pytest.raises(ChannelError, match="s3://no-such-bucket/data"):
        run(spec, stream=io.StringIO())
