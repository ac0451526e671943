"""Input channels: ``s3://`` prefixes downloaded, local folders or files copied, then given to every host.

A channel is fetched once per job into a staging folder, and each host's ``input/data/<channel>`` holds a copy of
its own (:func:`place_channel`): SageMaker's File mode ("FullyReplicated", or "ShardedByS3Key" split between the
hosts), where each instance downloads its own copy; copy-on-write clones where the file system makes them, the
staged files themselves for the last host, and never a link to the user's own files.

S3 objects land where SageMaker's File mode puts them (:func:`channel_key_path`); keys that would land on the same
file, or as a file where another key needs a folder, stop the job before anything is written, naming both keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from smddp_compat.local_mode.s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.errors import ChannelError

__all__ = [
    "stage_channels",
    "place_channel",
    "copy_file",
    "download_s3_channel",
    "download_s3_prefix",
    "s3_folder_holds_objects",
    "copy_s3_prefix",
    "check_local_channel",
    "channel_key_path",
    "folder_key_path",
]


_S3_FIX = "check the bucket and prefix, your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3"


def _nothing_under(channel: str, location: S3Location) -> ChannelError:
    return ChannelError(channel, location.uri, "no object exists under this prefix",
                        "upload the data there or fix the URI")


def channel_key_path(key: str, prefix: str) -> str:
    """Where object ``key`` lands in a channel's folder, for SageMaker's File mode of an ``S3Prefix``.

    A prefix read as a folder, the common case (``s3://bucket/data/train`` holding ``data/train/a.csv``), gives each
    object's key relative to ``prefix/``: ``a.csv``, as on SageMaker and in the SageMaker SDK's local mode. A prefix
    that is one object gives its file name. SageMaker also takes every other object whose key merely starts with
    the prefix (``data/train.csv``, ``data/train-b/a.csv`` for ``data/train``); those keep their key relative to
    the prefix's own folder (``train.csv``, ``train-b/a.csv``), so that two of them never silently become one
    file (a remaining clash is refused by :func:`download_s3_channel`, naming both keys).

    Args:
        key: An object key that starts with ``prefix``.
        prefix: The channel's key prefix (``S3Uri`` without bucket).

    Returns:
        The relative path, ``/``-separated.
    """
    if key == prefix:
        return PurePosixPath(key).name
    folder = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"
    if key.startswith(folder):
        return key[len(folder) :]
    return key[prefix.rfind("/") + 1 :]


def folder_key_path(key: str, prefix: str) -> str | None:
    """Where object ``key`` lands when ``prefix`` names a folder (as ``CheckpointConfig.S3Uri`` does, synced both
    ways): its key relative to ``prefix/``; a prefix that is one object gives its file name.

    Args:
        key: An object key that starts with ``prefix``.
        prefix: The folder's key prefix, with or without its final ``/``.

    Returns:
        The relative path, or None when ``key`` is not in the folder (``data/train-b/a.csv`` for ``data/train``).
    """
    if key == prefix:
        return PurePosixPath(key).name
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    return key[len(folder) :] if key.startswith(folder) else None


def _plan_downloads(
    keys: list[str], place: Callable[[str], str | None], *, channel: str, uri: str
) -> list[tuple[str, tuple[str, ...]]]:
    """Each key and the path parts it is written at; refuses keys that leave the folder or collide."""
    files: dict[tuple[str, ...], str] = {}
    folders: dict[tuple[str, ...], str] = {}
    plan: list[tuple[str, tuple[str, ...]]] = []
    fix = "rename or remove one of the two objects, or narrow the channel's prefix (end it with '/')"
    for key in keys:
        relative = place(key)
        if relative is None:
            continue
        parts = tuple(part for part in relative.split("/") if part)
        if not parts or any(part in ("..", ".") for part in parts):
            raise ChannelError(
                channel, uri, f"object key {key!r} would be written outside the channel folder",
                "rename the object so that its key has no '.' or '..' segments",
            )
        shown = "/".join(parts)
        if parts in files:
            raise ChannelError(channel, uri, f"objects {files[parts]!r} and {key!r} would both be written as the "
                               f"file {shown!r}", fix)
        if parts in folders:
            raise ChannelError(channel, uri, f"object {key!r} would be written as the file {shown!r}, which object "
                               f"{folders[parts]!r} needs as a folder", fix)
        for depth in range(1, len(parts)):
            above = parts[:depth]
            if above in files:
                raise ChannelError(channel, uri, f"object {files[above]!r} would be written as the file "
                                   f"{'/'.join(above)!r}, which object {key!r} needs as a folder", fix)
            folders.setdefault(above, key)
        files[parts] = key
        plan.append((key, parts))
    return plan


def _download(
    location: S3Location,
    destination: Path,
    place: Callable[[str], str | None],
    *,
    channel: str,
    client: Any | None,
) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    client = client if client is not None else make_s3_client()
    try:
        keys = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=location.prefix)
            for item in page.get("Contents", [])
            if not item["Key"].endswith("/")  # a "folder" marker object
        ]
        # Every key is placed and checked before the first byte is written: a collision leaves nothing behind.
        plan = _plan_downloads(keys, place, channel=channel, uri=location.uri)
        destination.mkdir(parents=True, exist_ok=True)
        for key, parts in plan:
            target = destination.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(location.bucket, key, str(target))
    except (BotoCoreError, ClientError) as exc:
        raise ChannelError(channel, location.uri, f"download failed ({exc})", _S3_FIX) from exc
    if not plan:
        raise _nothing_under(channel, location)
    return len(plan)


def download_s3_channel(
    location: S3Location, destination: Path, *, channel: str, client: Any | None = None
) -> int:
    """Downloads a channel's ``S3Prefix`` into ``destination`` as SageMaker's File mode lays it out
    (:func:`channel_key_path`: every object whose key starts with the prefix, at its key relative to the prefix's
    folder); returns the number of files downloaded. ``channel`` is named in errors; ``client`` None: one from
    :func:`smddp_compat.local_mode.s3.make_s3_client`.

    Raises:
        ChannelError: The prefix holds no object; a key would land outside ``destination``; two keys would land on
            the same file, or one as a file where another needs a folder (``a/b`` and ``a/b/c``; both named, nothing
            written); or S3 failed.
    """
    return _download(
        location, destination, lambda key: channel_key_path(key, location.prefix), channel=channel, client=client
    )


def s3_folder_holds_objects(location: S3Location, *, channel: str, client: Any) -> bool:
    """Whether the S3 "folder" ``location`` (its keys under ``prefix/``, as :func:`folder_key_path` reads them) holds
    any object; ``channel`` is named in errors.

    Raises:
        ChannelError: S3 failed (no such bucket, no access, no endpoint).
    """
    from botocore.exceptions import BotoCoreError, ClientError  # botocore: only when S3 is used

    prefix = location.prefix
    try:
        listed = client.list_objects_v2(
            Bucket=location.bucket, Prefix=prefix if not prefix or prefix.endswith("/") else prefix + "/", MaxKeys=1)
    except (BotoCoreError, ClientError) as exc:
        raise ChannelError(channel, location.uri, f"listing failed ({exc})", _S3_FIX) from exc
    return bool(listed.get("KeyCount"))


def download_s3_prefix(
    location: S3Location, destination: Path, *, channel: str, client: Any | None = None
) -> int:
    """Downloads the S3 "folder" ``location`` into ``destination``, keeping the layout below it
    (:func:`folder_key_path`: ``s3://b/ckpt`` and ``s3://b/ckpt/`` both mean the keys under ``ckpt/``), as a
    checkpoint folder is synced; arguments and result as :func:`download_s3_channel`, which a channel uses.

    Raises:
        ChannelError: As :func:`download_s3_channel`.
    """
    return _download(
        location, destination, lambda key: folder_key_path(key, location.prefix), channel=channel, client=client
    )


def copy_s3_prefix(
    location: S3Location, source: Any, target: Any, *, channel: str, staged: Path | None = None
) -> int:
    """Copies every object SageMaker's ``S3Prefix`` would read under ``location`` (every key starting with its
    prefix, but "folder" marker objects) from the ``source`` S3 to the same bucket and key in the ``target`` S3, one
    object at a time (large channels stay off memory); one already downloaded into ``staged`` (File mode's layout,
    :func:`channel_key_path`) is uploaded from there. The bucket is created in ``target``; ``channel`` is named in
    errors. Returns the number of objects copied.

    Raises:
        ChannelError: The objects could not be listed, read or written, or there is none.
    """
    from botocore.exceptions import BotoCoreError, ClientError  # botocore: only when S3 is used

    with contextlib.suppress(ClientError):  # already there (another channel in the same bucket)
        target.create_bucket(Bucket=location.bucket)
    copied = 0
    try:
        pages = source.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=location.prefix)
        for key in (item["Key"] for page in pages for item in page.get("Contents", [])):
            if key.endswith("/"):  # a "folder" marker object: not a file of the channel
                continue
            local = staged.joinpath(*channel_key_path(key, location.prefix).split("/")) if staged else None
            if local is not None and local.is_file():
                target.upload_file(str(local), location.bucket, key)
            else:
                with tempfile.TemporaryFile() as data:
                    source.download_fileobj(location.bucket, key, data)
                    data.seek(0)
                    target.upload_fileobj(data, location.bucket, key)
            copied += 1
    except (BotoCoreError, ClientError) as exc:
        raise ChannelError(channel, location.uri, f"could not be copied ({exc})", _S3_FIX) from exc
    if not copied:
        raise _nothing_under(channel, location)
    return copied


def stage_channels(
    channels: Mapping[str, str],
    staging_dir: Path,
    *,
    client_factory: Callable[[], Any] = make_s3_client,
) -> dict[str, Path]:
    """Fetches every channel once into ``staging_dir/<name>``: an ``s3://`` prefix downloaded as SageMaker's File mode
    lays it out, a local folder or file copied as the SDK uploads one (:func:`_copy_folder`), so that a script that
    tidies its input never changes the user's own files.

    ``channels`` as a validated ``JobSpec`` holds them; ``client_factory`` is called once, only if a channel is on
    S3. Returns channel name -> its staged folder (then placed in every host by :func:`place_channel`).

    Raises:
        ChannelError: A channel could not be fetched, or holds a FIFO, socket or device.
    """
    staged: dict[str, Path] = {}
    client = None
    for name, source in channels.items():
        target = staging_dir / name
        if is_s3_uri(source):
            client = client if client is not None else client_factory()
            download_s3_channel(parse_s3_uri(source, f"channels[{name!r}]"), target, channel=name, client=client)
        elif Path(source).is_dir():
            _copy_folder(name, source, target)
        elif Path(source).is_file():
            target.mkdir(parents=True)
            _copy_data_file(name, source, source, target / Path(source).name)
        elif Path(source).exists():
            raise ChannelError(name, source, "is neither a folder nor a regular file (a FIFO, socket or device)",
                               "give a folder or a file of data")
        else:
            raise ChannelError(name, source, "the path no longer exists", "give an existing folder or file")
        staged[name] = target
    return staged


def _refuse_no_data(channel: str, source: str, path: str) -> None:
    """Refuses a file of a channel that is no data: a FIFO (reading it waits for a writer), a socket or a device
    (``/dev/zero`` never ends), also behind a link."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ChannelError(channel, source, f"{path} is not a regular file (a FIFO, socket or device), which cannot "
                           "be read as data", "remove it from the channel's folder")


