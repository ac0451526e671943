"""What every rank of a job gets from smddprun, however it was started: the kit's job start-up (the Keras 3
adaptation, :mod:`smddp_compat.job_startup`) and the ``smdistributed`` alias on ``PYTHONPATH``, and the stall
settings (Horovod's stall inspector and smddp_compat's stall watchdog)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from typing import Iterator

from smddp_compat import job_startup, smdistributed_shim
from smddp_compat.errors import UsageError

__all__ = ["with_job_startup", "with_shim_on_path", "stall_env", "stall_watchdog_env", "stall_directory"]


def with_shim_on_path(env: dict[str, str], *, enabled: bool = True, stream=sys.stderr) -> dict[str, str]:
    """Returns ``env`` with the smdistributed alias first on PYTHONPATH, unless a real SMDDP is installed."""
    existing = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not enabled or existing[:1] == [smdistributed_shim.path()]:
        return env
    real = smdistributed_shim.real_smddp_location(existing + sys.path)
    if real:
        print(
            f"smddprun: a real smdistributed.dataparallel is installed at {real}; using it "
            "(the smddp_compat alias is not put on PYTHONPATH).",
            file=stream,
        )
        return env
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([smdistributed_shim.path(), *existing])
    return out


def with_job_startup(env: dict[str, str]) -> dict[str, str]:
    """Returns ``env`` with the kit's job start-up folder first on PYTHONPATH (once), as every job the kit starts has
    it: a Keras 3 script under MultiWorkerMirroredStrategy or ParameterServerStrategy then trains unchanged."""
    existing = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if existing[:1] == [job_startup.startup_path()]:
        return env
    rest = os.pathsep.join(p for p in existing if p != job_startup.startup_path())
    return {**env, "PYTHONPATH": job_startup.with_startup_path(rest or None)}


#: Seconds Horovod's own stall shutdown waits beyond smddp_compat's watchdog: the watchdog ends a rank stalled in
#: one of the kit's collectives first (naming the collective and the missing ranks, writing the failure file);
#: Horovod's inspector, which works under the MPI controller only, still ends one stalled elsewhere (a collective
#: called through Horovod's own API, or compiled by XLA).
HOROVOD_SHUTDOWN_MARGIN_SECONDS = 5


def stall_env(check_seconds: float | None, shutdown_seconds: float | None) -> dict[str, str]:
    """Horovod's stall-inspector variables for the given limits (empty when both are None).

    The shutdown comes :data:`HOROVOD_SHUTDOWN_MARGIN_SECONDS` after ``shutdown_seconds``.
    """
    env: dict[str, str] = {}
    if check_seconds is not None:
        env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(int(max(1, check_seconds)))
    if shutdown_seconds is not None:
        if check_seconds is None:
            env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(int(max(1, shutdown_seconds / 2)))
        shutdown = int(max(1, shutdown_seconds)) + HOROVOD_SHUTDOWN_MARGIN_SECONDS
        env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = str(shutdown)
    return env


def stall_watchdog_env(
    check_seconds: float | None, shutdown_seconds: float | None, directory: str
) -> dict[str, str]:
    """The variables of smddp_compat's stall watchdog (see smddp_compat.tensorflow._stall) for every rank.

    Horovod's own stall inspector is inert under the Gloo controller (Horovod 0.28.1), so the watchdog does the
    warning and the shutdown; the HOROVOD_STALL_* variables are still set (they work under ``--mpi``).

    Args:
        check_seconds: Warn after this many seconds in one collective (None: the watchdog's default, 60).
        shutdown_seconds: End a rank after this many seconds in one collective (None: never).
        directory: The status directory shared by the ranks (SMDDP_STALL_DIR; the two others are set when given).

    Raises:
        UsageError: ``shutdown_seconds`` is shorter than ``check_seconds``.
    """
    if check_seconds is not None and shutdown_seconds is not None and shutdown_seconds < check_seconds:
        raise UsageError(
            f"--stall-shutdown-seconds {shutdown_seconds:g} is shorter than --stall-check-seconds {check_seconds:g}: "
            "the warning comes first; raise --stall-shutdown-seconds or lower --stall-check-seconds."
        )
    env = {"SMDDP_STALL_DIR": directory}
    if check_seconds is not None:
        env["SMDDP_STALL_WARNING_SECONDS"] = f"{check_seconds:g}"
    elif shutdown_seconds is not None:
        env["SMDDP_STALL_WARNING_SECONDS"] = f"{shutdown_seconds / 2:g}"
    if shutdown_seconds is not None:
        env["SMDDP_STALL_TIMEOUT_SECONDS"] = f"{shutdown_seconds:g}"
    return env


@contextlib.contextmanager
def stall_directory() -> Iterator[str]:
    """A fresh status directory for the stall watchdog, removed with everything in it at the end."""
    directory = tempfile.mkdtemp(prefix="smddp-stall-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
