"""What a job leaves in its folders is data, never a path to follow: the one way the kit reads a job's files.

A training script controls everything under its ``/opt/ml`` tree (its failure file, its model and output folders,
its checkpoints): it can plant a symbolic link to ``~/.aws/credentials`` where the kit expects its failure file, a
FIFO that blocks whoever opens it, a device, a socket, or a link loop. Every place of the kit that reads such a tree
goes through this module:

* :func:`open_job_file` / :func:`read_job_file`: one file, only when it is a regular file inside the tree, opened
  relative to the tree without following any link (``O_NOFOLLOW`` on every component), non-blocking (a FIFO is
  refused, never waited on), and read up to a size cap;
* :func:`iter_job_tree` / :func:`iter_regular_files`: the entries (or only the regular files) of a tree, from
  ``lstat``, never following a link, skipping what vanishes during the walk;
* :func:`link_stays_inside`: whether a symbolic link of the tree resolves inside it (to store it as a link);
* :func:`extract_tarball`: a tarball's regular files and folders, nothing else, on every Python 3.11 (the
  ``filter=`` argument of ``extractall`` arrived in 3.11.4; without it the members are checked and written here).

Standard library only: it ships inside jobs and the training image.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterator
from typing import BinaryIO

from smddp_compat.errors import SmddpError

__all__ = [
    "DEFAULT_READ_LIMIT", "UnsafeJobFileError", "open_job_file", "read_job_file", "iter_job_tree", "iter_regular_files",
    "link_stays_inside", "describe_file_type", "extract_tarball",
]

DEFAULT_READ_LIMIT = 1 << 20
"""Bytes :func:`read_job_file` reads at most unless told otherwise (1 MiB)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


class UnsafeJobFileError(SmddpError, OSError):
    """A file of a job's tree was not read (or an archive not extracted): it is not a regular file inside the tree.

    ``field`` is the path, ``value`` what was found there, ``problem`` and ``fix`` say why and what to write instead.
    It is an ``OSError`` too, so code that treats an unreadable file as missing keeps doing so.
    """


def describe_file_type(mode: int) -> str:
    """The file type of ``mode`` (``st_mode`` from ``lstat``/``fstat``) in words, for messages: e.g. ``"a regular
    file"``, ``"a symbolic link"``, ``"a FIFO (named pipe)"``."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((words for test, words in kinds if test(mode)), "a special file")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _components(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """``root`` (absolute) and the components of ``path`` below it; raises when ``path`` is not below ``root``."""
    base = os.path.abspath(root)
    target = os.path.abspath(path)
    if not _inside(target, base) or target == base:
        # The caller may name the same folder through a link higher up (e.g. /tmp -> /private/tmp): compare the
        # resolved folders, then take the components below the resolved root.
        real_base = os.path.realpath(base)
        real_parent = os.path.realpath(os.path.dirname(target))
        if not _inside(real_parent, real_base):
            raise UnsafeJobFileError(
                field=os.fspath(path), value=real_parent, problem=f"is in a folder outside the job's tree {base}",
                fix="read only files of the job's own tree",
            )
        base, target = real_base, os.path.join(real_parent, os.path.basename(target))
    relative = os.path.relpath(target, base)
    parts = [part for part in relative.split(os.sep) if part not in ("", ".")]
    if not parts or ".." in parts:
        raise UnsafeJobFileError(
            field=os.fspath(path), value=relative, problem=f"is not a file below the job's tree {base}",
            fix="read only files of the job's own tree",
        )
    return base, parts


def _refusal(path: str | os.PathLike[str], found: str, fix: str, problem: str | None = None) -> UnsafeJobFileError:
    return UnsafeJobFileError(
        field=os.fspath(path), value=found, fix=fix,
        problem=problem or f"is {found}, not a regular file: it was not read",
    )


def open_job_file(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> BinaryIO:
    """Opens a file a job controls for reading, only if it is a regular file inside the job's tree.

    The file is opened relative to ``root``, one component at a time, each with ``O_NOFOLLOW`` (a link anywhere
    below ``root`` is refused, so a link swapped in while the kit reads is refused too), the last one with
    ``O_NONBLOCK`` (a FIFO is never waited on), and checked with ``fstat`` before a byte is read.

    Args:
        path: The file, under ``root``.
        root: The job's tree (e.g. a host's ``/opt/ml``); it may itself be reached through links.

    Returns:
        The open file (binary, blocking reads); the caller closes it.

    Raises:
        FileNotFoundError: The file (or a folder on its way) does not exist.
        UnsafeJobFileError: It is a link, a FIFO, a device, a socket or a folder, or it is not below ``root``.
        OSError: It could not be opened (permissions, I/O).
    """
    base, parts = _components(path, root)
    fix = "write the file as a regular file inside the job's tree (not a link, FIFO, device or socket)"
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refusal(path, part, fix, f"is below {part!r}, which is a link or not a folder: it was not "
                                   "read") from None
                raise
            os.close(folder)
            folder = inner
        try:
            handle = os.open(parts[-1], _FILE_FLAGS, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refusal(path, "a symbolic link", fix) from None
            if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # what open() answers for a socket
                raise _refusal(path, "a socket", fix) from None
            raise
    finally:
        os.close(folder)
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(path, describe_file_type(mode), fix)
        os.set_blocking(handle, True)
        return os.fdopen(handle, "rb")
    except BaseException:
        os.close(handle)
        raise


def read_job_file(
    path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    limit: int = DEFAULT_READ_LIMIT,
) -> bytes:
    """Reads the start of a file a job controls, only if it is a regular file inside the job's tree.

    As :func:`open_job_file` (same arguments and errors: no link followed, a FIFO refused without blocking), then
    returns at most ``limit`` bytes from the start of the file (the rest of a longer file is ignored).
    """
    with open_job_file(path, root) as handle:
        return handle.read(max(0, limit))


def iter_job_tree(root: str | os.PathLike[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``root`` (folders, files, links, FIFOs, ...), never following a link.

    Folders come before their content, in name order. A link to a folder is yielded as a link and not entered.
    An entry that vanishes during the walk is skipped.

    Yields ``(relative path with '/' separators, lstat result)``; a link that is ``root`` itself is followed.
    """
    base = os.fspath(root)
    for folder, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        entered: list[str] = []
        for name in sorted(dirs + files):
            full = os.path.join(folder, name)
            try:
                info = os.lstat(full)
            except FileNotFoundError:
                continue
            relative = os.path.relpath(full, base).replace(os.sep, "/")
            if stat.S_ISDIR(info.st_mode):
                entered.append(name)
            yield relative, info
        dirs[:] = [name for name in dirs if name in entered]


