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

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from estimators._instance_types import InstanceSpec
from estimators.errors import ConfigurationError

__all__ = ["DTensorConfig", "DistributionPlan", "plan_distribution", "KINDS", "DEFAULT_DTENSOR_PORT"]

#: Strategy names as the ``smddp local`` / ``smddp submit`` CLIs spell them, and their dictionary keys.
KINDS = {
    "none": None,
    "smddp": "smdistributed",
    "mpi": "mpi",
    "mwms": "multi_worker_mirrored_strategy",
    "parameter_server": "parameter_server",
    "dtensor": "dtensor",
}
_KEY_TO_KIND = {key: kind for kind, key in KINDS.items() if key}
DEFAULT_DTENSOR_PORT = 9970
_MAX_PORT = 65535

_ALLOWED_KEYS = {
    "smdistributed.dataparallel": {"enabled", "custom_mpi_options", "processes_per_host"},
    "mpi": {"enabled", "custom_mpi_options", "processes_per_host"},
    "multi_worker_mirrored_strategy": {"enabled"},
    "parameter_server": {"enabled", "custom_mpi_options"},
    "dtensor": {"enabled", "mesh", "processes_per_host", "devices_per_process", "device_type", "port", "job_name"},
}


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
    """

    kind: str
    processes_per_host: int
    custom_mpi_options: str = ""
    sdk_distribution: dict[str, Any] | None = None
    dtensor: DTensorConfig | None = None
    original: dict[str, Any] = field(default_factory=dict)
    explicit_processes_per_host: int | None = None

    @property
    def ships_compat(self) -> bool:
        """True when the uploaded source must carry smddp_compat (and the smdistributed alias)."""
        return self.kind in ("smddp", "mpi", "dtensor")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_keys(path: str, config: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigurationError(
            f"distribution{path}", dict(config), f"unknown key(s) {unknown}",
            f"use only {sorted(allowed)}",
        )


def _enabled(path: str, config: object) -> bool:
    if not isinstance(config, Mapping):
        raise ConfigurationError(
            f"distribution{path}", config, "expected a dictionary",
            f"write it as {{'enabled': True, ...}} under distribution{path}",
        )
    enabled = config.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigurationError(
            f"distribution{path}['enabled']", enabled, "must be True or False", "use a bool, e.g. 'enabled': True"
        )
    return enabled


def _mpi_options(path: str, config: Mapping[str, Any]) -> str:
    options = config.get("custom_mpi_options", "")
    if options is None:
        return ""
    if not isinstance(options, str):
        raise ConfigurationError(
            f"distribution{path}['custom_mpi_options']", options, "must be a string",
            "give the options as one string, e.g. '-x NCCL_DEBUG=INFO'",
        )
    return options


def _processes_per_host(path: str, config: Mapping[str, Any], spec: InstanceSpec, default: int) -> int:
    value = config.get("processes_per_host", default)
    name = f"distribution{path}['processes_per_host']"
    if not _is_int(value) or value < 1:
        raise ConfigurationError(name, value, "must be an integer >= 1", "use a positive integer, e.g. 1")
    if value > spec.devices:
        what = f"{spec.gpus} GPU(s)" if spec.is_gpu else f"{spec.vcpus} vCPU(s)"
        raise ConfigurationError(
            name, value, f"{spec.name} has only {what}, so at most {spec.devices} processes per host fit",
            f"use processes_per_host <= {spec.devices}, or a larger instance type",
        )
    return value


def _mesh(path: str, mesh: object) -> tuple[tuple[str, int], ...] | None:
    if mesh is None:
        return None
    name = f"distribution{path}['mesh']"
    items: list[tuple[object, object]]
    if isinstance(mesh, Mapping):
        items = list(mesh.items())
    elif isinstance(mesh, (list, tuple)) and all(isinstance(i, (list, tuple)) and len(i) == 2 for i in mesh):
        items = [(i[0], i[1]) for i in mesh]
    else:
        raise ConfigurationError(
            name, mesh, "expected a mapping of dimension name to size",
            "write it as {'batch': 4, 'model': 2} (or [['batch', 4], ['model', 2]])",
        )
    if not items:
        raise ConfigurationError(name, mesh, "the mesh has no dimension", "give at least one, e.g. {'batch': 4}")
    seen: set[str] = set()
    out = []
    for dim, size in items:
        if not isinstance(dim, str) or not dim.isidentifier() or dim in seen:
            raise ConfigurationError(
                name, mesh, f"dimension name {dim!r} is empty, not an identifier, or repeated",
                "use distinct names such as 'batch' and 'model'",
            )
        if not _is_int(size) or size < 1:
            raise ConfigurationError(
                name, mesh, f"dimension {dim!r} has size {size!r}", "every size must be an integer >= 1"
            )
        seen.add(dim)
        out.append((dim, int(size)))
    return tuple(out)


def _dtensor(config: Mapping[str, Any], spec: InstanceSpec, instance_count: int) -> DTensorConfig:
    path = "['dtensor']"
    _check_keys(path, config, _ALLOWED_KEYS["dtensor"])
    device_type = config.get("device_type", "GPU" if spec.is_gpu else "CPU")
    if device_type not in ("GPU", "CPU"):
        raise ConfigurationError(
            f"distribution{path}['device_type']", device_type, "must be 'GPU' or 'CPU'", "pick one of the two"
        )
    if device_type == "GPU" and not spec.is_gpu:
        raise ConfigurationError(
            f"distribution{path}['device_type']", device_type, f"{spec.name} has no GPU",
            "use device_type='CPU', or a GPU instance type such as 'ml.p4d.24xlarge'",
        )
    pph = config.get("processes_per_host", 1)
    pph_name = f"distribution{path}['processes_per_host']"
    if not _is_int(pph) or pph < 1:
        raise ConfigurationError(pph_name, pph, "must be an integer >= 1", "use a positive integer, e.g. 1")
    if device_type == "GPU":
        if spec.gpus % pph:
            raise ConfigurationError(
                pph_name, pph, f"{spec.name} has {spec.gpus} GPU(s), which {pph} clients cannot share evenly",
                f"use a divisor of {spec.gpus}",
            )
        default_devices = spec.gpus // pph
    else:
        default_devices = 1
    devices = config.get("devices_per_process", default_devices)
    devices_name = f"distribution{path}['devices_per_process']"
    if not _is_int(devices) or devices < 1:
        raise ConfigurationError(devices_name, devices, "must be an integer >= 1", "use a positive integer")
    if device_type == "GPU" and devices * pph != spec.gpus:
        raise ConfigurationError(
            devices_name, devices,
            f"{pph} client(s) x {devices} GPU(s) does not use the {spec.gpus} GPU(s) of {spec.name}",
            f"leave it out (default {spec.gpus // pph}) or make processes_per_host x devices_per_process = "
            f"{spec.gpus}",
        )
    port = config.get("port", DEFAULT_DTENSOR_PORT)
    if not _is_int(port) or not 1024 <= port <= _MAX_PORT - pph:
        raise ConfigurationError(
            f"distribution{path}['port']", port, f"must be an integer in 1024..{_MAX_PORT - pph}",
            f"use the default {DEFAULT_DTENSOR_PORT} or a free port",
        )
    job_name = config.get("job_name", "worker")
    if not isinstance(job_name, str) or not job_name.isidentifier():
        raise ConfigurationError(
            f"distribution{path}['job_name']", job_name, "must be a plain identifier", "use the default 'worker'"
        )
    mesh = _mesh(path, config.get("mesh"))
    if mesh is not None:
        total = instance_count * pph * devices
        size = math.prod(s for _, s in mesh)
        if size != total:
            shape = " x ".join(f"{n}={s}" for n, s in mesh)
            raise ConfigurationError(
                f"distribution{path}['mesh']", dict(mesh),
                f"the mesh ({shape}) has {size} devices but the job has {total} "
                f"({instance_count} instance(s) x {pph} client(s) x {devices} {device_type}(s))",
                f"make the product of the mesh sizes {total}, or change instance_count / processes_per_host / "
                "devices_per_process",
            )
    return DTensorConfig(pph, devices, device_type, mesh, port, job_name)


def plan_distribution(
    distribution: Mapping[str, Any] | None, *, spec: InstanceSpec, instance_count: int
) -> DistributionPlan:
    """Checks ``distribution`` against the instance type and count, and plans the launch.

    Args:
        distribution: The estimator's ``distribution`` argument (None or empty for a single process per host).
        spec: The instance type's spec.
        instance_count: Number of instances (already checked >= 1).

    Returns:
        The plan.

    Raises:
        ConfigurationError: Not a dictionary, an unknown or second strategy, an unknown key, a bad value, a
            process count the instance cannot hold, or a DTensor mesh that does not fill the devices.
    """
    if not distribution:
        return DistributionPlan("none", 1)
    if not isinstance(distribution, Mapping):
        raise ConfigurationError(
            "distribution", distribution, "expected a dictionary",
            "pass e.g. {'smdistributed': {'dataparallel': {'enabled': True}}}",
        )
    original = dict(distribution)
    strategies = [key for key in distribution if key != "instance_groups"]
    unknown = [key for key in strategies if key not in _KEY_TO_KIND]
    if unknown:
        raise ConfigurationError(
            "distribution", original, f"unknown strategy {unknown[0]!r}",
            f"use one of {sorted(_KEY_TO_KIND)} (e.g. {{'smdistributed': {{'dataparallel': {{'enabled': True}}}}}})",
        )
    if "instance_groups" in distribution:
        raise ConfigurationError(
            "distribution['instance_groups']", distribution["instance_groups"],
            "heterogeneous clusters are not supported by smddp-compat's estimators",
            "use instance_type and instance_count (one instance group)",
        )
    if len(strategies) > 1:
        raise ConfigurationError(
            "distribution", original, f"more than one strategy given ({strategies})", "keep exactly one strategy"
        )
    key = strategies[0]
    config = distribution[key]

    if key == "smdistributed":
        if not isinstance(config, Mapping):
            raise ConfigurationError(
                "distribution['smdistributed']", config, "expected a dictionary",
                "write {'smdistributed': {'dataparallel': {'enabled': True}}}",
            )
        others = sorted(set(config) - {"dataparallel"})
        if others:
            fix = "use {'dataparallel': {'enabled': True}}"
            if "modelparallel" in others:
                fix = "SageMaker model parallelism (SMP) is not provided; use distribution={'dtensor': {...}} instead"
            raise ConfigurationError("distribution['smdistributed']", dict(config), f"unsupported {others}", fix)
        path = "['smdistributed']['dataparallel']"
        dp = config.get("dataparallel", {})
        if not _enabled(path, dp):
            return DistributionPlan("none", 1, original=original)
        _check_keys(path, dp, _ALLOWED_KEYS["smdistributed.dataparallel"])
        pph = _processes_per_host(path, dp, spec, spec.devices)
        options = _mpi_options(path, dp)
        # SageMaker's own SMDDP launch (the SDK's hyperparameters for TF <= 2.11): the image's toolkit starts one
        # process per GPU (one per host on CPU types) unless processes_per_host was given.
        sdk = {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": options}}}
        explicit = pph if "processes_per_host" in dp else None
        return DistributionPlan("smddp", pph, options, sdk, original=original, explicit_processes_per_host=explicit)

    path = f"['{key}']"
    if not _enabled(path, config):
        return DistributionPlan("none", 1, original=original)
    kind = _KEY_TO_KIND[key]
    if kind == "dtensor":
        dt = _dtensor(config, spec, instance_count)
        return DistributionPlan("dtensor", dt.processes_per_host, "", None, dt, original=original)
    _check_keys(path, config, _ALLOWED_KEYS[key])
    if kind == "mpi":
        pph = _processes_per_host(path, config, spec, spec.gpus or 1)
        options = _mpi_options(path, config)
        sdk = {"mpi": {"enabled": True, "processes_per_host": pph, "custom_mpi_options": options}}
        return DistributionPlan("mpi", pph, options, sdk, original=original)
    if kind == "parameter_server":
        return DistributionPlan("parameter_server", 1, "", {"parameter_server": {"enabled": True}}, original=original)
    return DistributionPlan("mwms", 1, "", {"multi_worker_mirrored_strategy": {"enabled": True}}, original=original)