def _copy_data_file(channel: str, source: str, path: str, target: str | Path) -> Any:
    _refuse_no_data(channel, source, path)
    return shutil.copy2(path, target)


def check_local_channel(channel: str, source: str) -> None:
    """Before a local channel is uploaded (``smddp submit``, ``smddp local --backend docker``): refuses what the SDK's
    ``upload_data`` would hang on or never finish reading, as :func:`stage_channels` refuses it; the folder is walked
    as ``upload_data`` walks it (``os.walk``: links to files read, links to folders not followed).

    Raises:
        ChannelError: A FIFO, socket or device in the channel (or as it), or a link that leads nowhere.
    """
    try:
        paths = [source] if not os.path.isdir(source) else [
            os.path.join(folder, name) for folder, _folders, names in os.walk(source) for name in names]
        for path in paths:
            _refuse_no_data(channel, source, path)
    except OSError as exc:
        raise ChannelError(channel, source, f"cannot be read ({exc})",
                           "make every file under it readable (and remove links that lead nowhere)") from exc


def _copy_folder(channel: str, source: str, target: Path) -> None:
    """Copies a channel's folder as the SageMaker SDK's ``upload_data`` reads one (``os.walk``): links to files are
    read as the files, links to folders are not followed (a link loop cannot make the copy endless)."""

    def linked_folders(folder: str, names: list[str]) -> list[str]:
        return [name for name in names
                if os.path.islink(os.path.join(folder, name)) and os.path.isdir(os.path.join(folder, name))]

    try:
        shutil.copytree(source, target, ignore=linked_folders,
                        copy_function=lambda path, to: _copy_data_file(channel, source, path, to))
    except (OSError, shutil.Error) as exc:
        raise ChannelError(channel, source, f"could not be copied for the job ({exc})",
                           "make every file under it readable (and remove links that lead nowhere)") from exc


