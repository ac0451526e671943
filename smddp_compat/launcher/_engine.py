"""Which collective engine a job's ranks use: Horovod over MPI (shared memory) or Horovod over Gloo (TCP loopback).

The default is the one bench measured faster (bench/LATEST.md, "Engines"): MPI, whose ranks exchange data through
shared memory, wherever every rank has an idle core of its own; Gloo otherwise (more ranks than idle cores, judged
by the cores and the load average at start), or when mpirun is missing. A waiting MPI rank polls, and on a busy
core it takes the time its peers need, where a waiting Gloo rank sleeps in the kernel: bench measured MPI far
slower than Gloo on a loaded 2-core machine. ``--gloo`` / ``--mpi`` or ``SMDDP_ENGINE=gloo|mpi`` force either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from smddp_compat.errors import UsageError
from smddp_compat.launcher._hosts import usable_cores
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
    load: float | None = None,
) -> EngineChoice:
    """The engine for ``num_ranks`` ranks on this machine.

    Returns the engine and the reason.

    Args:
        requested: ``gloo`` or ``mpi`` from the command line, or None.
        environ: Where ``SMDDP_ENGINE`` is read (default ``os.environ``).
        cores: Cores this process may run on (default: its CPU affinity, see ``usable_cores``).
        load: Runnable processes already on the machine (default: the 1-minute load average).

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
    total = cores if cores is not None else (usable_cores() or 1)
    busy = load if load is not None else os.getloadavg()[0]
    idle = max(0, int(total - busy + 0.5))
    if num_ranks > idle:
        return EngineChoice(
            "gloo",
            f"{num_ranks} rank(s) > {idle} idle core(s) ({total} cores, load {busy:.1f}): Gloo's ranks sleep while "
            "they wait, MPI's poll (force MPI with --mpi)",
        )
    return EngineChoice(
        "mpi",
        f"{num_ranks} rank(s) on {idle} idle core(s) ({total} cores, load {busy:.1f}): shared memory is faster "
        "(force Gloo with --gloo)",
    )
