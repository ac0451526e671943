"""The cluster of a job, once: its hosts, their addresses, where each process runs and the variables it needs.

Every launcher of the kit (``smddprun``, local mode's backends, the estimators' in-container drivers, the entry
points) derives a process's distribution environment here, so a job gets the same variables however it starts.
Standard library only (plus the kit's errors and contract names): it ships inside ``sourcedir.tar.gz``. Every
function is pure; what is chosen at run time (free ports, the rendezvous port, the alias folder) is an argument.

- **Host order** is SageMaker's (``resourceconfig.json``'s ``hosts``, i.e. ``SM_HOSTS``), never re-sorted: the
  toolkit's ``mpirun`` numbers ranks in it, so ``algo-10`` comes where SageMaker put it. The first host is the master.
- **Host addresses** come from ``SMDDP_HOST_ADDRESSES`` (JSON host name -> address; local mode gives each host a
  loopback address); absent or empty, every name is its own address. Anything malformed is a
  :class:`ClusterConfigError`.
- **Ranks** are host-major: host 1's processes take global indices ``0..P1-1``, the next host's the following ones.
  The global index is the Horovod rank, the MWMS worker index and the DTensor client id. Local and cross ranks and
  sizes follow Horovod's ``get_host_assignments`` (also for hosts with different slot counts).
- **Ports**: given a base port, a process listens on the base plus the number of processes before it at the same
  address (``base + local index`` with one address per host; hosts sharing an address still get distinct ports).
  Where ports must be free on a shared machine (local mode), the launcher reserves one per process and passes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smddp_compat.contract import SM_CURRENT_HOST, SM_HOSTS
from smddp_compat.errors import ConfigurationError, UsageError

__all__ = [
    "ClusterConfigError", "Cluster", "HostSlots", "Placement", "HOSTS_VARIABLE", "CURRENT_HOST_VARIABLE",
    "HOST_ADDRESSES_VARIABLE", "GLOO_RANK_VARIABLES", "HOROVOD_GLOO_VARIABLES", "EMITTED_VARIABLES",
    "parse_host_addresses", "encode_host_addresses", "assign", "uniform_placements", "endpoints",
    "horovod_gloo_environments", "horovod_mpi_environment", "mwms_tf_config", "mwms_environments",
    "parameter_server_tf_config", "parameter_server_host_environments", "dtensor_environments",
    "task_tf_configs",
]

HOSTS_VARIABLE = SM_HOSTS
CURRENT_HOST_VARIABLE = SM_CURRENT_HOST
HOST_ADDRESSES_VARIABLE = "SMDDP_HOST_ADDRESSES"

#: The variables of a Horovod rank started over Gloo that an MPI-launched rank must not inherit (they would make
#: Horovod wait for a Gloo rendezvous, or report a rank that is not its MPI rank). ``HOROVOD_HOSTNAME`` and
#: ``NCCL_SOCKET_IFNAME`` are not among them: they mean the same under MPI.
GLOO_RANK_VARIABLES = (
    "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "HOROVOD_CONTROLLER",
    "HOROVOD_CPU_OPERATIONS",
    "HOROVOD_GLOO_IFACE",
    "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
)

#: Every variable :func:`horovod_gloo_environments` gives a rank.
HOROVOD_GLOO_VARIABLES = (*GLOO_RANK_VARIABLES, "HOROVOD_HOSTNAME", "NCCL_SOCKET_IFNAME")

_DTENSOR_VARIABLES = (
    "DTENSOR_JOBS",
    "DTENSOR_CLIENT_ID",
    "DTENSOR_JOB_NAME",
    "SMDDP_DTENSOR_MESH",
    "SMDDP_DTENSOR_DEVICES_PER_CLIENT",
    "SMDDP_DTENSOR_DEVICE_TYPE",
    "SMDDP_DTENSOR_NUM_CLIENTS",
    "CUDA_VISIBLE_DEVICES",
)

#: Every variable a planner of this module can put into a process's environment (``CUDA_VISIBLE_DEVICES`` only for
#: several GPU DTensor clients on one host). A launcher that sets these itself must not let a user override them.
EMITTED_VARIABLES = frozenset(
    (*HOROVOD_GLOO_VARIABLES, "TF_CONFIG", *_DTENSOR_VARIABLES, HOST_ADDRESSES_VARIABLE)
)


class ClusterConfigError(ConfigurationError):
    """The cluster description is invalid: what this module reads (``SM_HOSTS``, ``SM_CURRENT_HOST``,
    ``SMDDP_HOST_ADDRESSES``, ports), or a variable a launcher gives a script (``TF_CONFIG``, ``DTENSOR_*``,
    ``SM_NUM_*``) that the entry points check.

    Built from a :class:`ConfigurationError`'s four parts, ``ClusterConfigError(field, value, problem, fix)``, or
    from a whole message, ``ClusterConfigError(message)`` (the entry points' checks compose theirs; the structured
    fields are then None).
    """

    def __init__(self, field_or_message: str, *value_problem_fix: Any) -> None:
        if value_problem_fix:
            super().__init__(field_or_message, *value_problem_fix)
        else:
            super(ConfigurationError, self).__init__(field_or_message)  # SmddpError's: the message as given


# ----------------------------------------------------------------------------------------------- host addresses


def parse_host_addresses(raw: str | None) -> dict[str, str]:
    """Reads ``SMDDP_HOST_ADDRESSES`` into host name -> address (empty when unset: every name is its own address).

    Raises:
        ClusterConfigError: Not a JSON object of strings to strings.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ClusterConfigError(
            HOST_ADDRESSES_VARIABLE, raw, "is not a JSON object of host name to address",
            'give e.g. {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}, or unset it when the host names resolve',
        )
    return value


