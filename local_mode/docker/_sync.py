"""Folders the twin keeps in step with S3 while a job runs (checkpoints): what the job wrote is data, never a path
to follow; a file that vanishes during a sync is skipped."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from smddp_compat.local_mode._s3 import S3Location

__all__ = ["links_and_special_files", "copy_atomically", "has_objects"]


def links_and_special_files(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree``'s ignore: what is not a regular file or a folder (links, FIFOs, devices) is left out."""
    return {name for name in names
            if not (stat.S_ISREG(mode := os.lstat(os.path.join(folder, name)).st_mode) or stat.S_ISDIR(mode))}


def copy_atomically(handle: IO[bytes], destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=destination.parent, prefix=f".{destination.name}.", delete=False) as copy:
        try:
            shutil.copyfileobj(handle, copy)
            copy.flush()
            os.fsync(copy.fileno())
        except BaseException:
            os.unlink(copy.name)
            raise
    os.replace(copy.name, destination)


def has_objects(location: S3Location, client: Any) -> bool:
    """Whether anything is stored under ``location`` (a first run has no checkpoints yet)."""
    return bool(client.list_objects_v2(Bucket=location.bucket, Prefix=location.prefix, MaxKeys=1).get("KeyCount"))

