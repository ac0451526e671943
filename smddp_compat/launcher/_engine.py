"""Which collective engine a job's ranks use: Horovod over MPI (shared memory) or Horovod over Gloo (TCP loopback).

The default is the one bench measured faster (bench/LATEST.md, "Engines"): MPI, whose ranks exchange data through
shared memory, wherever every rank has a core of its own; Gloo when there are more ranks than cores (a waiting MPI
rank polls and takes the core a peer needs, where a Gloo rank sleeps in the kernel), or when mpirun is missing.
``--gloo`` / ``--mpi`` or ``SMDDP_ENGINE=gloo|mpi`` force either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from smddp_compat.errors import UsageError
from smddp_compat.launcher._mpi_group import mpirun_unavailable_reason

__all__ = ["ENGINES", "ENGINE_VARIABLE", "EngineChoice", "choose_engine"]

#: The engines, by the name ``--gloo`` / ``--mpi`` and ``SMDDP_ENGINE`` use.
ENGINES = ("gloo", "mpi")
#: Environment variable that forces an engine when no option does.
ENGINE_VARIABLE = "SMDDP_ENGINE"

_DESCRIPTIONS = {"gloo": "Horovod over Gloo (TCP loopback)", "mpi": "Horovod over MPI (shared memory)"}


@dataclass(frozen=True)
class EngineChoice:
    """The engine of a job and why it was chosen.

    Attributes:
        engine: ``gloo`` or ``mpi``.
        why: The reason, for the line printed at start.
    """

    engine: str
    why: str

    def describe(self) -> str:
        """``engine mpi (Horovod over MPI (shared memory)): <why>``."""
        return f"engine {self.engine} ({_DESCRIPTIONS[self.engine]}): {self.why}"


def choose_engine(
    num_ranks: int,
    requested: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cores: int | None = None,
) -> EngineChoice:
    """The engine for ``num_ranks`` ranks on this machine.

    Args:
        num_ranks: Ranks of the job on this machine.
        requested: ``gloo`` or ``mpi`` from the command line, or None.
        environ: Where ``SMDDP_ENGINE`` is read (default ``os.environ``).
        cores: Cores of this machine (default ``os.cpu_count()``).

    Returns:
        The engine and the reason.

    Raises:
        UsageError: ``SMDDP_ENGINE`` names no engine, or MPI is forced but mpirun is missing.
    """
    env = os.environ if environ is None else environ
    forced_by = f"--{requested}" if requested else None
    if requested is None and env.get(ENGINE_VARIABLE, "").strip():
        requested = env[ENGINE_VARIABLE].strip().lower()
        forced_by = f"{ENGINE_VARIABLE}={env[ENGINE_VARIABLE]}"
        if requested not in ENGINES:
            raise UsageError(
                f"{ENGINE_VARIABLE}={env[ENGINE_VARIABLE]!r} names no engine: set it to gloo or mpi, or unset it "
                "to let the launcher choose."
            )
    missing = mpirun_unavailable_reason()
    if requested is not None:
        if requested == "mpi" and missing:
            raise UsageError(f"{forced_by} asks for the MPI engine, but {missing}; or use the Gloo engine (--gloo).")
        return EngineChoice(requested, f"forced by {forced_by}")
    if missing:
        return EngineChoice("gloo", f"the default would be mpi, but {missing}")
    available = cores if cores is not None else (os.cpu_count() or 1)
    if num_ranks > available:
        return EngineChoice(
            "gloo",
            f"{num_ranks} ranks > {available} cores, where Gloo's sleeping waits leave the cores to the busy ranks "
            "(force MPI with --mpi)",
        )
    return EngineChoice(
        "mpi", f"{num_ranks} rank(s) on {available} cores: shared memory is the faster engine (force Gloo with --gloo)"
    )
