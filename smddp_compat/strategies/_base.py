"""What every distribution strategy of the kit is: one :class:`Strategy` subclass per strategy, owning its settings,
their defaults and checks, its conversions (the SDK's ``distribution`` dictionary, the ``sagemaker_*``
hyperparameters SageMaker sends), and how its processes start on this machine (:meth:`Strategy.local_launch`).

No TensorFlow or Horovod at import: the strategies ship inside the uploaded code and the images, with the cluster
rules (:mod:`smddp_compat.cluster`) and the launcher they build on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from smddp_compat import cluster
from smddp_compat.cluster import HostCapacity
from smddp_compat.errors import ConfigurationError
from smddp_compat.launcher import reserve_ports

__all__ = ["Strategy", "DistributionConfig", "count_setting", "is_int", "ProcessPlan", "LocalCluster", "LocalLaunch",
           "JobDriver", "ALL_SETTINGS"]

#: Every setting a :class:`~smddp_compat.distribution_config.DistributionConfig` holds besides its kind; each
#: strategy accepts some of them (:attr:`Strategy.settings`).
ALL_SETTINGS = ("processes_per_host", "custom_mpi_options", "mesh", "devices_per_process", "device_type", "port",
                "job_name")


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def count_setting(name: str, value: object) -> None:
    """Refuses a count that is given and not an integer >= 1."""
    if value is not None and (not is_int(value) or value < 1):  # type: ignore[operator]
        raise ConfigurationError(name, value, "must be an integer >= 1", "use a positive integer, e.g. 1")


class DistributionConfig(Protocol):
    """What a strategy reads of a job's distribution: the settings of
    :class:`smddp_compat.distribution_config.DistributionConfig`, which calls the strategies (so they know it by this
    protocol, not by import)."""

    kind: str
    names: Any
    processes_per_host: int | None
    custom_mpi_options: str | None
    mesh: Any
    devices_per_process: int | None
    device_type: str | None
    port: int
    job_name: str

    def given_settings(self) -> dict[str, Any]:
        """The settings given explicitly."""


_Config = TypeVar("_Config", bound=DistributionConfig)


@dataclass(frozen=True)
class ProcessPlan:
    """One process of a job on this machine.

    Attributes:
        host: Its host (``algo-N``).
        host_index: N - 1.
        local_rank: Its index among its host's processes.
        rank: Its global index (Horovod rank, MWMS worker index, DTensor client id).
        env: The strategy's variables for this process (added to the host's environment).
        python_path: Folders to put first on ``PYTHONPATH``.
        role: What the process is, when the strategy's processes differ (``master``, ``worker``, ``ps``); it
            replaces the index in the label, so a failure names it.
        module: For a process that is not the job's script: the Python module it runs (``python -m MODULE``).
        serves: A server beside the scripts (a parameter server), stopped once they have all ended
            (:attr:`smddp_compat.launcher.ProcessSpec.serves`).
    """

    host: str
    host_index: int
    local_rank: int
    rank: int
    env: Mapping[str, str] = field(default_factory=dict)
    python_path: tuple[str, ...] = ()
    role: str = ""
    module: str | None = None
    serves: bool = False

    @property
    def label(self) -> str:
        """The output prefix: ``algo-N,rank`` (``algo-N,role`` for a process with a role)."""
        return f"{self.host},{self.role or self.rank}"

    @classmethod
    def at(cls, placement: cluster.Placement, env: Mapping[str, str] | None = None, **extra: Any) -> ProcessPlan:
        """The plan of a placed process."""
        return cls(placement.host, placement.host_index, placement.local_rank, placement.rank, dict(env or {}),
                   **extra)


@dataclass(frozen=True)
class LocalCluster:
    """The simulated hosts of a job on this machine.

    Attributes:
        hosts: ``algo-1`` .. ``algo-H``.
        processes_per_host: P.
        addresses: Host name -> its own loopback address.
        config: The job's resolved distribution.
        ports: The ports the job's servers use, in the order the strategy asks for them (None: free ports are
            reserved when the job starts).
    """

    hosts: tuple[str, ...]
    processes_per_host: int
    addresses: Mapping[str, str]
    config: DistributionConfig
    ports: tuple[int, ...] | None = None

    def free_ports(self, addresses: Sequence[str]) -> list[int]:
        """One port per address: :attr:`ports` when given, else free ones reserved now."""
        if self.ports is not None:
            if len(self.ports) != len(addresses):
                raise ValueError(f"{len(addresses)} ports are needed, {len(self.ports)} were given")
            return list(self.ports)
        return reserve_ports(addresses)


@dataclass(frozen=True)
class LocalLaunch:
    """How a job's processes start on this machine.

    Attributes:
        plans: Every process.
        note: One line on how they coordinate (e.g. the Horovod engine and why), or None.
        mpi: Run them as one ``mpirun`` group (one host's Horovod ranks over MPI) instead of one process each.
        own_network: Run them in a network of the job's own (:func:`smddp_compat.launcher.run_process_group`):
            what they serve is reachable from the job only (:attr:`Strategy.serves_every_interface`).
    """

    plans: list[ProcessPlan]
    note: str | None = None
    mpi: bool = False
    own_network: bool = False


@dataclass(frozen=True)
class JobDriver:
    """A driver that travels with a job's code and runs in the container in place of the user's script (for a
    strategy SageMaker's toolkit does not launch).

    Attributes:
        script: Its file under ``estimators/job_drivers/``.
        name: Its name in the uploaded code (what SageMaker runs as the entry point).
        config_name: The JSON file beside it that holds the user's entry point and :attr:`settings`.
        settings: The strategy's set-up, as the driver reads it.
    """

    script: str
    name: str
    config_name: str
    settings: Mapping[str, Any]


class Strategy:
    """One distribution strategy: subclass it, set the class attributes, override what differs.

    Attributes:
        name: The strategy as ``JobSpec``, ``smddp local`` and ``smddp submit`` spell it.
        sdk_key: Its key in the SDK's ``distribution`` dictionary (None: it has none).
        title: What users call it, for messages.
        settings: The :data:`ALL_SETTINGS` it accepts (besides ``processes_per_host``, which all accept).
        sdk_keys: The keys its dictionary accepts in the SDK's form.
        one_process_per_host: It always runs exactly one process per host.
        ships_compat: The uploaded code must carry ``smddp_compat`` (and the ``smdistributed`` alias).
        distribution_set_after_sdk_checks: The kit's estimator gives the SDK the strategy's dictionary only after
            the SDK's constructor (which refuses it on today's TensorFlow, though its launch works).
        serves_every_interface: Its processes start servers that listen on every interface whatever they are asked
            (TensorFlow's gRPC servers): on this machine they run in a network of the job's own
            (:attr:`LocalLaunch.own_network`), so no other machine reaches them.
        ranks_see_the_leaders_environment: SageMaker's toolkit starts every host's ranks from the leader (mpirun
            exports the leader's ``SM_*`` variables to each): a rank on ``algo-2`` sees ``SM_CURRENT_HOST=algo-1``
            (its paths, ``/opt/ml/...``, name its own container's tree). The process backend gives them the same.
    """

    name: ClassVar[str]
    sdk_key: ClassVar[str | None] = None
    title: ClassVar[str] = ""
    settings: ClassVar[frozenset[str]] = frozenset()
    sdk_keys: ClassVar[frozenset[str]] = frozenset({"enabled"})
    one_process_per_host: ClassVar[bool] = False
    ships_compat: ClassVar[bool] = False
    distribution_set_after_sdk_checks: ClassVar[bool] = False
    serves_every_interface: ClassVar[bool] = False
    ranks_see_the_leaders_environment: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"

    # -- settings ----------------------------------------------------------------------------------------------

    def check(self, config: DistributionConfig) -> dict[str, Any]:
        """Checks the strategy's own settings (the shared ones are checked by the config); returns those to store
        normalised (e.g. a mesh given as text), by name."""
        names = config.names
        if self.one_process_per_host and config.processes_per_host not in (None, 1):
            raise ConfigurationError(
                names.processes_per_host, config.processes_per_host,
                f"distribution {self.name!r} runs exactly one process per host",
                "use processes_per_host=1, or a distribution that runs several (smddp, mpi, mwms, dtensor)",
            )
        return {}

    def default_processes_per_host(self, capacity: HostCapacity) -> int:
        """Processes per host when the job does not say."""
        return 1

    def resolve(self, config: _Config, capacity: HostCapacity, hosts: int) -> _Config:
        """Fills in the strategy's own defaults once ``processes_per_host`` is known (checked against the host)."""
        return config

    # -- the SDK's form ----------------------------------------------------------------------------------------

    def settings_from_sdk(self, value: object, path: str) -> tuple[Mapping[str, Any], str]:
        """The settings dictionary under the strategy's key, and how it is named in errors."""
        return value, path  # type: ignore[return-value]

    def to_sdk_dict(self, config: DistributionConfig) -> dict[str, Any] | None:
        """The SDK-style ``distribution`` dictionary that reads back as ``config`` (None: no distribution)."""
        return {str(self.sdk_key): self.sdk_settings(config)}

    def sdk_settings(self, config: DistributionConfig) -> dict[str, Any]:
        """The settings under the strategy's key: ``enabled`` and every setting given."""
        settings: dict[str, Any] = {"enabled": True}
        if config.processes_per_host is not None and not self.one_process_per_host:
            settings["processes_per_host"] = config.processes_per_host
        for name, value in config.given_settings().items():
            settings[name] = dict(value) if name == "mesh" else value
        return settings

    def estimator_distribution(self, config: DistributionConfig) -> dict[str, Any] | None:
        """The dictionary the SDK's own estimator is given for a resolved config (what SageMaker's SDK sends)."""
        return {str(self.sdk_key): {"enabled": True}}

    def estimator_hyperparameters(self, given: DistributionConfig) -> dict[str, str]:
        """Hyperparameters the kit's estimator adds to the SDK's for the config as the user gave it."""
        return {}

    def framework_parameters(self, config: DistributionConfig, instance_type: str) -> dict[str, Any]:
        """The ``sagemaker_*`` hyperparameters SageMaker's SDK sends for the strategy (decoded values)."""
        return {}

    def job_driver(self, config: DistributionConfig) -> JobDriver | None:
        """The driver the estimator ships to run the strategy in the container (None: the toolkit runs it)."""
        return None

    # -- this machine ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def local_launch(self, job: LocalCluster) -> Iterator[LocalLaunch]:
        """The processes of a job on this machine (held open while they run: a rendezvous server, ports)."""
        yield LocalLaunch(self.local_plans(job), own_network=self.serves_every_interface)

    def local_plans(self, job: LocalCluster) -> list[ProcessPlan]:
        """One process per placement, with no variables of the strategy's own."""
        return [ProcessPlan.at(p) for p in cluster.uniform_placements(job.hosts, job.processes_per_host)]