def encode_host_addresses(addresses: Mapping[str, str]) -> dict[str, str]:
    """``{"SMDDP_HOST_ADDRESSES": json}`` for a map of host name -> address in host order (what
    :func:`parse_host_addresses` reads)."""
    return {HOST_ADDRESSES_VARIABLE: json.dumps(dict(addresses), separators=(",", ":"))}


# -------------------------------------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class Cluster:
    """The hosts of a job, this host, and their addresses.

    Attributes:
        hosts: Host names in SageMaker's order (never re-sorted).
        addresses: Host name -> address, for the hosts that have one other than their name.
    """

    hosts: tuple[str, ...]
    current_host: str
    addresses: Mapping[str, str]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, required: bool = False) -> Cluster:
        """Reads ``SM_HOSTS``, ``SM_CURRENT_HOST`` and ``SMDDP_HOST_ADDRESSES``.

        Args:
            required: When True both SageMaker variables must be set; otherwise the current host defaults to the
                first host (``algo-1`` without ``SM_HOSTS``) and the hosts to the current host alone (a script run
                outside a job).

        Raises:
            ClusterConfigError: A variable is missing (when required) or malformed, or the current host is not one
                of the hosts.
        """
        for name in (HOSTS_VARIABLE, CURRENT_HOST_VARIABLE):
            if required and not environ.get(name):
                raise ClusterConfigError(name, environ.get(name), "is not set",
                                         "run this inside a SageMaker training job (or local mode), which sets it")
        raw = environ.get(HOSTS_VARIABLE)
        hosts: Any = None
        if raw:
            try:
                hosts = json.loads(raw)
            except ValueError:
                raise ClusterConfigError(HOSTS_VARIABLE, raw, "is not valid JSON",
                                         'give a JSON list of host names, e.g. ["algo-1","algo-2"]') from None
        first = hosts[0] if isinstance(hosts, list) and hosts else "algo-1"
        current = environ.get(CURRENT_HOST_VARIABLE) or first
        if hosts is None:
            hosts = [current]
        return cls.from_resource_config({"hosts": hosts, "current_host": current},
                                        parse_host_addresses(environ.get(HOST_ADDRESSES_VARIABLE)))

    @classmethod
    def from_resource_config(cls, config: Mapping[str, Any], addresses: Mapping[str, str] | None = None) -> Cluster:
        """The cluster of ``resourceconfig.json``'s parsed content (``hosts``, ``current_host``) and `addresses`
        (:func:`parse_host_addresses`).

        Raises:
            ClusterConfigError: ``hosts`` is not a non-empty list of distinct names, or ``current_host`` is not in it.
        """
        hosts, current = config.get("hosts"), config.get("current_host")
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
            raise ClusterConfigError(HOSTS_VARIABLE, hosts, "is not a non-empty list of host names",
                                     'give a JSON list of host names, e.g. ["algo-1","algo-2"]')
        if len(set(hosts)) != len(hosts):
            raise ClusterConfigError(HOSTS_VARIABLE, hosts, "names a host more than once", "list each host once")
        if current not in hosts:
            raise ClusterConfigError(CURRENT_HOST_VARIABLE, current, f"is not one of SM_HOSTS={hosts}",
                                     "set both consistently")
        return cls(tuple(hosts), current, dict(addresses or {}))

    @property
    def master(self) -> str:
        return self.hosts[0]

    @property
    def host_index(self) -> int:
        """Position of the current host (0 on the master)."""
        return self.hosts.index(self.current_host)

    def address_of(self, host: str) -> str:
        """The address of ``host``: its ``SMDDP_HOST_ADDRESSES`` entry, else its name."""
        return self.addresses.get(host, host)


