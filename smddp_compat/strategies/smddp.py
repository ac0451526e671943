"""Distribution ``smddp``: SageMaker distributed data parallel, as SageMaker launched it for TensorFlow <= 2.11
(``mpirun ... smddprun python -m mpi4py script``), with ``smdistributed.dataparallel`` resolving to smddp-compat."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smddp_compat import contract
from smddp_compat.errors import ConfigurationError
from smddp_compat.smdistributed_shim import path, real_smddp_location
from smddp_compat.strategies.horovod import HorovodStrategy

__all__ = ["SMDDP"]


class SMDDP(HorovodStrategy):
    """``{"smdistributed": {"dataparallel": {"enabled": True, ...}}}``: H x P Horovod ranks that import
    ``smdistributed.dataparallel``; one per GPU of a host (one per vCPU on CPU types) unless told."""

    name = "smddp"
    sdk_key = "smdistributed"
    title = "SageMaker distributed data parallel (smdistributed.dataparallel)"
    distribution_set_after_sdk_checks = True  # the SDK refuses smdistributed after TF 2.11, yet builds its launch

    def default_processes_per_host(self, capacity: Any) -> int:
        """One process per GPU, else per vCPU (this machine: its cores shared by the hosts)."""
        return capacity.default_slots

    def settings_from_sdk(self, value: object, path: str) -> tuple[Mapping[str, Any], str]:
        """The ``dataparallel`` dictionary inside ``smdistributed``."""
        if not isinstance(value, Mapping):
            raise ConfigurationError(
                path, value, "expected a dictionary", "write {'smdistributed': {'dataparallel': {'enabled': True}}}"
            )
        others = sorted(set(value) - {"dataparallel"})
        if others:
            fix = "use {'dataparallel': {'enabled': True}}"
            if "modelparallel" in others:
                fix = "SageMaker model parallelism (SMP) is not provided; use distribution={'dtensor': {...}} instead"
            raise ConfigurationError(path, dict(value), f"unsupported {others}", fix)
        return value.get("dataparallel", {}), f"{path}['dataparallel']"

    def to_sdk_dict(self, config: Any) -> dict[str, Any]:
        """``{"smdistributed": {"dataparallel": {...}}}``."""
        return {"smdistributed": {"dataparallel": self.sdk_settings(config)}}

    def estimator_distribution(self, config: Any) -> dict[str, Any]:
        """SageMaker's own SMDDP launch (the SDK's hyperparameters for TF <= 2.11): the image's toolkit starts one
        process per GPU (one per host on CPU types) unless ``processes_per_host`` was given
        (:meth:`estimator_hyperparameters`)."""
        return {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": config.custom_mpi_options}}}

    def estimator_hyperparameters(self, given: Any) -> dict[str, str]:
        """``sagemaker_mpi_num_of_processes_per_host`` when the user gave ``processes_per_host`` (the toolkit's
        SMDDP launch honours it)."""
        if given.processes_per_host is None:
            return {}
        return {contract.MPI_PROCESSES_PER_HOST: str(given.processes_per_host)}

    def framework_parameters(self, config: Any, instance_type: str) -> dict[str, Any]:
        """As the SDK sends them for SMDDP, with the processes per host as the kit's estimator adds them
        (:meth:`estimator_hyperparameters`: a local job's processes per host are always given)."""
        return {contract.SMDDP_ENABLED: True, contract.SMDDP_CUSTOM_MPI_OPTIONS: config.custom_mpi_options,
                contract.INSTANCE_TYPE: instance_type, contract.MPI_PROCESSES_PER_HOST: config.processes_per_host}

    def rank_python_path(self) -> tuple[str, ...]:
        """smddp-compat's ``smdistributed`` alias folder, unless a real SMDDP is installed (never shadowed)."""
        return () if real_smddp_location() else (path(),)
