"""The collective engines the kit can use on this machine, and the one ``smddprun`` uses by default."""

from __future__ import annotations

import shutil

from bench._jobs import Launcher

__all__ = ["default_engine", "engine_launcher", "horovod_engines", "mpi_unavailable_reason", "ENGINE_NAMES"]

#: Engine -> name in the table.
ENGINE_NAMES = {"gloo": "Horovod/Gloo", "mpi": "Horovod/MPI", "mwms": "TF MWMS ring"}


def default_engine() -> str:
    """The engine ``smddprun -np N`` runs when neither ``--gloo`` nor ``--mpi`` is given: Gloo (its parser leaves
    the engine unset then, so that ranks started by mpirun can tell an explicit ``--gloo``)."""
    return "gloo"


def engine_launcher(engine: str) -> Launcher:
    """The launcher that runs Horovod ranks on ``engine`` (``gloo`` or ``mpi``)."""
    return Launcher.SMDDPRUN_MPI if engine == "mpi" else Launcher.SMDDPRUN_GLOO


def mpi_unavailable_reason() -> str | None:
    """Why Horovod over MPI cannot run here (None when it can)."""
    if shutil.which("mpirun") is None:
        return "mpirun is not on PATH (install Debian's openmpi-bin: setup.sh does)"
    return None


def horovod_engines() -> list[str]:
    """The Horovod engines that can run here: ``gloo``, and ``mpi`` when mpirun is installed."""
    return ["gloo"] if mpi_unavailable_reason() else ["gloo", "mpi"]