# ---------------------------------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class HostSlots:
    """A host and how many processes (slots) it runs: the one host-slots type of every launcher.

    Attributes:
        name: Host name, as processes report it (``HOROVOD_HOSTNAME``).
        slots: Number of processes on the host (>= 1).
        address: Address of the host.
    """

    name: str
    slots: int
    address: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ":, \t"):
            raise UsageError(f"host name {self.name!r} is invalid: give a plain name such as 'algo-1' or 'localhost'.")
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 1:
            raise UsageError(f"host {self.name!r} has {self.slots!r} slots: every host needs at least 1 slot.")


@dataclass(frozen=True)
class Placement:
    """One process of a job, numbered as Horovod numbers it (the one vocabulary of every strategy: a process's
    ``rank`` is also its MultiWorkerMirroredStrategy worker index and its DTensor client id).

    Attributes:
        host_index: Position of the host in the host list.
        local_rank: Its index among its host's processes.
        size: Processes in the job.
        local_size: Processes on its host.
        cross_rank: Its host's position among the hosts that run a process of this local rank.
        cross_size: How many hosts run a process of this local rank.
    """

    host: str
    host_index: int
    local_rank: int
    rank: int
    size: int
    local_size: int
    cross_rank: int
    cross_size: int


def assign(hosts: Sequence[HostSlots]) -> list[Placement]:
    """Host-major placement of each host's slots, with Horovod's local and cross numbering (its
    ``get_host_assignments``): the one assigner of every launcher. One placement per process, in rank order.
    """
    size = sum(h.slots for h in hosts)
    hosts_at_local: dict[int, list[str]] = {}
    for host in hosts:
        for local in range(host.slots):
            hosts_at_local.setdefault(local, []).append(host.name)
    placements = []
    for host_index, host in enumerate(hosts):
        for local in range(host.slots):
            peers = hosts_at_local[local]
            placements.append(Placement(host.name, host_index, local, len(placements), size, host.slots,
                                        peers.index(host.name), len(peers)))
    return placements


def uniform_placements(hosts: Sequence[str], per_host: int) -> list[Placement]:
    """:func:`assign` with ``per_host`` processes on every host."""
    return assign([HostSlots(host, per_host) for host in hosts])


def endpoints(
    placements: Sequence[Placement],
    addresses: Mapping[str, str],
    *,
    ports: Sequence[int] | None = None,
    base_port: int | None = None,
    port_field: str = "port",
) -> list[str]:
    """Every process's ``address:port``, in global order (see the module's port rule).

    Args:
        addresses: Host name -> address (a host missing from it is its own address).
        ports: One port per process (reserved by the launcher); exclusive with ``base_port``.
        base_port: The first port at each address.
        port_field: The setting ``base_port`` came from, for the error message.

    Raises:
        ClusterConfigError: ``ports`` has the wrong length, or a port would exceed 65535.
        TypeError: Neither or both of ``ports`` and ``base_port`` are given (a caller's mistake).
    """
    if (ports is None) == (base_port is None):
        raise TypeError("endpoints() takes exactly one of ports and base_port")
    located = [addresses.get(p.host, p.host) for p in placements]
    if base_port is not None:
        before: dict[str, int] = {}
        offsets = []
        for address in located:
            offsets.append(before.get(address, 0))
            before[address] = offsets[-1] + 1
        if base_port + max(offsets, default=0) > 65535:
            raise ClusterConfigError(port_field, base_port, f"plus {max(offsets)} exceeds port 65535",
                                     "choose a lower port")
        ports = [base_port + offset for offset in offsets]
    elif len(ports) != len(placements):
        raise ClusterConfigError("ports", list(ports), f"holds {len(ports)} ports for {len(placements)} processes",
                                 "give one port per process")
    return [f"{address}:{port}" for address, port in zip(located, ports)]


