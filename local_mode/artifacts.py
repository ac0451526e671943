"""A finished job's artifacts, stored where and as SageMaker stores them.

Under ``<output_path>/<job_name>/``:

* ``output/model.tar.gz``: every host's ``/opt/ml/model`` merged into one archive, as SageMaker aggregates them
  ("How Amazon SageMaker Processes Training Output": containers "should ensure no file/directory names clash");
  with ``OutputDataConfig.CompressionType`` ``NONE``, the same merged files uncompressed under ``output/model/``;
* ``output/output.tar.gz``: every host's ``/opt/ml/output/data`` merged the same way;
* ``logs/<host>.log``: each host's log.

The model and the output are stored whatever the job's end (completed, failed or stopped), as SageMaker does. A
name that two hosts both wrote is a clash: the first host's entry (``algo-1`` before ``algo-2``) is kept, and every
clash is listed in :attr:`ArtifactPaths.clashes` and logged, so a script whose hosts overwrite each other's files is
told here instead of shipping a different model on SageMaker.

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

import contextlib
import logging
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from smddp_compat import contract
from smddp_compat.job_files import (
    UnsafeJobFileError,
    describe_file_type,
    iter_job_tree,
    link_stays_inside,
    open_job_file,
)
from smddp_compat.local_mode.s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.errors import ArtifactError

__all__ = [
    "ArtifactPaths", "pack_tarball", "job_destination", "store_artifacts", "upload_artifact", "COMPRESSION_TYPES",
]

MODEL_TARBALL = "model.tar.gz"
OUTPUT_TARBALL = "output.tar.gz"
UNCOMPRESSED_MODEL = "model"
#: ``OutputDataConfig.CompressionType`` values: the model as ``model.tar.gz``, or as files under ``output/model/``.
COMPRESSION_TYPES = ("GZIP", "NONE")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactPaths:
    """Where a job's artifacts ended up (local paths or ``s3://`` URIs).

    Attributes:
        model: ``model.tar.gz`` (or the ``output/model/`` folder of an uncompressed model), or None when nothing
            was stored.
        output: ``output.tar.gz``.
        logs: Host name -> its log.
        skipped: What the job left in its folders that was not packed, each with the reason (links leading out of
            the folder, FIFOs, devices, sockets, a folder replaced with a link).
        clashes: Names two hosts both wrote into the model or output folder, each with the host whose entry was
            kept (the first).
    """

    model: str | None
    output: str | None
    logs: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    clashes: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class _Entry:
    """One entry of a merged folder: its name in the archive, where it is, and whose it is."""

    name: str
    path: Path
    info: os.stat_result
    root: Path
    folder: Path
    host: str


def _merged_entries(
    folders: Mapping[str, Path], roots: Mapping[str, Path], skipped: list[str], clashes: list[str], what: str
) -> list[_Entry]:
    """The entries of every host's folder merged at one top level, the first host's entry kept on a name clash;
    what is not a file, a folder or an inner link goes to ``skipped``."""
    entries: list[_Entry] = []
    owner: dict[str, tuple[str, bool]] = {}  # name -> (host that wrote it, is a folder)
    for host, folder in folders.items():
        root = roots.get(host, folder.parent)
        problem = _plain_folder(folder, root)
        if problem is not None:
            if folder.exists() or folder.is_symlink():
                skipped.append(problem)
            continue
        for relative, info in iter_job_tree(folder):
            is_folder = stat.S_ISDIR(info.st_mode)
            if relative in owner:
                first, first_is_folder = owner[relative]
                if not (is_folder and first_is_folder):
                    clashes.append(f"{what}: {relative} written by {first} and {host or 'another host'}; "
                                   f"{first}'s kept")
                continue
            path = folder / relative
            if not (is_folder or stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                skipped.append(f"{path}: {describe_file_type(info.st_mode)}, not a regular file")
                continue
            if stat.S_ISLNK(info.st_mode) and not link_stays_inside(path, folder):
                skipped.append(f"{path}: a link to {os.readlink(path)}, outside {folder}")
                continue
            owner[relative] = (host, is_folder)
            entries.append(_Entry(relative, path, info, root, folder, host))
    return entries


def _add_entry(archive: tarfile.TarFile, entry: _Entry, skipped: list[str]) -> None:
    mode = entry.info.st_mode
    if stat.S_ISDIR(mode):
        archive.addfile(archive.gettarinfo(str(entry.path), arcname=entry.name))
    elif stat.S_ISREG(mode):
        try:
            with open_job_file(entry.path, entry.root) as handle:
                archive.addfile(archive.gettarinfo(arcname=entry.name, fileobj=handle), handle)
        except FileNotFoundError:
            pass  # removed while the job's processes were still being stopped
        except UnsafeJobFileError as exc:
            skipped.append(f"{entry.path}: {exc.problem}")
    else:  # a link that stays inside the folder
        member = archive.gettarinfo(str(entry.path), arcname=entry.name)
        # Relative, so that it resolves wherever the archive is extracted.
        member.linkname = os.path.relpath(os.path.realpath(entry.path), os.path.realpath(entry.path.parent))
        archive.addfile(member)


def pack_tarball(
    folders: Mapping[str, Path],
    destination: Path,
    *,
    roots: Mapping[str, Path] | None = None,
    left_out: list[str] | None = None,
    clashes: list[str] | None = None,
) -> Path:
    """Writes a gzip tarball of the folders a job wrote, merged at its top level, atomically, following no link.

    Args:
        folders: Host -> its folder, in SageMaker's host order; their content is merged, the first host's entry
            kept when two hosts wrote the same name.
        destination: The tarball's path; its folder is created.
        roots: Host -> the job's tree its folder belongs to: no link is followed below it (default: the folder's
            parent).
        left_out: Receives what was not packed, one line each (the path and why); each is also logged.
        clashes: Receives each name two hosts both wrote (and whose entry was kept); each is also logged.

    Returns:
        ``destination``.

    Raises:
        ArtifactError: The tarball could not be written (the destination is left untouched).
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    skipped: list[str] = []
    clashed: list[str] = []
    try:
        with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as archive:
            for entry in _merged_entries(folders, roots or {}, skipped, clashed, destination.name):
                _add_entry(archive, entry, skipped)
        os.replace(temporary, destination)
    except (OSError, tarfile.TarError) as exc:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise ArtifactError(
            f"could not write {destination}: {exc}. Fix: free disk space or choose another output path"
        ) from exc
    _report(destination.name, skipped, clashed, left_out, clashes)
    return destination