def iter_regular_files(root: str | os.PathLike[str]) -> Iterator[tuple[str, os.stat_result]]:
    """The regular files below ``root`` as :func:`iter_job_tree` yields them (``(relative path with '/' separators,
    lstat result)``, folders in name order); links, FIFOs, devices and sockets are skipped, no link is followed."""
    for relative, info in iter_job_tree(root):
        if stat.S_ISREG(info.st_mode):
            yield relative, info


def link_stays_inside(link: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether the symbolic link ``link`` of the tree ``root`` resolves inside it: True when its target, every link on
    the way resolved, is ``root`` or below it (a dangling link's target is judged by where it would be)."""
    return _inside(os.path.realpath(link), os.path.realpath(root))


# --- tarballs --------------------------------------------------------------------------------------------------------


def _normalized(name: str) -> str:
    return posixpath.normpath(name.replace("\\", "/"))


def _written_outside(field: str, value: str) -> UnsafeJobFileError:
    return UnsafeJobFileError(field=field, value=value, problem="would be written outside the destination",
                              fix="pack paths relative to the archive's top, without '..'")


def _check_member(member: tarfile.TarInfo, archive: str) -> str:
    """The member's name, normalized; raises unless it is a regular file or a folder below the destination."""
    name = member.name
    where = f"{archive}: member {name!r}"
    if not (member.isfile() or member.isdir()):
        kind = "a symbolic link" if member.issym() else "a hard link" if member.islnk() else "a device or FIFO"
        raise UnsafeJobFileError(
            field=where, value=kind, problem="only regular files and folders are extracted",
            fix="pack the files themselves, not links or special files",
        )
    normalized = _normalized(name)
    if name.startswith(("/", "\\")) or os.path.isabs(name) or normalized == ".." or normalized.startswith("../"):
        raise _written_outside(where, name)
    return normalized


def _extract_checked(tar: tarfile.TarFile, members: list[tarfile.TarInfo], destination: str) -> None:
    """Writes checked members without ``extractall``'s filter (Python < 3.11.4); never follows a link."""
    base = os.path.realpath(destination)
    for member in members:
        normalized = _normalized(member.name)
        if normalized == ".":
            continue
        target = os.path.join(base, *normalized.split("/"))
        parent = target if member.isdir() else os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        if not _inside(os.path.realpath(parent), base):  # only this function writes here, but be sure
            raise _written_outside(member.name, parent)
        if member.isdir():
            continue
        source = tar.extractfile(member)
        assert source is not None  # a regular file
        # As the "data" filter: no setuid/setgid/sticky bits, no group/other write, owner can read and write, and
        # group/other may execute only what the owner may.
        mode = (member.mode | 0o600) & 0o755
        if not member.mode & 0o100:
            mode &= ~0o111
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with source, os.fdopen(handle, "wb") as out:
            while chunk := source.read(1 << 20):
                out.write(chunk)
        os.chmod(target, mode)


#: The most an archive may hold, in bytes and in members, before anything is extracted (a tar bomb of 2 MB can
#: declare 2 GiB): far above a model's archive, far below what fills a disk or the memory of the member list.
MAX_EXTRACTED_BYTES = 256 << 30
MAX_MEMBERS = 200_000
# Room kept free on the destination's disk after an extraction.
_DISK_HEADROOM_BYTES = 64 << 20


def _check_archive(members: list[tarfile.TarInfo], archive: str, destination: str) -> list[str]:
    """Every member checked (:func:`_check_member`), then the archive as a whole: no name that is both a file and a
    folder, no more than :data:`MAX_MEMBERS` members or :data:`MAX_EXTRACTED_BYTES`, and room on the disk.
    Returns the regular files' normalized names."""
    if len(members) > MAX_MEMBERS:
        raise UnsafeJobFileError(field=archive, value=f"{len(members)} members",
                                 problem=f"holds more than {MAX_MEMBERS} members",
                                 fix="pack fewer, larger files (e.g. one archive per folder)")
    is_folder: dict[str, bool] = {}
    files: list[str] = []
    total = 0
    for member in members:
        normalized = _check_member(member, archive)
        if normalized == ".":
            continue
        parts = normalized.split("/")
        for end in range(1, len(parts)):
            if is_folder.setdefault("/".join(parts[:end]), True) is False:
                raise _file_and_folder(archive, "/".join(parts[:end]), normalized)
        if is_folder.setdefault(normalized, member.isdir()) is not member.isdir():
            raise _file_and_folder(archive, normalized, normalized)
        if member.isfile():
            files.append(normalized)
            total += member.size
    free = _free_bytes(destination)
    if total > MAX_EXTRACTED_BYTES or (free is not None and total + _DISK_HEADROOM_BYTES > free):
        limit = f"the {free} bytes free at {destination}" if total <= MAX_EXTRACTED_BYTES else (
            f"the most the kit extracts ({MAX_EXTRACTED_BYTES} bytes)")
        raise UnsafeJobFileError(field=archive, value=f"{total} bytes once extracted", problem=f"is more than {limit}",
                                 fix="free disk space, or download the archive and extract what you need by hand")
    return files


def _file_and_folder(archive: str, name: str, member: str) -> UnsafeJobFileError:
    return UnsafeJobFileError(field=f"{archive}: member {member!r}", value=name,
                              problem="is both a file and a folder in the archive",
                              fix="pack each path once, as a file or as a folder")


def _free_bytes(folder: str) -> int | None:
    try:
        usage = os.statvfs(folder)
    except OSError:
        return None
    return usage.f_bavail * usage.f_frsize


def extract_tarball(archive: str | os.PathLike[str], destination: str | os.PathLike[str]) -> list[str]:
    """Extracts a tarball of regular files and folders into ``destination``, after checking every member.

    A member that is a link (symbolic or hard), a device or a FIFO, or whose path is absolute or climbs out with
    ``..``, a name that is both a file and a folder, or an archive larger than the disk's free space (or than
    :data:`MAX_EXTRACTED_BYTES`, or with more than :data:`MAX_MEMBERS` members) fails the whole extraction before
    anything is written. The members are then written with
    ``extractall(filter="data")`` where Python has it (3.11.4 and later), and by this module otherwise (Debian 12's
    Python 3.11.2 has no ``filter=``).

    Returns the regular files extracted, as their normalized names in the archive (any compression ``tarfile``
    reads; ``destination`` exists, usually new and empty).

    Raises:
        UnsafeJobFileError: A member is not a regular file or folder, or would land outside ``destination``, or
            the archive as a whole is refused (see above).
        tarfile.TarError: The archive is not readable.
        OSError: A file could not be written.
    """
    name = os.fspath(archive)
    with tarfile.open(name, "r:*") as tar:
        members = tar.getmembers()
        files = _check_archive(members, name, os.fspath(destination))
        if hasattr(tarfile, "data_filter"):
            tar.extractall(os.fspath(destination), members=members, filter="data")
        else:
            _extract_checked(tar, members, os.fspath(destination))
    return files
