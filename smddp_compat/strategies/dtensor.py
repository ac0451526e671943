"""Distribution ``dtensor``: every process is a multi-client DTensor client (``DTENSOR_JOBS``, ``DTENSOR_CLIENT_ID``,
``DTENSOR_JOB_NAME``), launched by the kit's own driver (SageMaker has no switch for it)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from smddp_compat import cluster
from smddp_compat.errors import ConfigurationError
from smddp_compat.strategies._base import JobDriver, LocalCluster, ProcessPlan, Strategy, count_setting, is_int
from smddp_compat.strategies._ports import local_endpoints

__all__ = ["DTensor", "Mesh", "parse_mesh", "DEFAULT_PORT", "DEFAULT_JOB_NAME", "DEVICE_TYPES", "LAUNCHER_SCRIPT",
           "LAUNCHER_NAME", "LAUNCHER_CONFIG"]

DEFAULT_PORT = 9970
DEFAULT_JOB_NAME = "worker"
DEVICE_TYPES = ("GPU", "CPU")
#: The driver that travels with a job (``estimators/job_drivers/``), its name there, and the set-up it reads beside
#: itself.
LAUNCHER_SCRIPT = "dtensor_launch.py"
LAUNCHER_NAME = "smddp_compat_dtensor_launch.py"
LAUNCHER_CONFIG = "smddp_compat_dtensor.json"
_MAX_PORT = 65535
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


Mesh = tuple[tuple[str, int], ...]
"""A DTensor mesh: its dimensions in order, e.g. ``(("batch", 4), ("model", 2))``."""


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

    Returns the dimensions in order, or None for None (no mesh: the script builds its own); errors name ``name``.

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
        if not is_int(size) or size < 1:
            raise ConfigurationError(
                name, value, f"dimension {dim!r} has size {size!r}", "every size must be an integer >= 1"
            )
        seen.add(dim)
        mesh.append((dim, int(size)))
    return tuple(mesh)


class DTensor(Strategy):
    """``{"dtensor": {"enabled": True, "mesh": {...}, "processes_per_host": P, "devices_per_process": N,
    "device_type": "GPU"|"CPU", "port": 9970, "job_name": "worker"}}``: one DTensor client per process."""

    name = "dtensor"
    sdk_key = "dtensor"
    title = "multi-client DTensor"
    serves_every_interface = True
    settings = frozenset({"mesh", "devices_per_process", "device_type", "port", "job_name"})
    sdk_keys = frozenset({"enabled", "processes_per_host", *settings})
    ships_compat = True

    def check(self, config: Any) -> dict[str, Any]:
        """The mesh (stored parsed), devices, device type, port and job name, each on its own."""
        names = config.names
        mesh = parse_mesh(config.mesh, names.mesh)
        count_setting(names.devices_per_process, config.devices_per_process)
        if config.device_type is not None and config.device_type not in DEVICE_TYPES:
            raise ConfigurationError(names.device_type, config.device_type, "must be 'GPU' or 'CPU'",
                                     "pick one of the two")
        if not is_int(config.port) or not 1024 <= config.port <= _MAX_PORT:
            raise ConfigurationError(
                names.port, config.port, f"must be an integer in 1024..{_MAX_PORT}",
                f"use the default {DEFAULT_PORT} or a free port",
            )
        if not isinstance(config.job_name, str) or not _IDENTIFIER.match(config.job_name):
            raise ConfigurationError(
                names.job_name, config.job_name, "must be a plain ASCII identifier",
                f"use the default {DEFAULT_JOB_NAME!r}",
            )
        return {"mesh": mesh}

    def estimator_distribution(self, config: Any) -> None:
        """None: the kit's launcher (shipped with the code) starts the clients, not SageMaker's toolkit."""
        return None

    def resolve(self, config: Any, capacity: Any, hosts: int) -> Any:
        """The device type (GPU on GPU hosts), each client's share of a host's GPUs, and on CPU mesh size /
        clients virtual devices when a mesh is given; once the devices per client are known the mesh must hold
        exactly clients x devices."""
        names = config.names
        per_host = config.processes_per_host or 1
        device_type = config.device_type or ("GPU" if capacity.is_gpu else "CPU")
        if device_type == "GPU" and not capacity.is_gpu:
            raise ConfigurationError(
                names.device_type, device_type, f"{capacity.name} has no GPU",
                "use device_type='CPU', or a GPU instance type such as 'ml.p4d.24xlarge'",
            )
        devices = config.devices_per_process
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
        if config.port > _MAX_PORT - per_host + 1:
            raise ConfigurationError(
                names.port, config.port,
                f"the {per_host} client(s) of a host need ports up to {config.port + per_host - 1}",
                f"use a port <= {_MAX_PORT - per_host + 1}, e.g. the default {DEFAULT_PORT}",
            )
        if config.mesh is not None:
            devices = self._mesh_devices(config, hosts * per_host, devices, device_type, hosts, per_host)
        return replace(config, device_type=device_type, devices_per_process=devices)

    @staticmethod
    def _mesh_devices(config: Any, clients: int, devices: int | None, device_type: str, hosts: int,
                      per_host: int) -> int:
        names = config.names
        size = math.prod(s for _, s in config.mesh)
        shape = " x ".join(f"{n}={s}" for n, s in config.mesh)
        if devices is None:
            if size % clients:
                raise ConfigurationError(
                    names.mesh, dict(config.mesh),
                    f"the mesh ({shape}) has {size} devices, which cannot be split evenly over {clients} clients "
                    f"({hosts} host(s) x {per_host} process(es))",
                    f"make the product of the mesh sizes a multiple of {clients}, or change instance_count / "
                    "processes_per_host",
                )
            return size // clients
        if size != clients * devices:
            raise ConfigurationError(
                names.mesh, dict(config.mesh),
                f"the mesh ({shape}) has {size} devices but the job has {clients * devices} "
                f"({hosts} host(s) x {per_host} process(es) x {devices} {device_type}(s))",
                f"make the product of the mesh sizes {clients * devices}, or change instance_count / "
                "processes_per_host / devices_per_process",
            )
        return devices

    def job_driver(self, config: Any) -> JobDriver:
        """The kit's DTensor launcher, with the resolved set-up it reads (``smddp_compat_dtensor.json``'s
        ``dtensor``); CPU clients without a mesh drive one device each."""
        return JobDriver(LAUNCHER_SCRIPT, LAUNCHER_NAME, LAUNCHER_CONFIG, {"dtensor": {
            "processes_per_host": config.processes_per_host or 1,
            "devices_per_process": config.devices_per_process or 1,
            "device_type": config.device_type or "CPU",
            "mesh": [[name, size] for name, size in config.mesh] if config.mesh else None,
            "port": config.port,
            "job_name": config.job_name,
        }})

    def local_plans(self, job: LocalCluster) -> list[ProcessPlan]:
        """Every client with its DTENSOR_* variables, on its host's loopback address and a port reserved for it."""
        config = job.config
        placements = cluster.uniform_placements(job.hosts, job.processes_per_host)
        clients = local_endpoints(job, placements)
        envs = cluster.dtensor_environments(
            placements, clients, mesh=dict(config.mesh) if config.mesh else None,
            devices_per_client=config.devices_per_process,
        )
        return [ProcessPlan.at(p, env) for p, env in zip(placements, envs)]
