"""Which files of a job's source folder travel with it: the one exclusion list of the kit.

A job's code is copied twice over: into every local host's ``code`` folder (``smddp local``), and into the
``sourcedir.tar.gz`` an estimator uploads. Both leave out the same names: version control, virtual environments,
caches, and files that hold keys or credentials, which must never be copied into a job nor uploaded. A pattern is a
case-sensitive glob matched against each path component (a file's or a folder's name), so an excluded folder is
left out with everything under it.

Standard library only.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

__all__ = ["SOURCE_EXCLUDES", "is_excluded", "ignore_excluded"]

SOURCE_EXCLUDES: tuple[str, ...] = (
    # version control
    ".git", ".hg", ".svn",
    # virtual environments, tool caches, compiled Python
    ".venv", ".venv-*", "venv", ".tox", ".mypy_cache", ".pytest_cache", "__pycache__", "*.pyc",
    # keys, credentials and the files that usually hold them
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*",
    ".aws", ".ssh", ".netrc", ".pgpass", ".docker", "credentials", "credentials.*", ".git-credentials",
)
"""Name patterns never copied into a job's code folder nor uploaded with it."""


def is_excluded(name: str, patterns: Iterable[str] = SOURCE_EXCLUDES) -> bool:
    """Whether a file or folder name matches one of ``patterns``.

    Args:
        name: One path component.
        patterns: Case-sensitive globs (default: :data:`SOURCE_EXCLUDES`).

    Returns:
        True when the name is left out.
    """
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def ignore_excluded(_directory: str, names: Iterable[str]) -> set[str]:
    """``shutil.copytree``'s ``ignore`` callable for :data:`SOURCE_EXCLUDES`.

    Args:
        _directory: The folder being copied (unused: only names are matched).
        names: Its entries.

    Returns:
        The entries to leave out.
    """
    return {name for name in names if is_excluded(name)}
