"""The twin's own S3, seen from a training script: what it finds there at the start, what it left there at the end.

On SageMaker a script may read and write S3 itself, with the role's credentials (boto3, from its channels' S3Uri,
its output path). In the twin the containers only reach the twin's own S3 (a moto server on the job's network), so
that S3 holds, from the start, what the script would find in the request's S3: the source
(``sagemaker_submit_directory``), every channel's objects at their own keys, and the request's buckets (channels,
output path, checkpoints, ``model_dir``).

Read-only, in the twin, means "never written back", not "refused". moto has no per-prefix write protection short
of enforcing IAM policies, and on SageMaker a write to an input prefix succeeds whenever the role allows it, so a
refusal would fail jobs SageMaker runs. Instead the twin compares its S3 at the end with what it staged: every
object the job wrote (new, or a staged input overwritten) is listed and kept under ``<output>/<job>/s3/<bucket>/<key>``,
every staged input it deleted is listed; nothing ever reaches the request's S3.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.folder_sync import copy_atomically

__all__ = ["ScriptWrite", "create_buckets", "snapshot", "script_writes", "KEPT_FOLDER"]

KEPT_FOLDER = "s3"
"""Where, under ``<output>/<job>/``, the objects a job wrote to the twin's S3 are kept (``s3/<bucket>/<key>``)."""

#: (bucket, key) -> (ETag, size): the twin's S3 at one moment.
Snapshot = dict[tuple[str, str], tuple[str, int]]


@dataclass(frozen=True)
class ScriptWrite:
    """One change the job made to the twin's S3.

    Attributes:
        uri: ``s3://bucket/key``.
        change: ``written`` (a new object), ``overwritten`` (a staged input replaced) or ``deleted`` (a staged
            input removed).
        size: The object's size in bytes (None when deleted).
        kept: Where a copy was kept (``<output>/<job>/s3/...``), or None.
        problem: Why no copy was kept, or None.
    """

    uri: str
    change: str
    size: int | None = None
    kept: str | None = None
    problem: str | None = None

    def describe(self) -> str:
        """One line: what changed, and where it is kept (or why not)."""
        if self.change == "deleted":
            return f"{self.uri}: a staged input deleted by the job (not deleted from your S3)"
        what = ("written by the job" if self.change == "written"
                else "a staged input overwritten by the job (your S3 still holds the original)")
        where = f"kept at {self.kept}" if self.kept else f"not kept: {self.problem}"
        return f"{self.uri}: {what}, {self.size} bytes; {where}"


def create_buckets(client: Any, buckets: Iterable[str]) -> None:
    """Creates each bucket in the twin's S3 (once)."""
    for bucket in sorted(set(buckets)):
        client.create_bucket(Bucket=bucket)


def snapshot(client: Any) -> Snapshot:
    """Every object of the twin's S3, with its ETag and size."""
    found: Snapshot = {}
    for bucket in client.list_buckets().get("Buckets", []):
        name = bucket["Name"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                found[(name, item["Key"])] = (item["ETag"], int(item["Size"]))
    return found


def script_writes(client: Any, staged: Snapshot, destination: Path | S3Location, user_s3: Any) -> list[ScriptWrite]:
    """What the job changed in the twin's S3 since ``staged``; a copy of each object it wrote is kept under
    ``destination/s3/<bucket>/<key>`` (a folder, or an S3 location of the request's S3 through ``user_s3``).

    A key that cannot be a path (a segment ``..``, ``.`` or empty, or a file where another key needs a folder) is
    listed with the reason it was not kept; the job's outcome never depends on it.
    """
    now = snapshot(client)
    writes: list[ScriptWrite] = []
    for (bucket, key), (etag, size) in sorted(now.items()):
        before = staged.get((bucket, key))
        if before is not None and before[0] == etag:
            continue
        change = "written" if before is None else "overwritten"
        uri = f"s3://{bucket}/{key}"
        try:
            kept = _keep(client, bucket, key, destination, user_s3)
        except Exception as exc:  # noqa: BLE001 - OSError, botocore's errors, an unsafe key: listed, never fatal
            writes.append(ScriptWrite(uri, change, size, problem=f"{type(exc).__name__}: {exc}"))
        else:
            writes.append(ScriptWrite(uri, change, size, kept=kept))
    for bucket, key in sorted(set(staged) - set(now)):
        writes.append(ScriptWrite(f"s3://{bucket}/{key}", "deleted"))
    return writes


def _keep(client: Any, bucket: str, key: str, destination: Path | S3Location, user_s3: Any) -> str:
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    if isinstance(destination, S3Location):
        target = destination.child(KEPT_FOLDER, bucket, key)
        user_s3.upload_fileobj(body, target.bucket, target.prefix)
        return target.uri
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"the key {key!r} has an empty, '.' or '..' segment, which no file path can hold")
    path = destination.joinpath(KEPT_FOLDER, bucket, *parts)
    copy_atomically(body, path)
    return os.fspath(path)
