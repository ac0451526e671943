"""A finished job's artifacts, stored where SageMaker stores them.

Under ``<output_path>/<job_name>/``:

* ``output/model.tar.gz``: the model folder of ``algo-1`` (the host of rank 0 / the chief, the only one that should
  save; SageMaker uploads every host's model folder to the same key, so the chief's is the one that counts);
* ``output/output.tar.gz``: ``algo-1``'s ``output/data`` at the top level, and any other host's non-empty
  ``output/data`` under ``algo-N/`` (SageMaker would keep only one host's; nothing is dropped here);
* ``logs/<host>.log``: each host's log.

Tarballs are written to a temporary file in the destination folder and renamed into place, so a reader never sees
a half-written one; ``output_path`` may also be ``s3://bucket/prefix`` (uploaded with boto3; an S3 object appears
whole or not at all).
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from smddp_compat.local_mode._s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.errors import ArtifactError

__all__ = ["ArtifactPaths", "pack_tarball", "job_destination", "store_artifacts"]

MODEL_TARBALL = "model.tar.gz"
OUTPUT_TARBALL = "output.tar.gz"


@dataclass(frozen=True)
class ArtifactPaths:
    """Where a job's artifacts ended up (local paths or ``s3://`` URIs).

    Attributes:
        model: ``model.tar.gz``, or None when it was not written (the job failed).
        output: ``output.tar.gz``.
        logs: Host name -> its log.
    """

    model: str | None
    output: str | None
    logs: Mapping[str, str] = field(default_factory=dict)


def pack_tarball(members: Mapping[str, Path], destination: Path) -> Path:
    """Writes a gzip tarball of folders atomically.

    Args:
        members: Name inside the archive (``""`` for the top level) -> folder whose content goes there.
        destination: The tarball's path; its folder is created.

    Returns:
        ``destination``.

    Raises:
        ArtifactError: The tarball could not be written (the destination is left untouched).
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    try:
        with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as archive:
            for arcname, folder in members.items():
                for child in sorted(folder.iterdir()):
                    archive.add(str(child), arcname=f"{arcname}/{child.name}" if arcname else child.name)
        os.replace(temporary, destination)
    except (OSError, tarfile.TarError) as exc:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise ArtifactError(
            f"could not write {destination}: {exc}. Fix: free disk space or choose another output path"
        ) from exc
    return destination


def job_destination(output_path: str, job_name: str) -> Path | S3Location:
    """``<output_path>/<job_name>`` as a local folder or an S3 location.

    Args:
        output_path: A validated ``JobSpec.output_path``.
        job_name: The job's name.

    Returns:
        The folder or S3 location.
    """
    if is_s3_uri(output_path):
        return parse_s3_uri(output_path, "output_path").child(job_name)
    return Path(output_path) / job_name


def _non_empty(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _output_members(output_data_dirs: Mapping[str, Path]) -> dict[str, Path]:
    hosts = list(output_data_dirs)
    members = {"": output_data_dirs[hosts[0]]}
    members.update({host: output_data_dirs[host] for host in hosts[1:] if _non_empty(output_data_dirs[host])})
    return members


def store_artifacts(
    destination: Path | S3Location,
    *,
    model_dir: Path | None,
    output_data_dirs: Mapping[str, Path],
    log_files: Mapping[str, Path],
    scratch_dir: Path,
) -> ArtifactPaths:
    """Packs and stores a job's artifacts.

    Args:
        destination: From :func:`job_destination`.
        model_dir: The chief host's model folder, or None to write no ``model.tar.gz``.
        output_data_dirs: Host name -> its ``output/data`` folder, ``algo-1`` first.
        log_files: Host name -> its log file (already in place for a local destination; uploaded for S3).
        scratch_dir: A folder for the tarballs before upload (S3 only).

    Returns:
        Where everything is.

    Raises:
        ArtifactError: Packing or uploading failed.
    """
    if isinstance(destination, Path):
        output_folder = destination / "output"
        model = pack_tarball({"": model_dir}, output_folder / MODEL_TARBALL) if model_dir is not None else None
        output = pack_tarball(_output_members(output_data_dirs), output_folder / OUTPUT_TARBALL)
        return ArtifactPaths(
            model=str(model) if model else None,
            output=str(output),
            logs={host: str(path) for host, path in log_files.items()},
        )

    from botocore.exceptions import BotoCoreError, ClientError

    uploads: list[tuple[Path, S3Location]] = []
    model_location = output_location = None
    if model_dir is not None:
        model_location = destination.child("output", MODEL_TARBALL)
        uploads.append((pack_tarball({"": model_dir}, scratch_dir / MODEL_TARBALL), model_location))
    output_location = destination.child("output", OUTPUT_TARBALL)
    uploads.append((pack_tarball(_output_members(output_data_dirs), scratch_dir / OUTPUT_TARBALL), output_location))
    log_locations = {}
    for host, path in log_files.items():
        if path.exists():
            log_locations[host] = destination.child("logs", path.name)
            uploads.append((path, log_locations[host]))
    client = make_s3_client()
    for path, location in uploads:
        try:
            client.upload_file(str(path), location.bucket, location.prefix)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise ArtifactError(
                f"could not upload {path.name} to {location.uri}: {exc}. "
                "Fix: check the bucket exists, your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3"
            ) from exc
    return ArtifactPaths(
        model=model_location.uri if model_location else None,
        output=output_location.uri,
        logs={host: location.uri for host, location in log_locations.items()},
    )
