"""The job's code as it is uploaded: the user's files without secrets, plus what the distribution needs.

The estimator stages a directory, hands it to the SDK as ``source_dir`` (the SDK tars and uploads it as
``sourcedir.tar.gz``), and deletes it after. The staged directory holds:

- the user's ``source_dir`` (or only the entry point when there is none) and ``dependencies``, minus every path
  matching :data:`DEFAULT_SOURCE_EXCLUDES` (version control, virtual environments, caches, keys and credential
  files), copied by the kit's one rule (:func:`smddp_compat.source_files.copy_source_tree`: a link to a file inside
  becomes that file, links to folders are not followed, links leading out of the directory, FIFOs, devices and
  sockets are left out with a warning);
- for ``smdistributed``, ``mpi`` and ``dtensor``: ``smddp_compat/`` and the ``smdistributed/`` alias at the top, so
  the unchanged script's ``import smdistributed.dataparallel.tensorflow`` resolves in the container (the code
  directory is first on the script's ``sys.path``);
- for ``dtensor``: ``smddp_compat_dtensor_launch.py`` (the new entry point) and ``smddp_compat_dtensor.json``.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Collection, Sequence

import smddp_compat
from smddp_compat.estimators._distribution import DistributionPlan
from smddp_compat.estimators.errors import ConfigurationError
from smddp_compat.launcher import shim_path
from smddp_compat.source_files import SOURCE_EXCLUDES, copy_source_tree, is_excluded, warn_left_out
from smddp_compat.strategies import dtensor

__all__ = [
    "DEFAULT_SOURCE_EXCLUDES", "DTENSOR_LAUNCHER", "StagedSource", "stage_source", "is_excluded", "copy_filtered",
    "compat_package_dir", "shim_package_dir", "stage_driver_dir",
]

logger = logging.getLogger(__name__)

#: Name patterns (matched against every path component) never uploaded with a job's code: the kit's one list.
DEFAULT_SOURCE_EXCLUDES: tuple[str, ...] = SOURCE_EXCLUDES
DTENSOR_LAUNCHER = dtensor.LAUNCHER_NAME


def copy_compat_core(destination: str, patterns: Sequence[str]) -> list[str]:
    """Copies the ``smddp_compat`` package a job ships: the runtime (its API, launcher, cluster and contract
    modules), without the kit's parts an installed kit holds inside it (estimators, local mode, entry points, bench,
    image, commands: in a container, ``smddp_compat.__path__`` reaches the image's own), into ``destination``
    (created), leaving out what matches ``patterns`` (as :func:`copy_filtered`). Returns the source paths left out.
    """
    source = compat_package_dir()
    # The parts sit inside the package only in an installed kit; a checkout keeps them beside it.
    parts = {os.path.join(source, part) for part in smddp_compat.NAMESPACE_PARTS}
    return copy_filtered(source, destination, patterns, leave_out=parts)


def copy_filtered(
    source: str,
    destination: str,
    patterns: Sequence[str],
    *,
    root: str | None = None,
    leave_out: Collection[str] = (),
) -> list[str]:
    """Copies a file or a tree by the kit's one rule (:func:`smddp_compat.source_files.copy_source_tree`), naming
    what it left out in a warning; returns the source paths left out. Symlinks must resolve inside ``root``
    (default: ``source`` itself, or its directory); ``leave_out`` paths are left out whatever their names.
    """
    if not os.path.isdir(source):
        shutil.copy2(source, destination)
        return []
    left_out = copy_source_tree(source, destination, patterns=patterns, root=root, leave_out=leave_out)
    warn_left_out(left_out, "the uploaded source")
    return [item.path for item in left_out]


def compat_package_dir() -> str:
    """The directory of the installed ``smddp_compat`` package (found without importing TensorFlow)."""
    spec = importlib.util.find_spec("smddp_compat")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "distribution", "smddp_compat", "the smddp_compat package is not importable, so it cannot be shipped",
            "install smddp-compat in this environment (bash setup.sh)",
        )
    return list(spec.submodule_search_locations)[0]


def shim_package_dir() -> str:
    """The ``smdistributed`` alias package directory provided by smddp_compat."""
    return os.path.join(shim_path(), "smdistributed")


def job_driver_path(name: str) -> str:
    """Path of one of the drivers that travel with a job (``estimators/job_drivers/<name>``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "job_drivers", name)


