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

from smddp_compat.distribution_config import DEFAULT_DTENSOR_PORT, KINDS, DistributionConfig, HostCapacity
from smddp_compat.estimators._validation import check_instance_count
from smddp_compat.instance_types import InstanceSpec
from smddp_compat.strategies import Strategy

__all__ = ["DistributionPlan", "plan_distribution", "host_capacity", "KINDS", "DEFAULT_DTENSOR_PORT"]


@dataclass(frozen=True)
class DistributionPlan:
    """What a checked ``distribution`` means for one job.

    Attributes:
        kind: ``none``, ``smddp``, ``mpi``, ``mwms``, ``parameter_server`` or ``dtensor``.
        processes_per_host: Processes each host runs.
        custom_mpi_options: MPI options, kept literally (never given to a shell).
        sdk_distribution: The dictionary handed to the SDK's TensorFlow estimator (None: single process per host).
        original: The user's dictionary, unchanged.
        hyperparameters: What the kit's estimator adds to the SDK's hyperparameters for the strategy (e.g.
            ``sagemaker_mpi_num_of_processes_per_host`` for an SMDDP job that set ``processes_per_host``).
        config: The checked distribution model, every default filled in.
    """

    kind: str
    processes_per_host: int
    custom_mpi_options: str = ""
    sdk_distribution: dict[str, Any] | None = None
    original: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, str] = field(default_factory=dict)
    config: DistributionConfig = field(default_factory=DistributionConfig)

    @property
    def strategy(self) -> Strategy:
        """The strategy that owns the job's distribution."""
        return self.config.strategy

    @property
    def ships_compat(self) -> bool:
        """True when the uploaded source must carry smddp_compat (and the smdistributed alias)."""
        return self.strategy.ships_compat


def host_capacity(spec: InstanceSpec, instance_count: int = 1) -> HostCapacity:
    """What one host of an instance type offers; the hosts of a local type all share this machine."""
    if spec.name in ("local", "local_process"):
        return HostCapacity.this_machine(spec.vcpus, instance_count)
    return HostCapacity.instance(spec.name, spec.vcpus, spec.gpus)


def plan_distribution(
    distribution: Mapping[str, Any] | DistributionConfig | None, *, spec: InstanceSpec, instance_count: int
) -> DistributionPlan:
    """Checks ``distribution`` against the instance type and count, and plans the launch.

    The checks are those of :class:`smddp_compat.distribution_config.DistributionConfig`, shared with local mode and
    the CLIs. ``distribution`` is the SDK's dictionary (SDK v2's ``distribution=``), or a config another entry built
    (an SDK v3 plug-in's), whose field names the errors keep.

    ``distribution`` None or empty: a single process per host.

    Raises:
        ConfigurationError: ``instance_count`` not an integer >= 1; ``distribution`` not a dictionary, an unknown or second strategy, an unknown key, a bad value, a
            process count the instance cannot hold, or a DTensor mesh that does not match the devices.
    """
    check_instance_count(instance_count)
    original = dict(distribution) if isinstance(distribution, Mapping) else {}
    given = distribution if isinstance(distribution, DistributionConfig) else DistributionConfig.from_sdk_dict(
        distribution)
    config = given.resolve(host_capacity(spec, instance_count), instance_count)
    strategy = config.strategy
    return DistributionPlan(config.kind, config.processes_per_host or 1, config.custom_mpi_options,
                            strategy.estimator_distribution(config), original=original,
                            hyperparameters=strategy.estimator_hyperparameters(given), config=config)
