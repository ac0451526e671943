"""Folders kept in step with S3 while a job runs, as SageMaker keeps them: checkpoints and TensorBoard output.

SageMaker's developer guide ("Use Checkpoints"): "Existing checkpoints in S3 are written to the SageMaker container
at the start of the job [...]. Checkpoints added to the S3 folder after the job has started are not copied to the
training container. SageMaker also writes new checkpoints from the container to S3 during training. If a checkpoint
is deleted in the SageMaker container, it will also be deleted in the S3 folder." A spot restart fills the folder
from S3 again ("Managed Spot Training": "When the job is restarted, SageMaker AI copies the data from Amazon S3 back
into the local path"). ``TensorBoardOutputConfig.LocalPath`` is written to its S3 path during the job, one way.

:class:`FolderSync` does that for the hosts' folders against one :class:`SyncTarget`: an S3 prefix
(:class:`S3Target`) or a folder of this machine (:class:`FolderTarget`, what a replay's ``--checkpoint-dir`` may
name). What the job wrote is data, never a path to follow: only regular files are read, each opened without
following a link (:mod:`smddp_compat.job_files`); a file that vanishes during a sync (a script rotating its
checkpoints) is skipped; a copy or a deletion that fails is said once and tried again at the next sync, and the job
goes on. Names starting with a dot are files being written (temporary names) and are left alone.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from smddp_compat.job_files import iter_regular_files, open_job_file
from smddp_compat.local_mode.channels import download_s3_prefix, s3_folder_holds_objects
from smddp_compat.local_mode.s3 import S3Location

__all__ = [
    "SyncTarget",
    "S3Target",
    "FolderTarget",
    "FolderSync",
    "sync_target",
    "links_and_special_files",
    "copy_atomically",
]

#: A file's (mtime in ns, size): how a sync tells a changed file from one it already copied.
_Stamp = tuple[int, int]


def links_and_special_files(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree``'s ignore: what is not a regular file or a folder (links, FIFOs, devices) is left out."""
    return {name for name in names
            if not (stat.S_ISREG(mode := os.lstat(os.path.join(folder, name)).st_mode) or stat.S_ISDIR(mode))}


def copy_atomically(handle: IO[bytes], destination: Path) -> None:
    """Writes ``handle``'s content to ``destination`` through a temporary file renamed into place (a reader never
    sees half a file)."""
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


class SyncTarget(Protocol):
    """Where a folder is synced to: files by their path relative to the folder, ``/``-separated."""

    @property
    def uri(self) -> str:
        """The target as shown to people (``s3://...`` or a path)."""
        ...

    def download(self, folder: Path, *, what: str) -> int:
        """Copies every file of the target into ``folder`` (created); returns how many (0 when there is none)."""
        ...

    def upload(self, relative: str, handle: IO[bytes]) -> None:
        """Stores ``handle``'s content as ``relative``."""
        ...

    def delete(self, relative: str) -> None:
        """Removes ``relative`` (nothing happens when it is not there)."""
        ...


@dataclass(frozen=True)
class S3Target:
    """An S3 "folder": ``s3://bucket/prefix`` holds ``relative`` at ``prefix/relative``.

    Attributes:
        location: The bucket and prefix.
        client: A boto3 S3 client of the S3 that holds it.
    """

    location: S3Location
    client: Any

    @property
    def uri(self) -> str:
        """``s3://bucket/prefix``."""
        return self.location.uri

    def download(self, folder: Path, *, what: str) -> int:
        """Downloads every object below the prefix (as :func:`~local_mode.channels.download_s3_prefix` lays them
        out); 0 when there is none. Raises ChannelError when S3 fails (listing included)."""
        if not s3_folder_holds_objects(self.location, channel=what, client=self.client):
            return 0
        return download_s3_prefix(self.location, folder, channel=what, client=self.client)

    def upload(self, relative: str, handle: IO[bytes]) -> None:
        """Uploads ``handle`` to ``prefix/relative``."""
        key = self.location.child(relative)
        self.client.upload_fileobj(handle, key.bucket, key.prefix)

    def delete(self, relative: str) -> None:
        """Deletes ``prefix/relative`` (S3 answers a missing key with success)."""
        key = self.location.child(relative)
        self.client.delete_object(Bucket=key.bucket, Key=key.prefix)


@dataclass(frozen=True)
class FolderTarget:
    """A folder of this machine, written only by the sync (regular files and folders).

    Attributes:
        folder: The folder (created when the first file is stored).
    """

    folder: Path

    @property
    def uri(self) -> str:
        """The folder's path."""
        return str(self.folder)

    def download(self, folder: Path, *, what: str) -> int:
        """Copies the folder's regular files and folders into ``folder`` (links and special files are left out)."""
        if not self.folder.is_dir():
            return 0
        shutil.copytree(self.folder, folder, symlinks=True, ignore=links_and_special_files, dirs_exist_ok=True)
        return sum(1 for _ in iter_regular_files(folder))

    def upload(self, relative: str, handle: IO[bytes]) -> None:
        """Copies ``handle`` to ``folder/relative`` atomically."""
        copy_atomically(handle, self.folder.joinpath(*relative.split("/")))

    def delete(self, relative: str) -> None:
        """Removes ``folder/relative``, then the folders it leaves empty (up to, not including, the target)."""
        path = self.folder.joinpath(*relative.split("/"))
        try:
            path.unlink()
        except FileNotFoundError:
            return
        parent = path.parent
        while parent != self.folder and self.folder in parent.parents:
            try:
                parent.rmdir()
            except OSError:  # not empty (or already gone): the folders above are needed too
                return
            parent = parent.parent


