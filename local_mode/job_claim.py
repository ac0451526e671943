"""One job per name and destination at a time: a claim held for a job's whole run.

Two local jobs given the same name and output at once would interleave their logs and overwrite each other's
tarballs. A job claims ``<output>/<job name>`` before it starts and holds the claim until it ends: an exclusive
``flock`` on a lock file named after the destination (in the machine's temporary folder, so an ``s3://`` destination
is claimed too), removed again at the end. The kernel drops the lock when the process ends, however it ends, so a
crashed job never blocks the name. A second job that finds the claim held is refused, naming the process that holds
it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.errors import ConfigurationError

__all__ = ["claimed_job"]

_ATTEMPTS = 5


def _claim_file(destination: Path | S3Location) -> Path:
    where = destination.uri if isinstance(destination, S3Location) else str(Path(destination).resolve())
    return Path(tempfile.gettempdir()) / f"smddp-compat-job-{hashlib.sha256(where.encode('utf-8')).hexdigest()[:32]}.lock"


def _lock(path: Path) -> tuple[int | None, str]:
    """``(descriptor of path, locked; "")``, or ``(None, pid of the holder)`` when another process holds it.

    The file a descriptor was opened on may have been removed by a holder that just ended: then it is opened anew.
    """
    for _ in range(_ATTEMPTS):
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip()
            os.close(descriptor)
            return None, holder or "another process"
        try:
            current: int | None = os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(descriptor).st_ino:
            return descriptor, ""
        os.close(descriptor)  # locked a file its holder removed on the way out: try the one there now
    raise OSError(f"could not claim {path}: it kept being replaced")


@contextlib.contextmanager
def claimed_job(destination: Path | S3Location, job_name: str) -> Iterator[None]:
    """Holds the claim on a job's destination while the ``with`` block runs.

    Args:
        destination: ``<output>/<job name>``, a folder or an S3 location.
        job_name: The job's name (for the message).

    Raises:
        ConfigurationError: Another running job holds the claim.
    """
    path = _claim_file(destination)
    descriptor, holder = _lock(path)
    if descriptor is None:
        where = destination.uri if isinstance(destination, S3Location) else str(destination)
        raise ConfigurationError(
            "job_name", job_name, f"is in use: a running job (pid {holder}) writes to {where}",
            "give this job another name (--job-name), or wait until that one ends",
        )
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, str(os.getpid()).encode("ascii"), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # still locked: a job starting now sees the file gone after its lock, and retries
        os.close(descriptor)  # releases the lock