# -------------------------------------------------------------------------------------------------------- Horovod


def horovod_gloo_environments(
    placements: Sequence[Placement],
    *,
    rendezvous_address: str,
    rendezvous_port: int,
    timeout_seconds: float,
    iface: str,
) -> list[dict[str, str]]:
    """The environment of each Horovod rank started over Gloo (what ``horovodrun --gloo`` gives its ranks).

    The ``smdistributed`` (SMDDP) distribution is this plus the alias folder first on ``PYTHONPATH``.

    Args:
        rendezvous_address: Address of the launcher's rendezvous server (``rendezvous_port`` its port).
        timeout_seconds: How long a rank waits for its peers (``HOROVOD_GLOO_TIMEOUT_SECONDS``).
        iface: The network interface Gloo (and NCCL) use between ranks.
    """
    common = {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous_address,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous_port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(int(timeout_seconds)),
        "NCCL_SOCKET_IFNAME": iface,
    }
    return [
        {
            **common,
            "HOROVOD_HOSTNAME": p.host,
            "HOROVOD_RANK": str(p.rank),
            "HOROVOD_SIZE": str(p.size),
            "HOROVOD_LOCAL_RANK": str(p.local_rank),
            "HOROVOD_LOCAL_SIZE": str(p.local_size),
            "HOROVOD_CROSS_RANK": str(p.cross_rank),
            "HOROVOD_CROSS_SIZE": str(p.cross_size),
        }
        for p in placements
    ]


# Horovod's rank variables and the MPI launchers' own names for them (Open MPI, then Hydra's PMI).
_MPI_IDENTITY_SOURCES = {
    "HOROVOD_RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK"),
    "HOROVOD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    "HOROVOD_LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
    "HOROVOD_LOCAL_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}