def place_channel(staged: Path, targets: Sequence[Path], *, sharded: bool = False) -> None:
    """Gives each host its own ``input/data/<channel>`` from a staged channel, as SageMaker's File mode gives each
    instance its own copy: a host that rewrites a file in place changes no other host's file, and never the user's
    data. The first hosts get copies (copy-on-write clones where the file system makes them, :func:`copy_file`), the
    last one the staged files themselves, moved; ``sharded`` (``ShardedByS3Key``) splits the files between the hosts
    (each file moved to its one host). The staged folder is left empty.

    Args:
        staged: The channel's staged folder (:func:`stage_channels`), consumed.
        targets: Each host's channel folder, in host order.
        sharded: Give host ``i`` every ``len(targets)``-th file from the ``i``-th; else every host all of them.
    """
    files = sorted(path for path in staged.rglob("*") if path.is_file())
    for index, target in enumerate(targets):
        target.mkdir(parents=True, exist_ok=True)
        last = index == len(targets) - 1
        for path in files[index :: len(targets)] if sharded else files:
            destination = target / path.relative_to(staged)
            destination.parent.mkdir(parents=True, exist_ok=True)
            if sharded or last:
                os.replace(path, destination)
            else:
                copy_file(path, destination)


#: Linux's ``FICLONE`` ioctl: make a file a copy-on-write clone of another (btrfs, XFS, bcachefs, overlayfs on them).
_FICLONE = 0x40049409


def copy_file(source: Path, destination: Path) -> None:
    """``destination`` a new file of its own with ``source``'s bytes, mode and times: a copy-on-write clone where the
    file system makes one (no bytes copied until either is written), else a copy by the kernel (``sendfile``)."""
    with open(source, "rb") as reader, open(destination, "xb") as writer:
        try:
            fcntl.ioctl(writer.fileno(), _FICLONE, reader.fileno())
            cloned = True
        except OSError:  # not a file system that clones (ext4, tmpfs), or another file system
            cloned = False
    if not cloned:
        shutil.copyfile(source, destination)
    shutil.copystat(source, destination)
