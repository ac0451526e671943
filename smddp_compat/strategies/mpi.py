"""Distribution ``mpi``: Horovod ranks, as SageMaker's ``mpi`` distribution starts them."""

from __future__ import annotations

from typing import Any

from smddp_compat import contract
from smddp_compat.strategies.horovod import HorovodStrategy

__all__ = ["MPI"]


class MPI(HorovodStrategy):
    """``{"mpi": {"enabled": True, "processes_per_host": N, "custom_mpi_options": "..."}}``: H x P Horovod ranks;
    one per GPU of a host (one per host on CPU types) unless told."""

    name = "mpi"
    sdk_key = "mpi"
    title = "Horovod over MPI"
    ranks_see_the_leaders_environment = True  # the toolkit's MPI runner: mpirun -x every SM_* of the leader

    def default_processes_per_host(self, capacity: Any) -> int:
        """One process per GPU, else one."""
        return capacity.gpus or 1

    def estimator_distribution(self, config: Any) -> dict[str, Any]:
        """The SDK's ``mpi`` dictionary, processes per host resolved."""
        return {"mpi": {"enabled": True, "processes_per_host": config.processes_per_host,
                        "custom_mpi_options": config.custom_mpi_options}}

    def framework_parameters(self, config: Any, instance_type: str) -> dict[str, Any]:
        """As the SDK sends them for ``mpi``."""
        return {contract.MPI_ENABLED: True, contract.MPI_PROCESSES_PER_HOST: config.processes_per_host,
                contract.MPI_CUSTOM_OPTIONS: config.custom_mpi_options}
