"""Where an S3 channel's objects land (SageMaker's File mode), and keys that cannot all land (issue 19, item 2).

SageMaker takes every object whose key starts with the ``S3Prefix`` and writes it at its key relative to the
prefix's folder (the prefix up to its last '/'). Downloads go through moto's S3 server over real HTTP.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from smddp_compat.local_mode import ChannelError
from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.channels import channel_key_path, download_s3_channel, download_s3_prefix

BUCKET = "smddp-channel-keys"


@pytest.fixture
def s3(moto_s3: str):
    """A client of moto's server (whose objects outlive one test: each test uses its own key prefix)."""
    client = boto3.client("s3", endpoint_url=moto_s3)
    client.create_bucket(Bucket=BUCKET)
    return client


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("key, prefix, placed", [
    ("data/train/a.csv", "data/train", "a.csv"),
    ("data/train-a/x.csv", "data/train", "train-a/x.csv"),
    ("data/train.csv", "data/train", "train.csv"),
    ("data/train/a.csv", "data/train/", "a.csv"),
    ("data/train/sub/b.csv", "data/train/", "sub/b.csv"),
    ("data/test.csv", "data/test.csv", "test.csv"),
    ("a/b", "", "a/b"),
])
def test_keys_land_relative_to_the_prefix_read_as_a_folder(key: str, prefix: str, placed: str) -> None:
    assert channel_key_path(key, prefix) == placed


def test_a_prefix_without_slash_keeps_same_named_files_of_sibling_folders_apart(s3, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="data/train-a/x.csv", Body=b"a")
    s3.put_object(Bucket=BUCKET, Key="data/train-b/x.csv", Body=b"b")
    s3.put_object(Bucket=BUCKET, Key="data/train.csv", Body=b"t")
    count = download_s3_channel(S3Location(BUCKET, "data/train"), tmp_path / "train", channel="train", client=s3)
    assert count == 3
    assert _files(tmp_path / "train") == {"train-a/x.csv": b"a", "train-b/x.csv": b"b", "train.csv": b"t"}


def test_a_key_that_is_both_a_file_and_a_folder_names_both_keys(s3, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="both/a/b", Body=b"file")
    s3.put_object(Bucket=BUCKET, Key="both/a/b/c", Body=b"inside")
    with pytest.raises(ChannelError) as caught:
        download_s3_channel(S3Location(BUCKET, "both/"), tmp_path / "train", channel="train", client=s3)
    message = str(caught.value)
    assert caught.value.channel == "train" and "'both/a/b'" in message and "'both/a/b/c'" in message
    assert "folder" in message and "Fix:" in message
    assert not (tmp_path / "train").exists()  # every key is checked before the first download


def test_keys_that_differ_only_in_empty_segments_name_both_keys(s3, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="twice/x//y", Body=b"1")
    s3.put_object(Bucket=BUCKET, Key="twice/x/y", Body=b"2")
    with pytest.raises(ChannelError, match="'twice/x//y' and 'twice/x/y' would both be written as the file 'x/y'"):
        download_s3_channel(S3Location(BUCKET, "twice/"), tmp_path / "train", channel="train", client=s3)


def test_a_folder_prefix_is_synced_below_itself_as_checkpoints_are(s3, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="ckpt/step-1/w", Body=b"w")
    s3.put_object(Bucket=BUCKET, Key="ckpt-old/step-0/w", Body=b"old")  # another folder: not this one's
    count = download_s3_prefix(S3Location(BUCKET, "ckpt"), tmp_path / "ckpt", channel="checkpoints", client=s3)
    assert count == 1 and _files(tmp_path / "ckpt") == {"step-1/w": b"w"}
