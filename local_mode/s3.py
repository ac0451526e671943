"""S3 addressing shared by channels and artifacts: ``s3://`` URI parsing and a boto3 client that honours
``AWS_ENDPOINT_URL`` (so tests and users can point local mode at moto's server or another S3-compatible store).

boto3 is imported only when a client is made: importing local_mode must stay cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from smddp_compat.local_mode.errors import ConfigurationError

__all__ = ["S3Location", "is_s3_uri", "parse_s3_uri", "make_s3_client", "check_s3_destination"]

_SCHEME = "s3://"
#: What a job writes under ``<output>/<job name>/`` (artifacts, logs), as SageMaker lays it out.
_RESULT_FOLDERS = ("output", "logs")


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix (no leading slash; may be empty)."""

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        """The location as an ``s3://bucket/prefix`` URI."""
        return f"{_SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{_SCHEME}{self.bucket}"

    def child(self, *parts: str) -> "S3Location":
        """The location of ``parts`` joined under this prefix with ``/``."""
        pieces = [self.prefix.rstrip("/")] if self.prefix.rstrip("/") else []
        pieces.extend(p.strip("/") for p in parts if p.strip("/"))
        return S3Location(self.bucket, "/".join(pieces))


def is_s3_uri(value: str) -> bool:
    """Whether ``value`` is meant as an S3 URI (starts with ``s3://``, any case)."""
    return value[: len(_SCHEME)].lower() == _SCHEME


def parse_s3_uri(value: str, field: str) -> S3Location:
    """Split ``s3://bucket/prefix`` into bucket and prefix; ``field``, the setting it came from, is named in errors.

    Raises:
        ConfigurationError: ``value`` has no bucket, or the bucket name is not a valid S3 bucket name.
    """
    rest = value[len(_SCHEME) :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigurationError(field, value, "the S3 URI names no bucket", "write it as s3://BUCKET/PREFIX")
    if not (3 <= len(bucket) <= 63) or not all(c.islower() or c.isdigit() or c in ".-" for c in bucket):
        raise ConfigurationError(
            field,
            value,
            f"{bucket!r} is not a valid S3 bucket name (3-63 characters: lower-case letters, digits, '.', '-')",
            "use the name of an existing bucket, e.g. s3://my-bucket/prefix",
        )
    return S3Location(bucket, prefix)


def make_s3_client() -> Any:
    """A boto3 S3 client; ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` selects the endpoint when set.

    Returns:
        A ``botocore`` S3 client.

    Raises:
        ImportError: boto3 is not installed (the message says how to install it).
    """
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - boto3 is a dependency of the project
        raise ImportError("s3:// channels and outputs need boto3: pip install 'boto3>=1.34'") from exc
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    # Bounded waits: an unreachable endpoint fails the job in seconds instead of hanging it.
    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint, config=config)


def check_s3_destination(location: S3Location, field: str, job_name: str, client: Any | None = None) -> None:
    """Checks, before a job starts, that its results can go to ``location`` (``<output>/<job name>``).

    ``field``, the setting that chose it, is named in errors; ``client`` None: one from :func:`make_s3_client`.

    Raises:
        ConfigurationError: The bucket cannot be reached (missing, no access, no endpoint), or results already exist
            under ``location`` (in ``output/`` or ``logs/``: a job's results are never written over another's; the
            job's uploaded source, which the SDK puts under ``source/``, is not a result).
    """
    client = client if client is not None else make_s3_client()
    try:
        client.head_bucket(Bucket=location.bucket)
        found = [
            key
            for part in _RESULT_FOLDERS
            for key in (client.list_objects_v2(Bucket=location.bucket, Prefix=location.child(part).prefix + "/",
                                               MaxKeys=1).get("Contents") or [])
        ]
    except Exception as exc:  # noqa: BLE001 - botocore raises several unrelated types here
        raise ConfigurationError(
            field, location.uri, f"cannot be reached ({exc})",
            "create the bucket or fix the URI; check your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3",
        ) from exc
    if found:
        raise ConfigurationError(
            "job_name", job_name, f"already has results under {location.uri}/ ({found[0]['Key']}); a job never "
            "writes over another's",
            "choose another job name (or leave it out to get a fresh one)",
        )