def horovod_mpi_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The Horovod variables of a rank that an MPI launcher started, from what MPI gave it.

    Horovod's MPI controller asks MPI, not the rank variables; they are set so that a script reading them (as under
    Gloo) sees the numbers ``hvd.rank()`` returns. ``HOROVOD_CROSS_RANK``/``_SIZE`` are set when every host runs the
    same number of ranks in blocks, as mpirun's slot mapping places them (then the cross rank is the host index);
    otherwise they are left to Horovod. Also sets the MPI controller and CPU operations.
    """
    env = {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"}
    for name, sources in _MPI_IDENTITY_SOURCES.items():
        value = next((environ[s] for s in sources if environ.get(s, "").isdigit()), None)
        if value is not None:
            env[name] = value
    numbers = [int(env.get(name, -1)) for name in _MPI_IDENTITY_SOURCES]
    rank, size, local_rank, local_size = numbers
    if min(numbers) >= 0 and local_size > 0 and size % local_size == 0:
        env["HOROVOD_CROSS_RANK"] = str((rank - local_rank) // local_size)
        env["HOROVOD_CROSS_SIZE"] = str(size // local_size)
    return env


# ------------------------------------------------------------------------------------------------ TensorFlow


def mwms_tf_config(workers: Sequence[str], index: int) -> dict[str, Any]:
    """The ``TF_CONFIG`` of MultiWorkerMirroredStrategy worker ``index`` (its global index; worker 0 is the chief),
    among ``workers`` (every worker's ``address:port``, :func:`endpoints`)."""
    return {"cluster": {"worker": list(workers)}, "environment": "cloud", "task": {"index": index, "type": "worker"}}


def mwms_environments(placements: Sequence[Placement], workers: Sequence[str]) -> list[dict[str, str]]:
    """``TF_CONFIG`` of every MultiWorkerMirroredStrategy worker (``placements``, with their :func:`endpoints`
    ``workers``), in worker order."""
    return [{"TF_CONFIG": json.dumps(mwms_tf_config(workers, p.rank))} for p in placements]


def task_tf_configs(cluster: Mapping[str, Sequence[str]]) -> list[tuple[str, int, dict[str, str]]]:
    """``TF_CONFIG`` of every task of ``cluster`` (TensorFlow's job name -> its tasks' ``address:port``, e.g.
    ``chief``, ``worker``, ``ps``), in the cluster's job order: (job name, task index, the task's variables)."""
    spec = {job: list(tasks) for job, tasks in cluster.items() if tasks}
    return [(job, index, {"TF_CONFIG": json.dumps({"cluster": spec, "environment": "cloud",
                                                    "task": {"type": job, "index": index}})})
            for job, tasks in spec.items() for index in range(len(tasks))]


def parameter_server_tf_config(
    hosts: Sequence[str],
    current_host: str,
    *,
    ps_task: bool = False,
    worker_port: int = 2222,
    ps_port: int = 2223,
    addresses: Mapping[str, str] | None = None,
    ports: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The ``TF_CONFIG`` of the parameter-server distribution, as SageMaker's TensorFlow toolkit builds it.

    The first host is the ``master``, the others are ``worker``s; with several hosts every host also runs a
    parameter server (``ps``), on its own port.

    Args:
        ps_task: Build the config of this host's parameter server instead of its training task.
        worker_port: Port of the master and worker tasks.
        ps_port: Port of the parameter servers.
        addresses: Host name -> address (names are their own address when missing).
        ports: Host name -> (its master or worker task's port, its parameter server's port), for hosts that share
            one machine (local mode); the two ports above otherwise.

    Raises:
        ClusterConfigError: A parameter server is asked for on a one-host cluster, or ``current_host`` is unknown.
    """
    addresses = addresses or {}
    ports = ports or {}
    if current_host not in hosts:
        raise ClusterConfigError(CURRENT_HOST_VARIABLE, current_host, f"is not one of SM_HOSTS={list(hosts)}",
                                 "set both consistently")

    def listening(names: Sequence[str], which: int) -> list[str]:
        return [f"{addresses.get(name, name)}:{ports.get(name, (worker_port, ps_port))[which]}" for name in names]

    cluster: dict[str, list[str]] = {"master": listening(hosts[:1], 0)}
    if len(hosts) > 1:
        cluster["ps"] = listening(hosts, 1)
        cluster["worker"] = listening(hosts[1:], 0)
    if ps_task:
        if len(hosts) < 2:
            raise ClusterConfigError("ps_task", ps_task, "a one-host cluster has no parameter server",
                                     "run parameter servers on two or more hosts")
        task = {"index": list(hosts).index(current_host), "type": "ps"}
    elif current_host == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": list(hosts).index(current_host) - 1, "type": "worker"}
    return {"cluster": cluster, "environment": "cloud", "task": task}


def parameter_server_host_environments(
    hosts: Sequence[str],
    current_host: str,
    *,
    addresses: Mapping[str, str] | None = None,
    ports: Mapping[str, tuple[int, int]] | None = None,
) -> tuple[str, dict[str, str], dict[str, str]]:
    """A host's two processes under the parameter-server distribution, as SageMaker's TensorFlow toolkit starts
    them: its parameter server and its script, each with its ``TF_CONFIG`` (:func:`parameter_server_tf_config`).

    Args:
        addresses: Host name -> address (names are their own address when missing).
        ports: Host name -> (script's port, parameter server's port); the toolkit's 2222 and 2223 when None.

    Returns:
        The script's role (``master`` or ``worker``), the parameter server's variables and the script's.

    Raises:
        ClusterConfigError: One host only, or ``current_host`` is unknown.
    """
    task = parameter_server_tf_config(hosts, current_host, addresses=addresses, ports=ports)
    ps = parameter_server_tf_config(hosts, current_host, ps_task=True, addresses=addresses, ports=ports)
    return task["task"]["type"], {"TF_CONFIG": json.dumps(ps)}, {"TF_CONFIG": json.dumps(task)}


def dtensor_environments(
    placements: Sequence[Placement],
    clients: Sequence[str],
    *,
    job_name: str = "worker",
    mesh: Mapping[str, int] | None = None,
    devices_per_client: int | None = None,
    device_type: str | None = None,
) -> list[dict[str, str]]:
    """The variables of every DTensor client, in client order.

    Args:
        clients: The clients' endpoints (:func:`endpoints`): ``DTENSOR_JOBS``.
        job_name: ``DTENSOR_JOB_NAME``.
        mesh: The global mesh to announce (``SMDDP_DTENSOR_MESH``, compact JSON), if any.
        devices_per_client: Devices each client brings (``SMDDP_DTENSOR_DEVICES_PER_CLIENT``), if known.
        device_type: ``CPU`` or ``GPU`` (``SMDDP_DTENSOR_DEVICE_TYPE``), if known. With ``GPU``, several clients on
            a host, and ``devices_per_client``, each client sees its own GPUs (``CUDA_VISIBLE_DEVICES``).

    Returns:
        One dict per client: ``DTENSOR_JOBS``, ``DTENSOR_CLIENT_ID``, ``DTENSOR_JOB_NAME``,
        ``SMDDP_DTENSOR_NUM_CLIENTS`` and the optional ones given.
    """
    shared = {"DTENSOR_JOBS": ",".join(clients), "DTENSOR_JOB_NAME": job_name,
              "SMDDP_DTENSOR_NUM_CLIENTS": str(len(placements))}
    if mesh is not None:
        shared["SMDDP_DTENSOR_MESH"] = json.dumps(dict(mesh), separators=(",", ":"))
    if devices_per_client is not None:
        shared["SMDDP_DTENSOR_DEVICES_PER_CLIENT"] = str(devices_per_client)
    if device_type is not None:
        shared["SMDDP_DTENSOR_DEVICE_TYPE"] = device_type
    envs = []
    for p in placements:
        env = {**shared, "DTENSOR_CLIENT_ID": str(p.rank)}
        if device_type == "GPU" and devices_per_client and p.local_size > 1:
            first = p.local_rank * devices_per_client
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(first + d) for d in range(devices_per_client))
        envs.append(env)
    return envs


@dataclass(frozen=True)
class HostCapacity:
    """What one host offers a job's processes.

    Attributes:
        name: The host as the messages name it (an instance type, or ``this machine``).
        slots: Processes one host holds at most: its GPUs, else its vCPUs or CPU cores; None when unknown.
        gpus: Its GPUs (0: DTensor clients use virtual CPU devices).
        slot_unit: What a CPU slot is called (``vCPU``, ``CPU core``).
        larger: How to get a larger host, for the fix of a message (None: there is no larger one).
        shared_by: How many hosts share these slots (local hosts all share this machine): a strategy that fills a
            host by default takes its share, ``slots // shared_by``.
    """

    name: str
    slots: int | None
    gpus: int = 0
    slot_unit: str = "vCPU"
    larger: str | None = None
    shared_by: int = 1

    @classmethod
    def instance(cls, name: str, vcpus: int, gpus: int) -> HostCapacity:
        """A SageMaker instance type: one process per GPU, or per vCPU on CPU types, fits."""
        return cls(name, gpus or vcpus, gpus, "vCPU", "a larger instance type")

    @classmethod
    def this_machine(cls, cores: int | None, hosts: int = 1) -> HostCapacity:
        """This machine, which the job's ``hosts`` local hosts share: its CPU cores (None: unknown), no GPU.

        One rule for every local entry (``smddp local``, ``JobSpec``, the estimators' ``local_process``): a host may
        run up to all the cores' worth of processes (more processes than cores in all is warned about when the job
        starts, not refused), and a strategy that fills a host by default takes its share of the cores.
        """
        return cls("this machine (shared by every local host)", cores, 0, "CPU core", shared_by=max(1, hosts))

    @property
    def default_slots(self) -> int:
        """The processes a strategy that fills a host runs by default: its slots (its share of them), at least 1."""
        return max(1, (self.slots or 1) // self.shared_by)

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    def describe_slots(self) -> str:
        """e.g. ``8 GPU(s)`` or ``4 vCPU(s)``."""
        return f"{self.gpus} GPU(s)" if self.is_gpu else f"{self.slots} {self.slot_unit}(s)"
