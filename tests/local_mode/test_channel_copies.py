"""A local channel is copied for the job as the SDK's upload reads a folder, and what is no data ends the copy with a
clear error instead of blocking or filling the disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smddp_compat.local_mode.channels import stage_channels
from smddp_compat.local_mode.errors import ChannelError


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "rows.csv").write_text("1,2\n")
    outside = tmp_path / "elsewhere.csv"
    outside.write_text("3,4\n")
    (data / "linked.csv").symlink_to(outside)
    (data / "loop").symlink_to(data, target_is_directory=True)  # a folder link back to itself
    return data


def test_links_to_files_are_read_and_links_to_folders_are_not_followed(tmp_path: Path) -> None:
    staged = stage_channels({"train": str(_data(tmp_path))}, tmp_path / "staging")["train"]
    files = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert files == ["linked.csv", "sub/rows.csv"]
    assert not (staged / "linked.csv").is_symlink() and (staged / "linked.csv").read_text() == "3,4\n"
    assert not any(p.is_symlink() for p in staged.rglob("*"))  # nothing of the job's copy leads to the user's files


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_a_fifo_or_a_device_in_the_folder_is_refused_by_name(tmp_path: Path, special: str) -> None:
    data = _data(tmp_path)
    if special == "fifo":
        os.mkfifo(data / "sub" / "pipe")  # reading it would wait for a writer forever
    else:
        (data / "sub" / "pipe").symlink_to("/dev/zero")  # reading it would never end
    with pytest.raises(ChannelError, match=r"sub/pipe is not a regular file \(a FIFO, socket or device\)") as caught:
        stage_channels({"train": str(data)}, tmp_path / "staging")
    assert caught.value.fix == "remove it from the channel's folder"


def test_a_channel_that_is_a_fifo_itself_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ChannelError, match="neither a folder nor a regular file"):
        stage_channels({"train": str(tmp_path / "pipe")}, tmp_path / "staging")


def test_the_check_before_an_upload_refuses_what_the_copy_refuses(tmp_path: Path) -> None:
    from smddp_compat.local_mode.channels import check_local_channel

    data = _data(tmp_path)
    check_local_channel("train", str(data))  # a link loop is not followed, as os.walk (the SDK's upload) does not
    os.mkfifo(data / "sub" / "pipe")
    with pytest.raises(ChannelError, match=r"sub/pipe is not a regular file"):
        check_local_channel("train", str(data))
    os.mkfifo(tmp_path / "alone")
    with pytest.raises(ChannelError, match="alone is not a regular file"):
        check_local_channel("train", str(tmp_path / "alone"))
