"""Distribution ``mwms``: TensorFlow's ``MultiWorkerMirroredStrategy``, one ``TF_CONFIG`` per worker."""

from __future__ import annotations

from typing import Any

from smddp_compat import cluster, contract
from smddp_compat.errors import ConfigurationError
from smddp_compat.strategies._base import LocalCluster, ProcessPlan, Strategy
from smddp_compat.strategies._ports import local_endpoints

__all__ = ["MultiWorkerMirrored"]


class MultiWorkerMirrored(Strategy):
    """``{"multi_worker_mirrored_strategy": {"enabled": True}}``: every process is a worker (worker 0 the chief).

    SageMaker's toolkit runs one worker per host; this machine's process backend may run several per host."""

    name = "mwms"
    sdk_key = "multi_worker_mirrored_strategy"
    title = "MultiWorkerMirroredStrategy"
    serves_every_interface = True

    def to_sdk_dict(self, config: Any) -> dict[str, Any]:
        """``{"multi_worker_mirrored_strategy": {"enabled": True}}``.

        Raises:
            ConfigurationError: More than one process per host, which SageMaker's strategy cannot run.
        """
        if config.processes_per_host not in (None, 1):
            raise ConfigurationError(
                config.names.processes_per_host, config.processes_per_host,
                "SageMaker's multi_worker_mirrored_strategy runs one process per host (so do the twin and "
                "--backend docker); the process backend runs several",
                "drop the option (one worker per host), use the process backend (smddp local without --backend "
                "docker), or use distribution 'mpi' or 'smddp' to run several per host",
            )
        return {str(self.sdk_key): {"enabled": True}}

    def framework_parameters(self, config: Any, instance_type: str) -> dict[str, Any]:
        """As the SDK sends them for MWMS."""
        return {contract.MWMS_ENABLED: True}

    def local_plans(self, job: LocalCluster) -> list[ProcessPlan]:
        """Every worker with its ``TF_CONFIG``, on its host's loopback address and a port reserved for it."""
        placements = cluster.uniform_placements(job.hosts, job.processes_per_host)
        workers = local_endpoints(job, placements)
        return [ProcessPlan.at(p, env) for p, env in zip(placements, cluster.mwms_environments(placements, workers))]