def _report(what: str, skipped: list[str], clashed: list[str], left_out: list[str] | None,
            clashes: list[str] | None) -> None:
    for line in skipped:
        logger.warning("left out of %s: %s", what, line)
    for line in clashed:
        logger.warning("name clash between hosts: %s", line)
    if left_out is not None:
        left_out.extend(skipped)
    if clashes is not None:
        clashes.extend(clashed)


def _copy_uncompressed(
    folders: Mapping[str, Path], roots: Mapping[str, Path], put: "Callable[[str, IO[bytes]], None]",
    left_out: list[str], clashes: list[str],
) -> None:
    """Stores the merged regular files one by one (``CompressionType`` ``NONE``): ``put(name, handle)`` each."""
    skipped: list[str] = []
    clashed: list[str] = []
    for entry in _merged_entries(folders, roots, skipped, clashed, UNCOMPRESSED_MODEL):
        if stat.S_ISLNK(entry.info.st_mode):
            skipped.append(f"{entry.path}: a link (an uncompressed model holds files only)")
        elif stat.S_ISREG(entry.info.st_mode):
            try:
                with open_job_file(entry.path, entry.root) as handle:
                    put(entry.name, handle)
            except FileNotFoundError:
                continue
            except UnsafeJobFileError as exc:
                skipped.append(f"{entry.path}: {exc.problem}")
    _report(UNCOMPRESSED_MODEL, skipped, clashed, left_out, clashes)


def job_destination(output_path: str, job_name: str) -> Path | S3Location:
    """``<output_path>/<job_name>`` (``output_path`` a validated ``JobSpec.output_path``) as a folder or an S3
    location."""
    if is_s3_uri(output_path):
        return parse_s3_uri(output_path, "output_path").child(job_name)
    return Path(output_path) / job_name


def _tree_of(folder: Path, relative: str) -> Path:
    """The host tree ``folder`` belongs to when it is that tree's ``relative`` folder, else its parent."""
    parts = Path(relative).parts
    return folder.parents[len(parts) - 1] if folder.parts[-len(parts):] == parts else folder.parent


