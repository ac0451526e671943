"""What the two Horovod strategies (``smddp`` and ``mpi``) share: mpirun options, the world of H x P ranks and
their start on this machine (Horovod's rendezvous, and the engine: Gloo, or MPI for one host's ranks)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from smddp_compat import cluster
from smddp_compat.errors import ConfigurationError
from smddp_compat.launcher import ENGINE_VARIABLE, EngineChoice, HorovodRendezvous, choose_engine
from smddp_compat.strategies._base import LocalCluster, LocalLaunch, ProcessPlan, Strategy

__all__ = ["HorovodStrategy"]


class HorovodStrategy(Strategy):
    """H x P Horovod ranks; subclasses say how SageMaker's SDK asks for them."""

    settings = frozenset({"custom_mpi_options"})
    sdk_keys = frozenset({"enabled", "custom_mpi_options", "processes_per_host"})
    ships_compat = True

    def rank_python_path(self) -> tuple[str, ...]:
        """Folders put first on every rank's ``PYTHONPATH``."""
        return ()

    @staticmethod
    def local_engine(job: LocalCluster) -> EngineChoice:
        """The engine of the job's ranks on this machine.

        One host: smddprun's rule (MPI when every rank has an idle core; ``SMDDP_ENGINE`` forces either). Several
        simulated hosts: Gloo, whose rendezvous gives each host its own local ranks; MPI would see one machine.

        Raises:
            ConfigurationError: ``SMDDP_ENGINE=mpi`` for a job of several hosts.
        """
        hosts = len(job.hosts)
        if hosts == 1:
            return choose_engine(job.processes_per_host)
        if os.environ.get(ENGINE_VARIABLE, "").strip().lower() == "mpi":
            raise ConfigurationError(
                ENGINE_VARIABLE, os.environ[ENGINE_VARIABLE],
                f"the MPI engine runs one host's ranks, and this job has {hosts} hosts",
                "unset SMDDP_ENGINE (multi-host jobs use Gloo), or use instance_count=1",
            )
        return EngineChoice("gloo", f"{hosts} hosts: Gloo gives each simulated host its own local ranks")

    @contextlib.contextmanager
    def local_launch(self, job: LocalCluster) -> Iterator[LocalLaunch]:
        """Every rank with the variables of Horovod's Gloo rendezvous (held open while they run); one host's
        ranks run as one mpirun group when the engine is MPI."""
        engine = self.local_engine(job)
        slots = [cluster.HostSlots(host, job.processes_per_host, job.addresses[host]) for host in job.hosts]
        with HorovodRendezvous(slots, bind_address=job.addresses[job.hosts[0]]) as rendezvous:
            rank_envs = rendezvous.rank_envs()
            placements = cluster.uniform_placements(job.hosts, job.processes_per_host)
            plans = [ProcessPlan.at(p, rank_envs[p.rank], python_path=self.rank_python_path()) for p in placements]
            # Gloo ranks reach the rendezvous on this machine's loopback and bind Gloo to ``lo``: nothing of theirs
            # listens elsewhere. mpirun's listeners do: its group has a network of its own.
            mpi = engine.engine == "mpi"
            yield LocalLaunch(plans, note=engine.describe(), mpi=mpi, own_network=mpi)
