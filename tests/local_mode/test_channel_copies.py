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


def test_each_host_gets_a_copy_of_its_own_that_an_in_place_write_changes_alone(tmp_path: Path) -> None:
    from smddp_compat.local_mode.channels import place_channel

    staged = stage_channels({"train": str(_data(tmp_path))}, tmp_path / "staging")["train"]
    hosts = [tmp_path / "algo-1", tmp_path / "algo-2", tmp_path / "algo-3"]
    place_channel(staged, hosts)
    with open(hosts[1] / "sub" / "rows.csv", "r+") as rewritten:  # rewritten in place: no new inode
        rewritten.write("9,9")
    assert [(host / "sub" / "rows.csv").read_text() for host in hosts] == ["1,2\n", "9,9\n", "1,2\n"]
    assert len({(host / "sub" / "rows.csv").stat().st_ino for host in hosts}) == 3
    assert all((host / "sub" / "rows.csv").stat().st_nlink == 1 for host in hosts)
    assert not any(p.is_file() for p in staged.rglob("*"))  # the last host took the staged files themselves
    assert (tmp_path / "data" / "sub" / "rows.csv").read_text() == "1,2\n"  # and the user's data never changed


def test_a_sharded_channel_gives_each_file_to_one_host(tmp_path: Path) -> None:
    from smddp_compat.local_mode.channels import place_channel

    staged = tmp_path / "staged"
    staged.mkdir()
    for index in range(5):
        (staged / f"part-{index}").write_text(str(index))
    hosts = [tmp_path / "algo-1", tmp_path / "algo-2"]
    place_channel(staged, hosts, sharded=True)
    assert [sorted(p.name for p in host.iterdir()) for host in hosts] == [
        ["part-0", "part-2", "part-4"], ["part-1", "part-3"]]
