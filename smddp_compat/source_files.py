"""Which files of a job's source folder travel with it, and how: the one exclusion list and copy rule of the kit.

A job's code is copied twice over: into every local host's ``code`` folder (``smddp local``), and into the
``sourcedir.tar.gz`` an estimator uploads. Both leave out the same names: version control, virtual environments,
caches, and files that hold keys or credentials, which must never be copied into a job nor uploaded. A pattern is a
case-sensitive glob matched against each path component (a file's or a folder's name), so an excluded folder is
left out with everything under it.

Both copy with :func:`copy_source_tree`, whose rule for what is not a plain file or folder is:

* a symbolic link to a regular file inside the source folder (and not excluded) is copied as that file;
* a symbolic link to a folder is not followed (the folder, when inside, is copied under its own name): a link
  loop such as ``pkg/loop -> ..`` cannot multiply the copy, which holds each file of the tree at most once per
  name that leads to it without entering a linked folder;
* a symbolic link leading out of the source folder, or to nothing, is left out, and so are FIFOs, devices and
  sockets; :func:`warn_left_out` names each of them in a warning.

Standard library only.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
import stat
from collections.abc import Collection, Iterable
from typing import NamedTuple

__all__ = ["SOURCE_EXCLUDES", "is_excluded", "ignore_excluded", "LeftOut", "copy_source_tree", "warn_left_out"]

logger = logging.getLogger(__name__)

SOURCE_EXCLUDES: tuple[str, ...] = (
    # version control
    ".git", ".hg", ".svn",
    # virtual environments, tool caches, compiled Python
    ".venv", ".venv-*", "venv", ".tox", ".mypy_cache", ".pytest_cache", "__pycache__", "*.pyc",
    # environment files and private keys, key stores and password stores
    ".env", ".env.*", ".envrc", "*.pem", "*.key", "*.key.bak", "*.key.old", "*.key.orig", "*.p12", "*.pfx", "*.jks",
    "*.keystore", "keystore.*", "*.kdbx", "*.ppk", "id_rsa*", "id_dsa*", "id_ed25519*", "id_ecdsa*", ".gnupg",
    "secring.*",
    # cloud CLIs: AWS, Google Cloud (also under .config), Azure, Oracle, Databricks, s3cmd, boto
    ".aws", ".azure", ".oci", ".databrickscfg", ".s3cfg", ".boto", "application_default_credentials.json",
    "*service-account*.json", "*service_account*.json", "credentials", "credentials.*", "*credentials.json",
    # per-user configuration folders, where gh, gcloud, rclone and many more keep their tokens; Kubernetes
    ".config", ".kube", "kubeconfig", "*.kubeconfig",
    # package registries and build tools
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", "pip.conf", ".gem", ".cargo", ".m2", ".gradle", ".nuget",
    ".terraformrc", ".terraform.d",
    # git hosting, network logins, databases, Docker
    ".git-credentials", ".netrc", "_netrc", ".pgpass", ".my.cnf", ".docker", ".ssh",
    # ML hubs and experiment trackers (Hugging Face's token is in ~/.cache/huggingface)
    ".huggingface", ".cache", ".kaggle", "kaggle.json", "rclone.conf",
    # shell and interpreter histories
    ".*_history", ".histfile",
)
"""Name patterns never copied into a job's code folder nor uploaded with it."""


def is_excluded(name: str, patterns: Iterable[str] = SOURCE_EXCLUDES) -> bool:
    """Whether a file or folder name (one path component) matches one of ``patterns``, case-sensitive globs
    (default: :data:`SOURCE_EXCLUDES`)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def ignore_excluded(_directory: str, names: Iterable[str]) -> set[str]:
    """``shutil.copytree``'s ``ignore`` callable for :data:`SOURCE_EXCLUDES` (only names are matched)."""
    return {name for name in names if is_excluded(name)}


_EXCLUDED = "its name matches the source exclusions"
_OWN_FOLDER = "a folder of the job itself (the copy's destination, the job's work or output folder)"


class LeftOut(NamedTuple):
    """A source path left out of a copy, and why."""

    path: str
    reason: str

    @property
    def excluded(self) -> bool:
        """Left out for its name (expected: not worth a warning)."""
        return self.reason == _EXCLUDED


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _link_problem(link: str, base: str, patterns: Iterable[str]) -> tuple[str | None, str]:
    """(why the link is left out or None, its resolved target)."""
    target = os.path.realpath(link)
    written = os.readlink(link)
    if not _inside(target, base):
        return f"a link to {written}, outside the source folder {base}", target
    if any(is_excluded(part, patterns) for part in os.path.relpath(target, base).split(os.sep)):
        return f"a link to {written}, whose path matches the source exclusions", target
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return f"a link to {written}, which does not exist", target
    if stat.S_ISDIR(mode):
        return f"a link to the folder {written}: links to folders are not followed", target
    if not stat.S_ISREG(mode):
        return f"a link to {written}, which is {_kind(mode)}", target
    return None, target


def copy_source_tree(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    patterns: Iterable[str] = SOURCE_EXCLUDES,
    root: str | os.PathLike[str] | None = None,
    leave_out: Collection[str] = (),
    fenced: Collection[str | os.PathLike[str]] = (),
) -> list[LeftOut]:
    """Copies a source folder by the kit's rule (see the module's docstring); never follows a link to a folder.

    Args:
        source: The folder to copy.
        destination: Where the copy goes (created; existing files are overwritten).
        patterns: Name patterns left out (default: :data:`SOURCE_EXCLUDES`).
        root: Links must resolve inside this folder (default: ``source``).
        leave_out: Source paths left out as well, whatever their names (as ``os.path.join(source, ...)`` spells them).
        fenced: Folders never entered, however they are reached (compared by real path): the job's own trees when
            they lie inside the source folder. ``destination`` is always fenced, so a copy into a folder inside its
            source never copies itself (``cp -r`` refuses that case; here the rest is copied).

    Returns:
        Every source path left out, with the reason.
    """
    patterns = tuple(patterns)
    base = os.path.realpath(root if root is not None else source)
    left_out: list[LeftOut] = []
    fences = {os.path.realpath(path) for path in (destination, *fenced)}
    pending = [(os.fspath(source), os.fspath(destination))]
    while pending:
        folder, target = pending.pop()
        os.makedirs(target, exist_ok=True)
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            src, dst = entry.path, os.path.join(target, entry.name)
            if src in leave_out or is_excluded(entry.name, patterns):
                left_out.append(LeftOut(src, _EXCLUDED))
                continue
            try:
                mode = os.lstat(src).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(mode):
                if os.path.realpath(src) in fences:
                    left_out.append(LeftOut(src, _OWN_FOLDER))
                else:
                    pending.append((src, dst))
            elif stat.S_ISREG(mode):
                shutil.copy2(src, dst)
            elif stat.S_ISLNK(mode):
                problem, resolved = _link_problem(src, base, patterns)
                if problem is not None:
                    left_out.append(LeftOut(src, problem))
                else:
                    shutil.copy2(resolved, dst)
            else:
                left_out.append(LeftOut(src, _kind(mode)))
    return sorted(left_out)


def warn_left_out(left_out: Iterable[LeftOut], where: str) -> None:
    """Logs one warning naming every link or special file :func:`copy_source_tree` left out (excluded names aside).

    Args:
        left_out: From :func:`copy_source_tree`.
        where: What the copy was for (e.g. ``"the uploaded source"``).
    """
    notable = [item for item in left_out if not item.excluded]
    if notable:
        logger.warning(
            "left out of %s: %s", where, "; ".join(f"{item.path} ({item.reason})" for item in notable)
        )
