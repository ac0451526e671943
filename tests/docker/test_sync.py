"""The twin's folder sync (no Docker needed), as SageMaker's "Use Checkpoints" page describes it: the folder is filled
from the target at the start, new and changed files go to the target during the job, a file deleted in the container
is deleted in the target too (so a script keeping its last three checkpoints finds the same three on resume, here and
there); TensorBoard output goes one way. Links are never followed, FIFOs never block, a file that vanishes during a
sync is skipped, and a target that fails is said once and retried. Against a folder target and moto's S3."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.folder_sync import FolderSync, FolderTarget, S3Target


@pytest.fixture
def s3() -> Iterator[Any]:
    """An S3 client of moto's in-process S3, with bucket ``ckpt``."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        client.create_bucket(Bucket="ckpt")
        yield client


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}


def _objects(s3: Any, prefix: str) -> dict[str, str]:
    found = s3.list_objects_v2(Bucket="ckpt", Prefix=prefix).get("Contents", [])
    return {item["Key"][len(prefix):]: s3.get_object(Bucket="ckpt", Key=item["Key"])["Body"].read().decode()
            for item in found}


def _save(folder: Path, step: int, keep: int = 3) -> None:
    """What a training script keeping its last ``keep`` checkpoints does: write the new one, delete the oldest."""
    (folder / "ckpt").mkdir(parents=True, exist_ok=True)
    (folder / "ckpt" / f"step-{step}.index").write_text(f"step {step}")
    (folder / "latest").write_text(str(step))
    for old in sorted((folder / "ckpt").iterdir(), key=lambda p: int(p.stem.split("-")[1]))[:-keep]:
        old.unlink()


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_a_script_keeping_its_last_three_checkpoints_finds_the_same_three_here_and_there(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "s3":
        s3 = request.getfixturevalue("s3")
        target: Any = S3Target(S3Location("ckpt", "job/checkpoints"), s3)
        s3.put_object(Bucket="ckpt", Key="job/checkpoints/ckpt/step-1.index", Body=b"step 1")
        stored = lambda: _objects(s3, "job/checkpoints/")  # noqa: E731
    else:
        target = FolderTarget(tmp_path / "target")
        _save(tmp_path / "target", 1)
        (tmp_path / "target" / "latest").unlink()
        stored = lambda: _files(tmp_path / "target")  # noqa: E731
    hosts = [tmp_path / "algo-1", tmp_path / "algo-2"]
    sync = FolderSync(target, what="checkpoints", mirror_deletions=True)

    assert sync.fill(hosts, tmp_path / "scratch") == 1
    assert [_files(host) for host in hosts] == [{"ckpt/step-1.index": "step 1"}] * 2  # filled at the start
    assert not (tmp_path / "scratch").exists()
    for step in range(2, 7):
        _save(hosts[0], step)  # only algo-1 checkpoints; algo-2 keeps the filled file, unchanged
        sync.sync(hosts)
    assert stored() == _files(hosts[0]) == {
        "ckpt/step-4.index": "step 4", "ckpt/step-5.index": "step 5", "ckpt/step-6.index": "step 6", "latest": "6"}
    assert _files(hosts[1]) == {"ckpt/step-1.index": "step 1"}  # ... and did not bring step 1 back

    restarted = [tmp_path / "restart-1", tmp_path / "restart-2"]  # a spot restart: new instances, filled again
    assert sync.fill(restarted, tmp_path / "scratch") == 4
    assert [_files(host) for host in restarted] == [stored()] * 2
    if kind == "folder":
        assert sorted(p.name for p in (tmp_path / "target").iterdir()) == ["ckpt", "latest"]


def test_a_replay_reads_the_requests_checkpoints_and_syncs_them_to_its_own_place(tmp_path: Path, s3: Any) -> None:
    """The request's S3Uri is read, never written; the replay's target starts as that location would."""
    s3.put_object(Bucket="ckpt", Key="theirs/step-1", Body=b"1")
    s3.put_object(Bucket="ckpt", Key="theirs-too-long/x", Body=b"not in the folder")
    own = tmp_path / "own"
    sync = FolderSync(FolderTarget(own), what="checkpoints", mirror_deletions=True)
    host = tmp_path / "algo-1"
    assert sync.fill([host], tmp_path / "scratch", source=S3Target(S3Location("ckpt", "theirs"), s3)) == 1
    assert _files(own) == _files(host) == {"step-1": "1"}
    (host / "step-1").unlink()
    (host / "step-2").write_text("2")
    sync.sync([host])
    assert _files(own) == {"step-2": "2"}
    assert _objects(s3, "theirs/") == {"step-1": "1"}


def test_tensorboard_output_goes_one_way(tmp_path: Path) -> None:
    host = tmp_path / "algo-1" / "tensorboard"
    sync = FolderSync(FolderTarget(tmp_path / "target"), what="tensorboard", mirror_deletions=False)
    sync.sync([host])  # not created yet: nothing to do
    (host / "train").mkdir(parents=True)
    (host / "train" / "events.out.tfevents.1").write_text("a")
    sync.sync([host])
    (host / "train" / "events.out.tfevents.1").write_text("ab")  # appended: changed, copied again
    (host / "train" / "events.out.tfevents.2").write_text("c")
    sync.sync([host])
    (host / "train" / "events.out.tfevents.2").unlink()
    sync.sync([host])
    assert _files(tmp_path / "target") == {"train/events.out.tfevents.1": "ab", "train/events.out.tfevents.2": "c"}


def test_links_are_never_followed_fifos_never_block_and_files_being_written_wait(tmp_path: Path) -> None:
    host = tmp_path / "algo-1"
    host.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("aws_secret_access_key = never-uploaded")
    (host / "planted").symlink_to(secret)
    (host / "linked-folder").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(host / "fifo")
    (host / ".step-3.tmp").write_text("half written")
    (host / "step-3").write_text("3")
    sync = FolderSync(FolderTarget(tmp_path / "target"), what="checkpoints", mirror_deletions=True)
    started = time.monotonic()
    assert sync.sync([host])
    assert time.monotonic() - started < 5
    assert _files(tmp_path / "target") == {"step-3": "3"}
    (host / "step-3").unlink()
    (host / "step-3").symlink_to(secret)  # a synced file replaced by a link: gone as a file, never read through
    assert sync.sync([host])
    assert _files(tmp_path / "target") == {}


class _RotatingTarget(FolderTarget):
    """A target during whose every copy the script deletes its oldest other checkpoint (``host``'s)."""

    host: Path = Path()

    def upload(self, relative: str, handle: IO[bytes]) -> None:
        super().upload(relative, handle)
        others = sorted(p for p in self.host.glob("step-*") if p.name != relative)
        if others:
            others[0].unlink()


def test_a_checkpoint_that_vanishes_during_the_sync_is_skipped(tmp_path: Path) -> None:
    host = tmp_path / "algo-1"
    host.mkdir()
    for step in range(1, 6):
        (host / f"step-{step}").write_text(str(step))
    target = _RotatingTarget(tmp_path / "target")
    object.__setattr__(target, "host", host)  # a frozen dataclass
    sync = FolderSync(target, what="checkpoints", mirror_deletions=True)
    assert sync.sync([host])  # vanished files are not failures
    assert sync.sync([host])
    assert _files(tmp_path / "target") == _files(host) == {"step-5": "5"}


class _FailingTarget(FolderTarget):
    """A target that refuses every copy until told otherwise (a full disk, a refused S3 upload)."""

    failing = True

    def upload(self, relative: str, handle: IO[bytes]) -> None:
        if type(self).failing:
            raise OSError(28, "No space left on device")
        super().upload(relative, handle)


def test_a_failing_target_is_said_once_and_the_next_sync_tries_again(tmp_path: Path) -> None:
    host = tmp_path / "algo-1"
    host.mkdir()
    (host / "a").write_text("a")
    (host / "b").write_text("b")
    said = io.StringIO()
    sync = FolderSync(_FailingTarget(tmp_path / "target"), what="checkpoints", mirror_deletions=True,
                      say=lambda message: said.write(message + "\n"))
    assert not sync.sync([host])
    assert not sync.sync([host])
    assert said.getvalue().count("No space left on device") == 1, said.getvalue()
    assert "checkpoints sync: copying it to" in said.getvalue() and "the next sync tries again" in said.getvalue()
    _FailingTarget.failing = False
    assert sync.sync([host])
    assert _files(tmp_path / "target") == {"a": "a", "b": "b"}
