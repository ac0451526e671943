"""Input channels: local folders or files linked in, ``s3://`` prefixes downloaded, then shown to every host.

A channel is fetched once per job into a staging folder (S3) or used in place (local folder), and each host's
``input/data/<channel>`` is a symbolic link to it: SageMaker's "FullyReplicated" File mode, without copying the data
H times. Scripts must treat channel folders as read-only, as on SageMaker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from smddp_compat.local_mode._s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.errors import ChannelError
from smddp_compat.local_mode.layout import HostLayout

__all__ = ["stage_channels", "link_channels", "download_s3_prefix"]


def _relative_key(key: str, prefix: str) -> str:
    """Where object ``key`` lands under the channel folder, as SageMaker places S3Prefix objects."""
    if prefix and not prefix.endswith("/") and key != prefix and not key.startswith(prefix + "/"):
        return PurePosixPath(key).name  # prefix "data/train" matched "data/train.csv": keep the file name
    if key == prefix:
        return PurePosixPath(key).name  # the prefix is one object
    return key[len(prefix) :].lstrip("/")


def download_s3_prefix(
    location: S3Location, destination: Path, *, channel: str, client: Any | None = None
) -> int:
    """Downloads every object under ``location`` into ``destination``, keeping the layout below the prefix.

    Args:
        location: The bucket and prefix.
        destination: The folder to fill (created).
        channel: The channel's name (for errors).
        client: A boto3 S3 client (one from :func:`smddp_compat.local_mode._s3.make_s3_client` when None).

    Returns:
        The number of files downloaded.

    Raises:
        ChannelError: The prefix holds no object, an object key would land outside ``destination``, or S3 failed.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = client if client is not None else make_s3_client()
    destination.mkdir(parents=True, exist_ok=True)
    count = 0
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=location.prefix)
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"]
                if key.endswith("/"):
                    continue  # a "folder" marker object
                relative = _relative_key(key, location.prefix)
                parts = PurePosixPath(relative).parts
                if not parts or any(part in ("..", ".") for part in parts):
                    raise ChannelError(
                        channel, location.uri, f"object key {key!r} would be written outside the channel folder",
                        "rename the object so that its key has no '.' or '..' segments",
                    )
                target = destination.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(location.bucket, key, str(target))
                count += 1
    except (BotoCoreError, ClientError) as exc:
        raise ChannelError(
            channel, location.uri, f"download failed ({exc})",
            "check the bucket and prefix, your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3",
        ) from exc
    if count == 0:
        raise ChannelError(
            channel, location.uri, "no object exists under this prefix", "upload the data there or fix the URI"
        )
    return count


def stage_channels(
    channels: Mapping[str, str],
    staging_dir: Path,
    *,
    client_factory: Callable[[], Any] = make_s3_client,
) -> dict[str, Path]:
    """Makes every channel available as a local folder.

    Args:
        channels: Channel name -> absolute local path or ``s3://`` URI (as a validated ``JobSpec`` holds them).
        staging_dir: Folder for downloaded channels and for wrappers around single files.
        client_factory: Makes the S3 client (called once, only if a channel is on S3).

    Returns:
        Channel name -> the folder each host's ``input/data/<name>`` should point to.

    Raises:
        ChannelError: A channel could not be fetched.
    """
    staged: dict[str, Path] = {}
    client = None
    for name, source in channels.items():
        if is_s3_uri(source):
            client = client if client is not None else client_factory()
            target = staging_dir / name
            download_s3_prefix(parse_s3_uri(source, f"channels[{name!r}]"), target, channel=name, client=client)
            staged[name] = target
            continue
        path = Path(source)
        if path.is_dir():
            staged[name] = path
        elif path.is_file():
            wrapper = staging_dir / name
            wrapper.mkdir(parents=True, exist_ok=True)
            (wrapper / path.name).symlink_to(path)
            staged[name] = wrapper
        else:
            raise ChannelError(name, source, "the path no longer exists", "give an existing folder or file")
    return staged


def link_channels(layout: HostLayout, staged: Mapping[str, Path]) -> None:
    """Points ``input/data/<name>`` of one host at each staged channel folder.

    Args:
        layout: The host's tree.
        staged: Channel name -> folder (from :func:`stage_channels`).
    """
    for name, folder in staged.items():
        link = layout.channel_dir(name)
        if link.is_symlink() or link.exists():
            raise ChannelError(name, str(folder), f"{link} already exists", "use each channel name once")
        os.symlink(folder, link, target_is_directory=True)
