"""The collective engines the kit can use on this machine, and the one ``smddprun`` uses by default."""

from __future__ import annotations

from smddp_compat.bench.jobs import Launcher
from smddp_compat.launcher import choose_engine, mpirun_unavailable_reason

__all__ = ["default_engine", "engine_label", "engine_launcher", "horovod_engines", "mpi_unavailable_reason",
           "ENGINE_NAMES"]

#: Engine -> name in the table.
ENGINE_NAMES = {"gloo": "Horovod/Gloo", "mpi": "Horovod/MPI", "mwms": "TF MWMS ring"}


def default_engine(ranks: int) -> str:
    """The engine ``smddprun -np ranks`` picks on this machine when neither ``--gloo`` nor ``--mpi`` is given.

    Judged on an idle machine (the bench's own jobs are the load it measures): the engine its rows are labelled
    with and its goals apply to, whatever the load when the bench started.
    """
    return choose_engine(ranks, environ={}, load=0.0).engine


def engine_label(engine: str, ranks: int) -> str:
    """The engine's name in the table, with ``(default)`` when ``smddprun -np ranks`` picks it on this machine."""
    return ENGINE_NAMES[engine] + (" (default)" if engine == default_engine(ranks) else "")


def engine_launcher(engine: str) -> Launcher:
    """The launcher that runs Horovod ranks on ``engine`` (``gloo`` or ``mpi``)."""
    return Launcher.SMDDPRUN_MPI if engine == "mpi" else Launcher.SMDDPRUN_GLOO


def mpi_unavailable_reason() -> str | None:
    """Why Horovod over MPI cannot run here (None when it can)."""
    return mpirun_unavailable_reason()


def horovod_engines() -> list[str]:
    """The Horovod engines that can run here: ``gloo``, and ``mpi`` when mpirun is installed."""
    return ["gloo"] if mpi_unavailable_reason() else ["gloo", "mpi"]