def sync_target(where: Path | S3Location, client: Any) -> SyncTarget:
    """The target of a folder or an S3 location (``client``: the S3 it is in)."""
    return S3Target(where, client) if isinstance(where, S3Location) else FolderTarget(Path(where))


class FolderSync:
    """Keeps the hosts' copies of one folder (``/opt/ml/checkpoints`` of every host) in step with a target.

    Every host's folder is synced on its own, as each SageMaker instance syncs its own: a file new or changed in a
    folder is uploaded; with ``mirror_deletions``, a file that the folder held (filled in or uploaded) and no longer
    holds is deleted from the target too. So a script that keeps its last three checkpoints leaves those three in
    the target, whichever host wrote them; a host that still holds an old file it never changed does not upload it
    again.

    Args:
        what: What the folder is, for messages (``checkpoints``, ``tensorboard``).
        mirror_deletions: Delete from the target what a folder deleted (checkpoints); False: one way, new and
            changed files only (TensorBoard output).
        say: Where messages go (a failed copy, said once per problem), or None.
    """

    def __init__(
        self, target: SyncTarget, *, what: str, mirror_deletions: bool, say: Callable[[str], None] | None = None
    ) -> None:
        self.target = target
        self.what = what
        self.mirror_deletions = mirror_deletions
        self._say = say
        self._known: dict[Path, dict[str, _Stamp]] = {}  # folder -> what it held at its last sync, as synced
        self._failures: set[str] = set()

    def fill(self, folders: Iterable[Path], scratch: Path, *, source: SyncTarget | None = None) -> int:
        """The start of a job (or of a spot restart): every folder gets the files of ``source``.

        Args:
            folders: The hosts' folders (created when missing; files already there are kept unless overwritten).
            scratch: A folder that does not exist yet, for the download (removed at the end).
            source: Where the files come from (default: the target). When it is another place (a replay reads the
                request's ``CheckpointConfig.S3Uri`` and syncs under its own output), the target gets them too,
                so it holds what the request's S3 location would hold on SageMaker.

        Returns the number of files each folder received; raises ChannelError when an S3 source could not be read.
        """
        origin = source if source is not None else self.target
        try:
            count = origin.download(scratch, what=self.what)
            if source is not None and source is not self.target and count:
                for relative, _info in iter_regular_files(scratch):
                    with open_job_file(scratch / relative, scratch) as handle:
                        self.target.upload(relative, handle)
            for folder in folders:
                folder.mkdir(parents=True, exist_ok=True)
                if count:
                    # Copies, not links: a script may rewrite its checkpoint files in place.
                    shutil.copytree(scratch, folder, dirs_exist_ok=True)
                self._known[folder] = self._listing(folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return count

    def sync(self, folders: Iterable[Path]) -> bool:
        """One sync of every folder: new and changed files uploaded, then (``mirror_deletions``) deleted files
        deleted. Never raises for a file of the job: what fails is said once and tried again next time.

        Returns:
            True when every copy and deletion of this sync happened (a file that vanished meanwhile counts as done).
        """
        done = True
        for folder in folders:
            known = self._known.setdefault(folder, {})
            present = self._listing(folder)
            for relative, stamp in present.items():
                if known.get(relative) == stamp:
                    continue
                copied = self._upload(folder, relative)
                if copied:
                    known[relative] = stamp
                done = done and copied is not False
            if not self.mirror_deletions:
                continue
            for relative in sorted(set(known) - set(present)):
                deleted = self._attempt(relative, "deleting it from", functools.partial(self.target.delete, relative))
                if deleted is not False:
                    del known[relative]
                done = done and deleted is not False
        return done

    # -- internals -----------------------------------------------------------------------------------------------

    @staticmethod
    def _listing(folder: Path) -> dict[str, _Stamp]:
        """The folder's regular files (no link followed), but those being written (a name starting with a dot)."""
        if not folder.is_dir():
            return {}
        return {
            relative: (info.st_mtime_ns, info.st_size)
            for relative, info in iter_regular_files(folder)
            if not relative.startswith(".") and "/." not in relative
        }

    def _upload(self, folder: Path, relative: str) -> bool | None:
        def copy() -> None:
            with open_job_file(folder / relative, folder) as handle:
                self.target.upload(relative, handle)

        return self._attempt(relative, "copying it to", copy)

    def _attempt(self, relative: str, doing: str, action: Callable[[], None]) -> bool | None:
        """Runs one copy or deletion: True when done, None when the file vanished meanwhile (rotated away: the next
        sync sees it gone), False when it failed (said once per problem)."""
        try:
            action()
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - OSError, unsafe files, botocore's errors: the job must go on
            problem = f"{type(exc).__name__}: {exc}"
            if problem not in self._failures and self._say is not None:
                self._say(f"{self.what} sync: {doing} {self.target.uri} failed for {relative} ({problem}); the job "
                          "goes on and the next sync tries again")
            self._failures.add(problem)
            return False
        return True
