"""The ports of a job's servers on this machine (TF_CONFIG's and DTENSOR_JOBS' endpoints)."""

from __future__ import annotations

from collections.abc import Sequence

from smddp_compat import cluster
from smddp_compat.strategies._base import LocalCluster

__all__ = ["local_endpoints"]


def local_endpoints(job: LocalCluster, placements: Sequence[cluster.Placement]) -> list[str]:
    """Every placed process's ``address:port`` on its host's loopback address, each port free when reserved (names
    do not resolve here, and TensorFlow's servers listen on every address, so no two may share a port)."""
    ports = job.free_ports([job.addresses.get(p.host, p.host) for p in placements])
    return cluster.endpoints(placements, job.addresses, ports=ports)