@dataclass
class StagedSource:
    """A staged code directory.

    Attributes:
        directory: The staged directory (pass as ``source_dir``).
        entry_point: The entry point relative to it (for DTensor the launcher, which runs the user's script).
        skipped: Source paths left out by the exclusions.
    """

    directory: str
    entry_point: str
    skipped: list[str]

    def cleanup(self) -> None:
        """Deletes the staged directory."""
        shutil.rmtree(self.directory, ignore_errors=True)


def stage_source(
    entry_point: str,
    source_dir: str | None,
    dependencies: Sequence[str],
    plan: DistributionPlan,
    *,
    excludes: Sequence[str] = DEFAULT_SOURCE_EXCLUDES,
    parent: str | None = None,
) -> StagedSource:
    """Builds the job's code directory in a new temporary directory.

    ``entry_point`` is relative to ``source_dir`` when given; each of ``dependencies`` is shipped at the top under
    its own name; ``plan`` decides what else is shipped. Returns the staged directory and the entry point to run in
    it; the caller calls ``cleanup()``.

    Raises:
        ConfigurationError: The entry point itself is excluded, or smddp_compat cannot be found.
    """
    staging = tempfile.mkdtemp(prefix="smddp-source-", dir=parent)
    try:
        if source_dir:
            user_entry = entry_point
            skipped = copy_filtered(source_dir, staging, excludes)
        else:
            user_entry = os.path.basename(entry_point)
            skipped = []
            shutil.copy2(entry_point, os.path.join(staging, user_entry))
        if any(is_excluded(part, excludes) for part in user_entry.split(os.sep)):
            raise ConfigurationError(
                "entry_point", entry_point, "its path matches the source exclusions, so it would not be uploaded",
                "move the script out of excluded folders (see estimators.DEFAULT_SOURCE_EXCLUDES)",
            )
        for dependency in dependencies:
            target = os.path.join(staging, os.path.basename(os.path.normpath(dependency)))
            skipped += copy_filtered(dependency, target, excludes)
        if plan.ships_compat:
            for name in ("smddp_compat", "smdistributed"):
                if os.path.exists(os.path.join(staging, name)):
                    logger.warning("replacing %s/ of the source with the installed smddp-compat's", name)
                    shutil.rmtree(os.path.join(staging, name))
            copy_compat_core(os.path.join(staging, "smddp_compat"), excludes)
            copy_filtered(shim_package_dir(), os.path.join(staging, "smdistributed"), excludes)
        run = user_entry
        driver = plan.strategy.job_driver(plan.config)
        if driver is not None:
            shutil.copy2(job_driver_path(driver.script), os.path.join(staging, driver.name))
            with open(os.path.join(staging, driver.config_name), "w", encoding="utf-8") as handle:
                json.dump({"entry_point": user_entry, **driver.settings}, handle, indent=1)
            run = driver.name
        if skipped:
            logger.info("left out of the uploaded source: %s", ", ".join(skipped))
        return StagedSource(staging, run, skipped)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def stage_driver_dir(scripts: Sequence[str], *, with_compat: bool) -> str:
    """A new directory holding the job drivers ``scripts`` (file names under ``estimators/job_drivers/``), and with
    ``with_compat`` the installed ``smddp_compat`` package (without caches), for SDK v3's ``driver_dir``.

    It lives until the interpreter exits (ModelTrainer copies it when a job starts, which may be much later).
    """
    staging = tempfile.mkdtemp(prefix="smddp-drivers-")
    atexit.register(shutil.rmtree, staging, True)
    for script in scripts:
        shutil.copy2(job_driver_path(script), os.path.join(staging, script))
    if with_compat:
        copy_compat_core(os.path.join(staging, "smddp_compat"), DEFAULT_SOURCE_EXCLUDES)
    return staging
