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

What a job left in these folders is data, never a path to follow (:mod:`smddp_compat.job_files`): only regular files
and folders are packed, each file opened without following a link anywhere below the host's tree; a symbolic link is
stored as a link only when it resolves inside the folder being packed; links leading out, FIFOs, devices and
sockets are left out, and so is a model or output folder that the job replaced with a link. Each left-out entry is
logged as a warning and listed in :attr:`ArtifactPaths.skipped`.
"""

from __future__ import annotations

import logging
import os
import stat
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from smddp_compat import contract
from smddp_compat.job_files import (
    UnsafeJobFileError,
    describe_file_type,
    iter_job_tree,
    link_stays_inside,
    open_job_file,
)
from smddp_compat.local_mode._s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.errors import ArtifactError

__all__ = ["ArtifactPaths", "pack_tarball", "job_destination", "store_artifacts"]

MODEL_TARBALL = "model.tar.gz"
OUTPUT_TARBALL = "output.tar.gz"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactPaths:
    """Where a job's artifacts ended up (local paths or ``s3://`` URIs).

    Attributes:
        model: ``model.tar.gz``, or None when it was not written (the job failed).
        output: ``output.tar.gz``.
        logs: Host name -> its log.
        skipped: What the job left in its folders that was not packed, each with the reason (links leading out of
            the folder, FIFOs, devices, sockets, a folder replaced with a link).
    """

    model: str | None
    output: str | None
    logs: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()


def _plain_folder(folder: Path, root: Path) -> str | None:
    """Why ``folder`` cannot be packed (a link on its way below ``root``, or not a folder), or None when it can."""
    try:
        relative = folder.relative_to(root)
    except ValueError:
        relative = Path(folder.name)
        root = folder.parent
    current = root
    for part in relative.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return f"{current} does not exist"
        if not stat.S_ISDIR(mode):
            return f"{current} is {describe_file_type(mode)}, not a folder: the folder was not packed"
    return None


def _add_folder(archive: tarfile.TarFile, arcname: str, folder: Path, root: Path, skipped: list[str]) -> None:
    """Adds ``folder``'s content under ``arcname``; what is not a file, folder or inner link goes to ``skipped``."""
    problem = _plain_folder(folder, root)
    if problem is not None:
        skipped.append(problem)
        return
    for relative, info in iter_job_tree(folder):
        name = f"{arcname}/{relative}" if arcname else relative
        path = folder / relative
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            archive.addfile(archive.gettarinfo(str(path), arcname=name))
        elif stat.S_ISREG(mode):
            try:
                with open_job_file(path, root) as handle:
                    archive.addfile(archive.gettarinfo(arcname=name, fileobj=handle), handle)
            except FileNotFoundError:
                continue  # removed while the job's processes were still being stopped
            except UnsafeJobFileError as exc:
                skipped.append(f"{path}: {exc.problem}")
        elif stat.S_ISLNK(mode):
            if not link_stays_inside(path, folder):
                skipped.append(f"{path}: a link to {os.readlink(path)}, outside {folder}")
                continue
            member = archive.gettarinfo(str(path), arcname=name)
            # Relative, so that it resolves wherever the archive is extracted.
            member.linkname = os.path.relpath(os.path.realpath(path), os.path.realpath(path.parent))
            archive.addfile(member)
        else:
            skipped.append(f"{path}: {describe_file_type(mode)}, not a regular file")


def pack_tarball(
    members: Mapping[str, Path],
    destination: Path,
    *,
    roots: Mapping[str, Path] | None = None,
    left_out: list[str] | None = None,
) -> Path:
    """Writes a gzip tarball of folders a job wrote, atomically, following no link.

    Args:
        members: Name inside the archive (``""`` for the top level) -> folder whose content goes there.
        destination: The tarball's path; its folder is created.
        roots: Name inside the archive -> the job's tree its folder belongs to: no link is followed below it
            (default: the folder's parent).
        left_out: Receives what was not packed, one line each (the path and why); each is also logged.

    Returns:
        ``destination``.

    Raises:
        ArtifactError: The tarball could not be written (the destination is left untouched).
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    skipped: list[str] = []
    try:
        with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as archive:
            for arcname, folder in members.items():
                root = (roots or {}).get(arcname, folder.parent)
                _add_folder(archive, arcname, folder, root, skipped)
        os.replace(temporary, destination)
    except (OSError, tarfile.TarError) as exc:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise ArtifactError(
            f"could not write {destination}: {exc}. Fix: free disk space or choose another output path"
        ) from exc
    for line in skipped:
        logger.warning("left out of %s: %s", destination.name, line)
    if left_out is not None:
        left_out.extend(skipped)
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
    return folder.is_dir() and not folder.is_symlink() and any(folder.iterdir())


def _tree_of(folder: Path, relative: str) -> Path:
    """The host tree ``folder`` belongs to when it is that tree's ``relative`` folder, else its parent."""
    parts = Path(relative).parts
    return folder.parents[len(parts) - 1] if folder.parts[-len(parts):] == parts else folder.parent


def _output_members(output_data_dirs: Mapping[str, Path]) -> tuple[dict[str, Path], dict[str, Path]]:
    hosts = list(output_data_dirs)
    members = {"": output_data_dirs[hosts[0]]}
    members.update({host: output_data_dirs[host] for host in hosts[1:] if _non_empty(output_data_dirs[host])})
    roots = {name: _tree_of(folder, contract.OUTPUT_DATA_DIR) for name, folder in members.items()}
    return members, roots


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
    skipped: list[str] = []
    outputs, output_roots = _output_members(output_data_dirs)

    def pack_model(target: Path) -> Path:
        assert model_dir is not None
        roots = {"": _tree_of(model_dir, contract.MODEL_DIR)}
        return pack_tarball({"": model_dir}, target, roots=roots, left_out=skipped)

    if isinstance(destination, Path):
        output_folder = destination / "output"
        model = pack_model(output_folder / MODEL_TARBALL) if model_dir is not None else None
        output = pack_tarball(outputs, output_folder / OUTPUT_TARBALL, roots=output_roots, left_out=skipped)
        return ArtifactPaths(
            model=str(model) if model else None,
            output=str(output),
            logs={host: str(path) for host, path in log_files.items()},
            skipped=tuple(skipped),
        )

    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    uploads: list[tuple[Path, S3Location]] = []
    model_location = output_location = None
    if model_dir is not None:
        model_location = destination.child("output", MODEL_TARBALL)
        uploads.append((pack_model(scratch_dir / MODEL_TARBALL), model_location))
    output_location = destination.child("output", OUTPUT_TARBALL)
    output_tarball = pack_tarball(outputs, scratch_dir / OUTPUT_TARBALL, roots=output_roots, left_out=skipped)
    uploads.append((output_tarball, output_location))
    log_locations = {}
    for host, path in log_files.items():
        if path.exists():
            log_locations[host] = destination.child("logs", path.name)
            uploads.append((path, log_locations[host]))
    client = make_s3_client()
    for path, location in uploads:
        try:
            client.upload_file(str(path), location.bucket, location.prefix)
        except (BotoCoreError, ClientError, S3UploadFailedError, OSError) as exc:
            raise ArtifactError(
                f"could not upload {path.name} to {location.uri}: {exc}. "
                "Fix: check the bucket exists, your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3"
            ) from exc
    return ArtifactPaths(
        model=model_location.uri if model_location else None,
        output=output_location.uri,
        logs={host: location.uri for host, location in log_locations.items()},
        skipped=tuple(skipped),
    )
