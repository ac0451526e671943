"""Launch plans of local mode: which processes a job starts on which host, with the variables each needs.

The placement and the variables are :mod:`smddp_compat.cluster`'s (the same as every other launcher's); this module
adds what is local mode's own: one loopback address per host, the ``sagemaker_*`` framework parameters, and the
``PYTHONPATH`` folders of a process. Every function is pure (ports and Horovod's rank variables are passed in).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smddp_compat.local_mode.spec import Distribution
from smddp_compat import cluster

__all__ = [
    "ProcessPlan",
    "host_addresses",
    "framework_parameters",
    "plan_single",
    "plan_horovod",
    "plan_mwms",
    "plan_dtensor",
    "smdistributed_shim_path",
]

_FIRST_HOST_ADDRESS = ipaddress.IPv4Address("127.0.0.2")


@dataclass(frozen=True)
class ProcessPlan:
    """One process of a job.

    Attributes:
        host: Its host (``algo-N``).
        host_index: N - 1.
        local_index: Its index among its host's processes.
        index: Its global index (rank / worker index / client id).
        env: The distribution's variables for this process (added to the host's environment).
        python_path: Folders to put first on ``PYTHONPATH``.
    """

    host: str
    host_index: int
    local_index: int
    index: int
    env: Mapping[str, str] = field(default_factory=dict)
    python_path: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The output prefix: ``algo-N,index``."""
        return f"{self.host},{self.index}"


def host_addresses(count: int) -> dict[str, str]:
    """Host name -> its own loopback address: ``algo-1`` -> 127.0.0.2, ``algo-2`` -> 127.0.0.3, ...

    Args:
        count: H.

    Returns:
        The map, in host order.
    """
    return {f"algo-{n + 1}": str(_FIRST_HOST_ADDRESS + n) for n in range(count)}


def framework_parameters(distribution: Distribution, processes_per_host: int, instance_type: str) -> dict[str, Any]:
    """The ``sagemaker_*`` hyperparameters the SageMaker SDK adds for a distribution.

    Args:
        distribution: The job's distribution.
        processes_per_host: P.
        instance_type: The instance type reported to the job.

    Returns:
        Name -> decoded value (empty for ``none`` and ``dtensor``, which SageMaker has no switch for).
    """
    if distribution is Distribution.SMDDP:
        return {
            "sagemaker_distributed_dataparallel_enabled": True,
            "sagemaker_distributed_dataparallel_custom_mpi_options": "",
            "sagemaker_instance_type": instance_type,
        }
    if distribution is Distribution.MPI:
        return {
            "sagemaker_mpi_enabled": True,
            "sagemaker_mpi_num_of_processes_per_host": processes_per_host,
            "sagemaker_mpi_custom_mpi_options": "",
        }
    if distribution is Distribution.MWMS:
        return {"sagemaker_multi_worker_mirrored_strategy_enabled": True}
    return {}


def _plan(placement: cluster.Placement, env: Mapping[str, str], python_path: tuple[str, ...] = ()) -> ProcessPlan:
    return ProcessPlan(placement.host, placement.host_index, placement.local_index, placement.index, env, python_path)


def plan_single(hosts: Sequence[str]) -> list[ProcessPlan]:
    """Distribution ``none``: one process per host, nothing to coordinate.

    Args:
        hosts: The host names.

    Returns:
        One plan per host.
    """
    return [_plan(p, {}) for p in cluster.uniform_placements(hosts, 1)]


def plan_horovod(
    hosts: Sequence[str], per_host: int, rank_envs: Sequence[Mapping[str, str]], *, shim_path: str | None = None
) -> list[ProcessPlan]:
    """Distributions ``smddp`` and ``mpi``: H x P Horovod ranks.

    Args:
        hosts: The host names.
        per_host: P.
        rank_envs: ``HorovodRendezvous.rank_envs()``: the HOROVOD_* variables of each rank, in rank order.
        shim_path: For ``smddp``, the folder holding the ``smdistributed`` package; None for ``mpi``.

    Returns:
        One plan per rank.

    Raises:
        ValueError: ``rank_envs`` does not hold exactly H x P entries.
    """
    placements = cluster.uniform_placements(hosts, per_host)
    if len(rank_envs) != len(placements):
        raise ValueError(f"expected {len(placements)} rank environments, got {len(rank_envs)}")
    extra = (shim_path,) if shim_path else ()
    return [_plan(p, dict(rank_envs[p.index]), extra) for p in placements]


def plan_mwms(
    hosts: Sequence[str], per_host: int, addresses: Mapping[str, str], ports: Sequence[int]
) -> list[ProcessPlan]:
    """Distribution ``mwms``: every process is a MultiWorkerMirroredStrategy worker with its own ``TF_CONFIG``.

    The cluster lists one ``address:port`` per worker on its host's loopback address, with the port reserved for
    it (:func:`smddp_compat.cluster.endpoints`; names do not resolve here). Worker 0 is the chief.

    Args:
        hosts: The host names.
        per_host: P (workers per host).
        addresses: Host name -> loopback address.
        ports: A free port for each worker, in worker order.

    Returns:
        One plan per worker.
    """
    placements = cluster.uniform_placements(hosts, per_host)
    workers = cluster.endpoints(placements, addresses, ports=ports)
    return [_plan(p, env) for p, env in zip(placements, cluster.mwms_environments(placements, workers))]


def plan_dtensor(
    hosts: Sequence[str],
    per_host: int,
    addresses: Mapping[str, str],
    ports: Sequence[int],
    *,
    mesh: Mapping[str, int] | None = None,
    devices_per_client: int | None = None,
) -> list[ProcessPlan]:
    """Distribution ``dtensor``: every process is a DTensor client.

    Args:
        hosts: The host names.
        per_host: P (clients per host).
        addresses: Host name -> loopback address.
        ports: A free port for each client, in client order.
        mesh: The global mesh to announce (``SMDDP_DTENSOR_MESH``, JSON), if any.
        devices_per_client: Devices each client should bring (``SMDDP_DTENSOR_DEVICES_PER_CLIENT``), if known.

    Returns:
        One plan per client, with :func:`smddp_compat.cluster.dtensor_environments`' variables.
    """
    placements = cluster.uniform_placements(hosts, per_host)
    clients = cluster.endpoints(placements, addresses, ports=ports)
    envs = cluster.dtensor_environments(placements, clients, mesh=mesh, devices_per_client=devices_per_client)
    return [_plan(p, env) for p, env in zip(placements, envs)]


def smdistributed_shim_path() -> str | None:
    """The folder to put first on ``PYTHONPATH`` so that ``import smdistributed.dataparallel.tensorflow`` works.

    Returns:
        smddp_compat's ``smdistributed`` alias folder, or None when a real SMDDP is installed (never shadowed).
    """
    from smddp_compat.smdistributed_shim import path, real_smddp_location

    return None if real_smddp_location() else path()
