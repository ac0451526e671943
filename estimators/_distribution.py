"""The ``distribution=`` argument: checked, and turned into what the SDK, the container and local mode need.

Accepted (one strategy per job, like the SDK):

- ``{"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "...", "processes_per_host": N}}}``
  -> SageMaker's SMDDP launch, exactly as the SDK requests it for TensorFlow <= 2.11
  (``sagemaker_distributed_dataparallel_enabled``, ``sagemaker_instance_type``, ``sagemaker_distributed_dataparallel_
  custom_mpi_options``): the image's toolkit runs ``mpirun ... smddprun python -m mpi4py script``, one process per
  GPU (one per host on CPU types); ``processes_per_host`` is an smddp-compat extension to run fewer or more.
- ``{"mpi": {"enabled": True, "processes_per_host": N, "custom_mpi_options": "..."}}`` -> as in the SDK (Horovod).
- ``{"multi_worker_mirrored_strategy": {"enabled": True}}`` and ``{"parameter_server": {"enabled": True}}`` -> as in
  the SDK.
- ``{"dtensor": {"enabled": True, "mesh": {"batch": 8}, "processes_per_host": 1, "devices_per_process": N,
  "device_type": "GPU"|"CPU", "port": 9970}}`` -> one DTensor client per process; a launcher sets DTENSOR_*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from smddp_compat import errors as _shared_errors
from smddp_compat.distribution_config import DEFAULT_DTENSOR_PORT, KINDS, DistributionConfig, HostCapacity

from smddp_compat.estimators._instance_types import InstanceSpec
from smddp_compat.estimators.errors import ConfigurationError

__all__ = ["DTensorConfig", "DistributionPlan", "plan_distribution", "host_capacity", "KINDS", "DEFAULT_DTENSOR_PORT"]


@dataclass(frozen=True)
class DTensorConfig:
    """A checked DTensor set-up.

    Attributes:
        processes_per_host: DTensor clients per host.
        devices_per_process: Accelerators (GPU) or virtual CPUs each client drives.
        device_type: ``"GPU"`` or ``"CPU"``.
        mesh: Mesh dimensions in order, e.g. ``(("batch", 4), ("model", 2))``, or None (the script builds its own).
        port: First port of the clients on every host (client ``i`` of a host listens on ``port + i``).
        job_name: DTENSOR_JOB_NAME.
    """

    processes_per_host: int
    devices_per_process: int
    device_type: str
    mesh: tuple[tuple[str, int], ...] | None = None
    port: int = DEFAULT_DTENSOR_PORT
    job_name: str = "worker"

    def to_json(self) -> dict[str, Any]:
        """The form the container launcher reads (``smddp_compat_dtensor.json``)."""
        return {
            "processes_per_host": self.processes_per_host,
            "devices_per_process": self.devices_per_process,
            "device_type": self.device_type,
            "mesh": [[name, size] for name, size in self.mesh] if self.mesh else None,
            "port": self.port,
            "job_name": self.job_name,
        }


@dataclass(frozen=True)
class DistributionPlan:
    """What a checked ``distribution`` means for one job.

    Attributes:
        kind: ``none``, ``smddp``, ``mpi``, ``mwms``, ``parameter_server`` or ``dtensor``.
        processes_per_host: Processes each host runs.
        custom_mpi_options: MPI options, kept literally (never given to a shell).
        sdk_distribution: The dictionary handed to the SDK's TensorFlow estimator (None: single process per host).
        dtensor: The DTensor set-up, for ``dtensor`` only.
        original: The user's dictionary, unchanged.
        explicit_processes_per_host: For ``smddp``: ``processes_per_host`` when the user gave it (sent as
            ``sagemaker_mpi_num_of_processes_per_host``, which the toolkit's SMDDP launch honours), else None.
        config: The checked distribution model, every default filled in.
    """

    kind: str
    processes_per_host: int
    custom_mpi_options: str = ""
    sdk_distribution: dict[str, Any] | None = None
    dtensor: DTensorConfig | None = None
    original: dict[str, Any] = field(default_factory=dict)
    explicit_processes_per_host: int | None = None
    config: DistributionConfig | None = None

    @property
    def ships_compat(self) -> bool:
        """True when the uploaded source must carry smddp_compat (and the smdistributed alias)."""
        return self.kind in ("smddp", "mpi", "dtensor")


def host_capacity(spec: InstanceSpec) -> HostCapacity:
    """What one host of an instance type offers; ``local_process`` hosts all share this machine."""
    if spec.name == "local_process":
        return HostCapacity.this_machine(spec.vcpus)
    return HostCapacity.instance(spec.name, spec.vcpus, spec.gpus)


def _sdk_distribution(config: DistributionConfig) -> dict[str, Any] | None:
    """The dictionary the SDK's own estimator gets (DTensor is launched by smddp-compat, not by the SDK)."""
    if config.kind == "smddp":
        # SageMaker's own SMDDP launch (the SDK's hyperparameters for TF <= 2.11): the image's toolkit starts one
        # process per GPU (one per host on CPU types) unless processes_per_host was given.
        return {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": config.custom_mpi_options}}}
    if config.kind == "mpi":
        return {"mpi": {"enabled": True, "processes_per_host": config.processes_per_host,
                        "custom_mpi_options": config.custom_mpi_options}}
    if config.kind in ("mwms", "parameter_server"):
        return {str(KINDS[config.kind]): {"enabled": True}}
    return None


def plan_distribution(
    distribution: Mapping[str, Any] | None, *, spec: InstanceSpec, instance_count: int
) -> DistributionPlan:
    """Checks ``distribution`` against the instance type and count, and plans the launch.

    The checks are those of :class:`smddp_compat.distribution_config.DistributionConfig`, shared with local mode and
    the CLIs.

    Args:
        distribution: The estimator's ``distribution`` argument (None or empty for a single process per host).
        spec: The instance type's spec.
        instance_count: Number of instances (already checked >= 1).

    Returns:
        The plan.

    Raises:
        ConfigurationError: Not a dictionary, an unknown or second strategy, an unknown key, a bad value, a
            process count the instance cannot hold, or a DTensor mesh that does not match the devices.
    """
    original = dict(distribution) if isinstance(distribution, Mapping) else {}
    try:
        given = DistributionConfig.from_sdk_dict(distribution)
        config = given.resolve(host_capacity(spec), instance_count)
    except _shared_errors.ConfigurationError as exc:
        raise ConfigurationError(exc.field, exc.value, exc.problem, exc.fix) from None
    per_host = config.processes_per_host or 1
    dtensor = None
    if config.kind == "dtensor":
        # The container launcher reads a number; CPU clients without a mesh drive one device each.
        dtensor = DTensorConfig(per_host, config.devices_per_process or 1, config.device_type or "CPU", config.mesh,
                                config.port, config.job_name)
    explicit = given.processes_per_host if config.kind == "smddp" else None
    return DistributionPlan(config.kind, per_host, config.custom_mpi_options, _sdk_distribution(config), dtensor,
                            original=original, explicit_processes_per_host=explicit, config=config)