def _store_copy(source: IO[bytes], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as copy:
            shutil.copyfileobj(source, copy)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def store_artifacts(
    destination: Path | S3Location,
    *,
    model_dirs: Mapping[str, Path],
    output_data_dirs: Mapping[str, Path],
    log_files: Mapping[str, Path],
    scratch_dir: Path,
    compression: str = "GZIP",
) -> ArtifactPaths:
    """Packs and stores a job's artifacts, every host's merged (see the module docstring).

    Args:
        destination: From :func:`job_destination`.
        model_dirs: Host name -> its model folder, ``algo-1`` first.
        output_data_dirs: Host name -> its ``output/data`` folder, ``algo-1`` first.
        log_files: Host name -> its log file (already in place for a local destination; uploaded for S3).
        scratch_dir: A folder for the tarballs before upload (S3 only).
        compression: ``OutputDataConfig.CompressionType``: ``GZIP`` (``model.tar.gz``) or ``NONE`` (the model's
            files under ``output/model/``).

    Returns:
        Where everything is, and what was left out or clashed.

    Raises:
        ArtifactError: Packing or uploading failed.
    """
    if compression not in COMPRESSION_TYPES:
        raise ArtifactError(f"unknown CompressionType {compression!r}: use one of {', '.join(COMPRESSION_TYPES)}")
    skipped: list[str] = []
    clashes: list[str] = []
    model_roots = {host: _tree_of(folder, contract.MODEL_DIR) for host, folder in model_dirs.items()}
    output_roots = {host: _tree_of(folder, contract.OUTPUT_DATA_DIR) for host, folder in output_data_dirs.items()}
    local = isinstance(destination, Path)
    staging = destination / "output" if isinstance(destination, Path) else scratch_dir
    uploads: list[tuple[Path, S3Location]] = []
    client = None if local else make_s3_client()

    def put_model_file(name: str, handle: IO[bytes]) -> None:
        if isinstance(destination, Path):
            _store_copy(handle, destination / "output" / UNCOMPRESSED_MODEL / name)
        else:
            location = destination.child("output", UNCOMPRESSED_MODEL, name)
            upload_artifact(lambda: client.upload_fileobj(handle, location.bucket, location.prefix), location, name)

    if compression == "NONE":
        try:
            _copy_uncompressed(model_dirs, model_roots, put_model_file, skipped, clashes)
        except OSError as exc:
            raise ArtifactError(f"could not store the model's files: {exc}. Fix: free disk space or choose another "
                                "output path") from exc
        model = (destination / "output" / UNCOMPRESSED_MODEL if isinstance(destination, Path)
                 else destination.child("output", UNCOMPRESSED_MODEL))
    else:
        tarball = pack_tarball(model_dirs, staging / MODEL_TARBALL, roots=model_roots, left_out=skipped,
                               clashes=clashes)
        model = tarball if isinstance(destination, Path) else destination.child("output", MODEL_TARBALL)
        if not isinstance(destination, Path):
            uploads.append((tarball, destination.child("output", MODEL_TARBALL)))
    output_tarball = pack_tarball(output_data_dirs, staging / OUTPUT_TARBALL, roots=output_roots, left_out=skipped,
                                  clashes=clashes)
    if isinstance(destination, Path):
        return ArtifactPaths(
            model=str(model), output=str(output_tarball),
            logs={host: str(path) for host, path in log_files.items()},
            skipped=tuple(skipped), clashes=tuple(clashes),
        )
    output_location = destination.child("output", OUTPUT_TARBALL)
    uploads.append((output_tarball, output_location))
    log_locations = {}
    for host, path in log_files.items():
        if path.exists():
            log_locations[host] = destination.child("logs", path.name)
            uploads.append((path, log_locations[host]))
    for path, location in uploads:
        upload_artifact(lambda: client.upload_file(str(path), location.bucket, location.prefix), location, path.name)
    assert isinstance(model, S3Location)
    return ArtifactPaths(
        model=model.uri, output=output_location.uri,
        logs={host: location.uri for host, location in log_locations.items()},
        skipped=tuple(skipped), clashes=tuple(clashes),
    )


def upload_artifact(upload: Callable[[], None], location: S3Location, what: str) -> None:
    """Runs ``upload`` of ``what`` to ``location``; any failure (a refused request, a missing bucket, a lost
    connection) is an ArtifactError that names the file and the fix."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        upload()
    except (BotoCoreError, ClientError, S3UploadFailedError, OSError) as exc:
        raise ArtifactError(
            f"could not upload {what} to {location.uri}: {exc}. "
            "Fix: check the bucket exists, your AWS credentials, and AWS_ENDPOINT_URL if you use a local S3"
        ) from exc
