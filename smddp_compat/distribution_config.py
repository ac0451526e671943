"""One model of a job's distribution: the strategy, the processes per host, and the DTensor set-up.

Every entry that takes distribution settings builds the same :class:`DistributionConfig`:

- ``smddp_compat.local_mode.JobSpec``, ``smddp local`` and ``smddp submit`` give the flat form (a kind such as ``dtensor``, a mesh,
  devices per process, processes per host): :meth:`DistributionConfig.from_flat`;
- ``smddp_compat.estimators.TensorFlow(distribution=...)`` and the SDK v3 plug-ins give the SDK's dictionary
  (``{"dtensor": {"enabled": True, "mesh": {...}}}``): :meth:`DistributionConfig.from_sdk_dict`.

Building a config checks every value on its own (types, names, the settings a kind accepts);
:meth:`DistributionConfig.resolve` then checks it against the cluster (the :class:`HostCapacity` of one host and the
number of hosts) and fills in the defaults. So a setting is accepted or refused with the same problem and fix at
every entry; only the field names in the messages follow the entry's own spelling (:class:`FieldNames`).

Standard library only: this module ships inside the uploaded code and the images.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from smddp_compat.errors import ConfigurationError

__all__ = [
    "KINDS",
    "FLAT_KINDS",
    "DEFAULT_DTENSOR_PORT",
    "DEFAULT_DTENSOR_JOB_NAME",
    "Mesh",
    "FieldNames",
    "HostCapacity",
    "DistributionConfig",
    "parse_mesh",
]

#: Each kind as the CLIs and ``JobSpec`` spell it -> its key in the SDK's ``distribution`` dictionary.
KINDS: dict[str, str | None] = {
    "none": None,
    "smddp": "smdistributed",
    "mpi": "mpi",
    "mwms": "multi_worker_mirrored_strategy",
    "parameter_server": "parameter_server",
    "dtensor": "dtensor",
}
#: The kinds the flat form (``JobSpec`` and both CLIs) accepts; ``parameter_server`` exists only in the SDK's form.
FLAT_KINDS = ("none", "smddp", "mpi", "mwms", "dtensor")
DEFAULT_DTENSOR_PORT = 9970
DEFAULT_DTENSOR_JOB_NAME = "worker"
DEVICE_TYPES = ("GPU", "CPU")
_MAX_PORT = 65535
_KEY_TO_KIND = {key: kind for kind, key in KINDS.items() if key}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MPI_KINDS = ("smddp", "mpi", "parameter_server")
_DTENSOR_SETTINGS = ("mesh", "devices_per_process", "device_type", "port", "job_name")

#: The keys each strategy's dictionary accepts (``smdistributed`` holds ``dataparallel``, which holds these).
SDK_KEYS: dict[str, frozenset[str]] = {
    "smdistributed": frozenset({"enabled", "custom_mpi_options", "processes_per_host"}),
    "mpi": frozenset({"enabled", "custom_mpi_options", "processes_per_host"}),
    "multi_worker_mirrored_strategy": frozenset({"enabled"}),
    "parameter_server": frozenset({"enabled", "custom_mpi_options"}),
    "dtensor": frozenset({"enabled", "processes_per_host", *_DTENSOR_SETTINGS}),
}

Mesh = tuple[tuple[str, int], ...]
"""A DTensor mesh: its dimensions in order, e.g. ``(("batch", 4), ("model", 2))``."""


@dataclass(frozen=True)
class FieldNames:
    """How an entry spells each setting in its error messages (``JobSpec``'s names by default).

    Attributes:
        kind: The strategy (``distribution``, ``--distribution``).
        instance_count: The number of hosts.
        processes_per_host: Processes per host.
        custom_mpi_options: mpirun options.
        mesh: The DTensor mesh (``dtensor_mesh``, ``--mesh``, ``distribution['dtensor']['mesh']``).
        devices_per_process: Devices per DTensor client.
        device_type: ``GPU`` or ``CPU``.
        port: The DTensor clients' first port.
        job_name: DTENSOR_JOB_NAME.
    """

    kind: str = "distribution"
    instance_count: str = "instance_count"
    processes_per_host: str = "processes_per_host"
    custom_mpi_options: str = "custom_mpi_options"
    mesh: str = "dtensor_mesh"
    devices_per_process: str = "devices_per_process"
    device_type: str = "device_type"
    port: str = "port"
    job_name: str = "job_name"

    @classmethod
    def under(cls, prefix: str, *, kind: str = "distribution") -> FieldNames:
        """Names of the settings inside one dictionary, e.g. ``under("distribution['dtensor']")``.

        Args:
            prefix: How the dictionary itself is named.
            kind: How the strategy is named.

        Returns:
            ``<prefix>['<setting>']`` for every setting.
        """
        settings = ("processes_per_host", "custom_mpi_options", *_DTENSOR_SETTINGS)
        return cls(kind=kind, **{name: f"{prefix}[{name!r}]" for name in settings})


@dataclass(frozen=True)
class HostCapacity:
    """What one host offers a job's processes.

    Attributes:
        name: The host as the messages name it (an instance type, or ``this machine``).
        slots: Processes one host holds at most: its GPUs, else its vCPUs or CPU cores; None when unknown.
        gpus: Its GPUs (0: DTensor clients use virtual CPU devices).
        slot_unit: What a CPU slot is called (``vCPU``, ``CPU core``).
        larger: How to get a larger host, for the fix of a message (None: there is no larger one).
    """

    name: str
    slots: int | None
    gpus: int = 0
    slot_unit: str = "vCPU"
    larger: str | None = None

    @classmethod
    def instance(cls, name: str, vcpus: int, gpus: int) -> HostCapacity:
        """A SageMaker instance type: one process per GPU, or per vCPU on CPU types, fits."""
        return cls(name, gpus or vcpus, gpus, "vCPU", "a larger instance type")

    @classmethod
    def this_machine(cls, cores: int | None) -> HostCapacity:
        """This machine, which every local host shares: its CPU cores (None: unknown), no GPU."""
        return cls("this machine (shared by every local host)", cores, 0, "CPU core")

    @property
    def is_gpu(self) -> bool:
        """True when the host has GPUs."""
        return self.gpus > 0

    def describe_slots(self) -> str:
        """e.g. ``8 GPU(s)`` or ``4 vCPU(s)``."""
        return f"{self.gpus} GPU(s)" if self.is_gpu else f"{self.slots} {self.slot_unit}(s)"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mesh_items(value: object, name: str) -> list[tuple[object, object]]:
    if isinstance(value, str):
        items: list[tuple[object, object]] = []
        for item in (part.strip() for part in value.split(",")):
            dim, sep, size = item.partition("=")
            if not sep:
                raise ConfigurationError(name, value, f"{item!r} is not DIMENSION=SIZE", "write it as batch=4,model=2")
            try:
                items.append((dim.strip(), int(size)))
            except ValueError:
                raise ConfigurationError(
                    name, value, f"size {size!r} of dimension {dim.strip()!r} is not an integer",
                    "every size must be an integer >= 1",
                ) from None
        return items
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple)) and all(isinstance(i, (list, tuple)) and len(i) == 2 for i in value):
        return [(i[0], i[1]) for i in value]
    raise ConfigurationError(
        name, value, "expected a mapping of dimension name to size",
        "write it as {'batch': 4, 'model': 2} (or [['batch', 4], ['model', 2]], or batch=4,model=2 on a command line)",
    )


def parse_mesh(value: object, name: str = "dtensor_mesh") -> Mesh | None:
    """A DTensor mesh from a mapping, a list of (name, size) pairs, or ``batch=4,model=2`` text.

    Args:
        value: The mesh as given (None: no mesh; the script builds its own).
        name: The field named in the error.

    Returns:
        The dimensions in order, or None.

    Raises:
        ConfigurationError: Not a mesh, no dimension, a name that is not an ASCII identifier or is repeated, or a
            size that is not an integer >= 1.
    """
    if value is None:
        return None
    items = _mesh_items(value, name)
    if not items:
        raise ConfigurationError(name, value, "the mesh has no dimension", "give at least one, e.g. {'batch': 4}")
    seen: set[str] = set()
    mesh = []
    for dim, size in items:
        if not isinstance(dim, str) or not _IDENTIFIER.match(dim):
            raise ConfigurationError(
                name, value, f"dimension name {dim!r} is not an ASCII identifier",
                "use ASCII letters, digits and '_', not starting with a digit, e.g. 'batch' or 'model'",
            )
        if dim in seen:
            raise ConfigurationError(
                name, value, f"dimension name {dim!r} is given twice", "give each dimension once, with one size"
            )
        if not _is_int(size) or size < 1:
            raise ConfigurationError(
                name, value, f"dimension {dim!r} has size {size!r}", "every size must be an integer >= 1"
            )
        seen.add(dim)
        mesh.append((dim, int(size)))
    return tuple(mesh)


def _count(name: str, value: object) -> None:
    if value is not None and (not _is_int(value) or value < 1):  # type: ignore[operator]
        raise ConfigurationError(name, value, "must be an integer >= 1", "use a positive integer, e.g. 1")


@dataclass(frozen=True)
class DistributionConfig:
    """A job's distribution, checked value by value when it is built.

    Settings left None take the kind's default in :meth:`resolve`.

    Attributes:
        kind: ``none``, ``smddp``, ``mpi``, ``mwms``, ``parameter_server`` or ``dtensor``.
        processes_per_host: Processes each host runs (None: the kind's default).
        custom_mpi_options: mpirun options (``smddp``, ``mpi``, ``parameter_server``), kept literally.
        mesh: ``dtensor``: the global mesh, or None (the script builds its own). Given as anything
            :func:`parse_mesh` reads; stored as a :data:`Mesh`.
        devices_per_process: ``dtensor``: GPUs or virtual CPUs each client drives (None: derived).
        device_type: ``dtensor``: ``GPU`` or ``CPU`` (None: GPU on GPU hosts).
        port: ``dtensor``: first port of the clients on every host (client ``i`` of a host listens on ``port + i``).
        job_name: ``dtensor``: DTENSOR_JOB_NAME.
        names: How the entry spells each setting in errors.
    """

    kind: str = "none"
    processes_per_host: int | None = None
    custom_mpi_options: str = ""
    mesh: Mesh | None = None
    devices_per_process: int | None = None
    device_type: str | None = None
    port: int = DEFAULT_DTENSOR_PORT
    job_name: str = DEFAULT_DTENSOR_JOB_NAME
    names: FieldNames = field(default=FieldNames(), compare=False, repr=False)

    def __post_init__(self) -> None:
        """Checks every value on its own (the cluster is checked by :meth:`resolve`) and normalises the mesh."""
        names = self.names
        if self.kind not in KINDS:
            raise ConfigurationError(names.kind, self.kind, "unknown distribution", f"use one of: {', '.join(KINDS)}")
        _count(names.processes_per_host, self.processes_per_host)
        if self.kind == "none" and self.processes_per_host not in (None, 1):
            raise ConfigurationError(
                names.processes_per_host, self.processes_per_host,
                "distribution 'none' runs exactly one process per host",
                "use processes_per_host=1, or a distribution (smddp, mpi, mwms, dtensor) to run several",
            )
        if self.custom_mpi_options is None:  # the SDK's dictionaries may hold None for "no options"
            object.__setattr__(self, "custom_mpi_options", "")
        if not isinstance(self.custom_mpi_options, str):
            raise ConfigurationError(
                names.custom_mpi_options, self.custom_mpi_options, "must be a string",
                "give the options as one string, e.g. '-x NCCL_DEBUG=INFO'",
            )
        if self.custom_mpi_options and self.kind not in _MPI_KINDS:
            raise ConfigurationError(
                names.custom_mpi_options, self.custom_mpi_options,
                f"is only used with distribution smddp, mpi or parameter_server, not {self.kind!r}",
                "drop the option, or use one of those distributions",
            )
        if self.kind != "dtensor":
            given = self._given_dtensor_settings()
            if given:
                setting, value = next(iter(given.items()))
                raise ConfigurationError(
                    getattr(names, setting), value, f"is only used with distribution 'dtensor', not {self.kind!r}",
                    "drop the option, or use distribution 'dtensor'",
                )
            return
        object.__setattr__(self, "mesh", parse_mesh(self.mesh, names.mesh))
        _count(names.devices_per_process, self.devices_per_process)
        if self.device_type is not None and self.device_type not in DEVICE_TYPES:
            raise ConfigurationError(names.device_type, self.device_type, "must be 'GPU' or 'CPU'", "pick one of the two")
        if not _is_int(self.port) or not 1024 <= self.port <= _MAX_PORT:
            raise ConfigurationError(
                names.port, self.port, f"must be an integer in 1024..{_MAX_PORT}",
                f"use the default {DEFAULT_DTENSOR_PORT} or a free port",
            )
        if not isinstance(self.job_name, str) or not _IDENTIFIER.match(self.job_name):
            raise ConfigurationError(
                names.job_name, self.job_name, "must be a plain ASCII identifier",
                f"use the default {DEFAULT_DTENSOR_JOB_NAME!r}",
            )

    def _given_dtensor_settings(self) -> dict[str, Any]:
        """The DTensor settings that differ from their defaults."""
        defaults = {f.name: f.default for f in fields(self)}
        return {name: getattr(self, name) for name in _DTENSOR_SETTINGS if getattr(self, name) != defaults[name]}

    # Parsers ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_flat(
        cls,
        kind: object,
        *,
        processes_per_host: int | None = None,
        mesh: object = None,
        devices_per_process: int | None = None,
        custom_mpi_options: str | None = None,
        names: FieldNames = FieldNames(),
    ) -> DistributionConfig:
        """The flat form of ``JobSpec`` and the CLIs: a kind (any case) and its settings.

        Args:
            kind: One of :data:`FLAT_KINDS`.
            processes_per_host: Processes per host (None: the kind's default).
            mesh: ``dtensor``: a mapping, (name, size) pairs, or ``batch=4,model=2``.
            devices_per_process: ``dtensor``: devices per client.
            custom_mpi_options: ``smddp``/``mpi``: mpirun options.
            names: How the entry spells the settings.

        Returns:
            The config (not yet resolved against a cluster).

        Raises:
            ConfigurationError: An unknown kind, a bad value, or a setting the kind does not use.
        """
        spelled = kind.strip().lower() if isinstance(kind, str) else kind
        if spelled not in FLAT_KINDS:
            raise ConfigurationError(names.kind, kind, "unknown distribution", f"use one of: {', '.join(FLAT_KINDS)}")
        return cls(
            str(spelled), processes_per_host, custom_mpi_options or "", mesh,  # type: ignore[arg-type]
            devices_per_process, names=names,
        )

    @classmethod
    def from_sdk_dict(cls, distribution: object, *, name: str = "distribution") -> DistributionConfig:
        """The SDK's ``distribution`` dictionary (one strategy, as ``sagemaker.tensorflow.TensorFlow`` takes it).

        Args:
            distribution: e.g. ``{"mpi": {"enabled": True, "processes_per_host": 2}}``; None or empty: ``none``.
            name: How the entry names the dictionary.

        Returns:
            The config (kind ``none`` when the strategy is not enabled), with the names spelled under ``name``.

        Raises:
            ConfigurationError: Not a dictionary, an unknown or second strategy, instance groups, an unknown key, or
                a bad value.
        """
        if not distribution:
            return cls()
        if not isinstance(distribution, Mapping):
            raise ConfigurationError(
                name, distribution, "expected a dictionary",
                "pass e.g. {'smdistributed': {'dataparallel': {'enabled': True}}}",
            )
        strategies = [key for key in distribution if key != "instance_groups"]
        unknown = [key for key in strategies if key not in _KEY_TO_KIND]
        if unknown:
            raise ConfigurationError(
                name, dict(distribution), f"unknown strategy {unknown[0]!r}",
                f"use one of {sorted(_KEY_TO_KIND)} (e.g. {{'smdistributed': {{'dataparallel': {{'enabled': True}}}}}})",
            )
        if "instance_groups" in distribution:
            raise ConfigurationError(
                f"{name}['instance_groups']", distribution["instance_groups"],
                "heterogeneous clusters are not supported by smddp-compat's estimators",
                "use instance_type and instance_count (one instance group)",
            )
        if len(strategies) > 1:
            raise ConfigurationError(
                name, dict(distribution), f"more than one strategy given ({strategies})", "keep exactly one strategy"
            )
        key = strategies[0]
        path = f"{name}[{key!r}]"
        config = distribution[key]
        if key == "smdistributed":
            if not isinstance(config, Mapping):
                raise ConfigurationError(
                    path, config, "expected a dictionary", "write {'smdistributed': {'dataparallel': {'enabled': True}}}"
                )
            others = sorted(set(config) - {"dataparallel"})
            if others:
                fix = "use {'dataparallel': {'enabled': True}}"
                if "modelparallel" in others:
                    fix = "SageMaker model parallelism (SMP) is not provided; use distribution={'dtensor': {...}} instead"
                raise ConfigurationError(path, dict(config), f"unsupported {others}", fix)
            path = f"{path}['dataparallel']"
            config = config.get("dataparallel", {})
        if not isinstance(config, Mapping):
            raise ConfigurationError(
                path, config, "expected a dictionary", f"write it as {{'enabled': True, ...}} under {path}"
            )
        enabled = config.get("enabled", False)
        if not isinstance(enabled, bool):
            raise ConfigurationError(
                f"{path}['enabled']", enabled, "must be True or False", "use a bool, e.g. 'enabled': True"
            )
        if not enabled:
            return cls()
        unknown_keys = sorted(set(config) - SDK_KEYS[key])
        if unknown_keys:
            raise ConfigurationError(
                path, dict(config), f"unknown key(s) {unknown_keys}", f"use only {sorted(SDK_KEYS[key])}"
            )
        settings = {k: v for k, v in config.items() if k != "enabled"}
        return cls(_KEY_TO_KIND[key], names=FieldNames.under(path, kind=name), **settings)

    def to_sdk_dict(self) -> dict[str, Any] | None:
        """The SDK-style dictionary that :meth:`from_sdk_dict` reads back as this config (None for ``none``).

        Raises:
            ConfigurationError: ``mwms`` with more than one process per host (the SDK's strategy runs one).
        """
        if self.kind == "none":
            return None
        if self.kind == "mwms" and self.processes_per_host not in (None, 1):
            raise ConfigurationError(
                self.names.processes_per_host, self.processes_per_host,
                "SageMaker's multi_worker_mirrored_strategy runs one process per host",
                "drop the option, or use distribution 'mpi' or 'smddp' to run several",
            )
        config: dict[str, Any] = {"enabled": True}
        if self.processes_per_host is not None and self.kind != "mwms":
            config["processes_per_host"] = self.processes_per_host
        if self.custom_mpi_options:
            config["custom_mpi_options"] = self.custom_mpi_options
        for setting, value in self._given_dtensor_settings().items():
            config[setting] = dict(value) if setting == "mesh" else value
        if self.kind == "smddp":
            return {"smdistributed": {"dataparallel": config}}
        return {str(KINDS[self.kind]): config}

    # The validator ----------------------------------------------------------------------------------------------

    def resolve(self, capacity: HostCapacity, instance_count: int) -> DistributionConfig:
        """Checks the config against a cluster and fills in every default.

        Defaults: ``processes_per_host`` is the host's slots for ``smddp`` (one per GPU, else per vCPU), its GPUs
        (else 1) for ``mpi``, and 1 otherwise. For ``dtensor`` the device type is GPU on GPU hosts; the GPUs of a
        host are split evenly over its clients; on CPU the clients take mesh size / clients virtual devices when a
        mesh is given (virtual CPU devices cost nothing), and the mesh size must then be a multiple of the clients.
        Once ``devices_per_process`` is known (given, or on GPU) the mesh size must equal clients x devices.

        Args:
            capacity: What one host offers.
            instance_count: The number of hosts (>= 1).

        Returns:
            A config with ``processes_per_host`` set and, for ``dtensor``, ``device_type`` and (when known)
            ``devices_per_process`` set.

        Raises:
            ConfigurationError: More processes per host than fit, GPUs on a host without them, clients that cannot
                share the GPUs, a port range past 65535, or a mesh that does not match the clients' devices.
        """
        names = self.names
        if self.kind == "smddp":
            default = capacity.slots or 1
        elif self.kind == "mpi":
            default = capacity.gpus or 1
        else:
            default = 1
        per_host = default if self.processes_per_host is None else self.processes_per_host
        if capacity.slots is not None and per_host > capacity.slots:
            raise ConfigurationError(
                names.processes_per_host, per_host,
                f"{capacity.name} has only {capacity.describe_slots()}, so at most {capacity.slots} processes per "
                "host fit",
                f"use processes_per_host <= {capacity.slots}" + (f", or {capacity.larger}" if capacity.larger else ""),
            )
        resolved = replace(self, processes_per_host=per_host)
        if self.kind != "dtensor":
            return resolved
        return resolved._resolve_dtensor(capacity, instance_count)

    def _resolve_dtensor(self, capacity: HostCapacity, hosts: int) -> DistributionConfig:
        names = self.names
        per_host = self.processes_per_host or 1
        device_type = self.device_type or ("GPU" if capacity.is_gpu else "CPU")
        if device_type == "GPU" and not capacity.is_gpu:
            raise ConfigurationError(
                names.device_type, device_type, f"{capacity.name} has no GPU",
                "use device_type='CPU', or a GPU instance type such as 'ml.p4d.24xlarge'",
            )
        devices = self.devices_per_process
        if device_type == "GPU":
            if capacity.gpus % per_host:
                raise ConfigurationError(
                    names.processes_per_host, per_host,
                    f"{capacity.name} has {capacity.gpus} GPU(s), which {per_host} clients cannot share evenly",
                    f"use a divisor of {capacity.gpus}",
                )
            if devices is None:
                devices = capacity.gpus // per_host
            elif devices * per_host != capacity.gpus:
                raise ConfigurationError(
                    names.devices_per_process, devices,
                    f"{per_host} client(s) x {devices} GPU(s) does not use the {capacity.gpus} GPU(s) of "
                    f"{capacity.name}",
                    f"leave it out (default {capacity.gpus // per_host}) or make processes_per_host x "
                    f"devices_per_process = {capacity.gpus}",
                )
        if self.port > _MAX_PORT - per_host + 1:
            raise ConfigurationError(
                names.port, self.port, f"the {per_host} client(s) of a host need ports up to {self.port + per_host - 1}",
                f"use a port <= {_MAX_PORT - per_host + 1}, e.g. the default {DEFAULT_DTENSOR_PORT}",
            )
        if self.mesh is not None:
            clients = hosts * per_host
            size = math.prod(s for _, s in self.mesh)
            shape = " x ".join(f"{n}={s}" for n, s in self.mesh)
            if devices is None:
                if size % clients:
                    raise ConfigurationError(
                        names.mesh, dict(self.mesh),
                        f"the mesh ({shape}) has {size} devices, which cannot be split evenly over {clients} clients "
                        f"({hosts} host(s) x {per_host} process(es))",
                        f"make the product of the mesh sizes a multiple of {clients}, or change instance_count / "
                        "processes_per_host",
                    )
                devices = size // clients
            elif size != clients * devices:
                raise ConfigurationError(
                    names.mesh, dict(self.mesh),
                    f"the mesh ({shape}) has {size} devices but the job has {clients * devices} "
                    f"({hosts} host(s) x {per_host} process(es) x {devices} {device_type}(s))",
                    f"make the product of the mesh sizes {clients * devices}, or change instance_count / "
                    "processes_per_host / devices_per_process",
                )
        return replace(self, device_type=device_type, devices_per_process=devices)
