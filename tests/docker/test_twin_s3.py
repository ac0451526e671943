"""The twin's own S3 as a script sees it (no Docker: two moto servers, the request's S3 and the twin's): channels
staged at their own keys, and what a job wrote there listed and kept, never written to the request's S3."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.channels import download_s3_channel
from smddp_compat.local_mode.channels import copy_s3_prefix
from smddp_compat.local_mode.docker._twin_s3 import create_buckets, script_writes, snapshot
from tests.fake_aws import Aws, _free_port


@pytest.fixture
def twin_s3() -> Iterator[Any]:
    """A second moto server, in a process of its own (moto's state is per process): the twin's own S3."""
    import boto3

    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                          aws_access_key_id="smddp-twin", aws_secret_access_key="smddp-twin")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.list_buckets()
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert time.monotonic() < deadline and server.poll() is None, "moto_server did not start"
                time.sleep(0.2)
        yield client
    finally:
        server.terminate()
        server.wait(timeout=30)


def _body(client: Any, bucket: str, key: str) -> bytes:
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_channel_is_staged_at_its_own_keys_and_what_the_job_wrote_is_kept(
    aws: Aws, twin_s3: Any, tmp_path: Path
) -> None:
    user = aws.client("s3")
    user.create_bucket(Bucket="data")
    for key in ("train/a.csv", "train/sub/b.csv", "train/", "train-b/c.csv", "other/d.csv"):
        user.put_object(Bucket="data", Key=key, Body=key.encode())
    channel = S3Location("data", "train")
    staged = tmp_path / "channels" / "train"
    download_s3_channel(channel, staged, channel="train", client=user)
    (staged / "sub" / "b.csv").unlink()  # gone from the staged copy: read from the request's S3 instead
    create_buckets(twin_s3, ["data", "out", "data"])

    assert copy_s3_prefix(channel, user, twin_s3, channel="train", staged=staged) == 3
    before = snapshot(twin_s3)
    assert sorted(key for _bucket, key in before) == ["train-b/c.csv", "train/a.csv", "train/sub/b.csv"]
    assert _body(twin_s3, "data", "train/sub/b.csv") == b"train/sub/b.csv"

    twin_s3.put_object(Bucket="out", Key="job/result.txt", Body=b"new")
    twin_s3.put_object(Bucket="data", Key="train/a.csv", Body=b"changed")
    twin_s3.delete_object(Bucket="data", Key="train-b/c.csv")
    twin_s3.put_object(Bucket="out", Key="job/../../escape.txt", Body=b"x")
    folder = tmp_path / "replay"
    writes = {w.uri: w for w in script_writes(twin_s3, before, folder, user)}

    assert writes["s3://out/job/result.txt"].change == "written"
    assert (folder / "s3" / "out" / "job" / "result.txt").read_bytes() == b"new"
    assert writes["s3://data/train/a.csv"].change == "overwritten"
    assert "your S3 still holds the original" in writes["s3://data/train/a.csv"].describe()
    assert (folder / "s3" / "data" / "train" / "a.csv").read_bytes() == b"changed"
    assert writes["s3://data/train-b/c.csv"].describe().endswith("deleted by the job (not deleted from your S3)")
    unsafe = writes["s3://out/job/../../escape.txt"]
    assert unsafe.kept is None and "'..'" in (unsafe.problem or "")
    assert not (tmp_path / "escape.txt").exists()
    assert _body(user, "data", "train/a.csv") == b"train/a.csv"  # the request's S3 is never written
    assert _body(user, "data", "train-b/c.csv") == b"train-b/c.csv"
    assert "out" not in {bucket["Name"] for bucket in user.list_buckets()["Buckets"]}

    # An s3:// replay output: the copies go under <output>/<job>/s3/ in the request's S3.
    user.create_bucket(Bucket="replays")
    again = {w.uri: w for w in script_writes(twin_s3, before, S3Location("replays", "r/job-1"), user)}
    assert again["s3://out/job/result.txt"].kept == "s3://replays/r/job-1/s3/out/job/result.txt"
    assert _body(user, "replays", "r/job-1/s3/out/job/result.txt") == b"new"
