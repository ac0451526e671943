"""DTensor meshes for the training scripts: devices, single or multi-client (``DTENSOR_JOBS``), and moving data onto
(`pack_global`) and off (`fetch_global`) a mesh, a host copy of a mesh model (`HostCopy`) and agreeing over clients
(`mesh_max`, `mesh_min`); see docs/training-scripts.md#dtensor-devices-and-checkpoints.

Call `initialize_devices` before TensorFlow runs any operation: virtual devices cannot be added afterwards.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from smddp_compat.entry_points.common.errors import ClusterConfigError, EntryPointError

__all__ = [
    "MeshConfigError", "ClientTopology", "DEFAULT_TOTAL_DEVICES", "resolve_total_devices", "initialize_devices",
    "build_mesh", "local_shards", "pack_global", "fetch_global", "HostCopy", "mesh_max", "mesh_min",
]

DEVICE_TYPE = "CPU"
DEFAULT_TOTAL_DEVICES = 8
"""Mesh size when neither ``--devices`` nor ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` says otherwise (the tutorials' 8)."""


class MeshConfigError(EntryPointError):
    """A mesh does not fit the devices, or a tensor does not divide evenly over its mesh dimensions."""


@dataclass(frozen=True)
class ClientTopology:
    """Which DTensor clients take part in the run, read from ``DTENSOR_*`` variables.

    Attributes:
        jobs: Addresses (``host:port``) of all clients, in client-id order; empty for a single client.
        client_id: This client's position in `jobs` (0 for a single client).
        job_name: The TensorFlow job name of the clients (``DTENSOR_JOB_NAME``).
    """

    jobs: tuple[str, ...] = ()
    client_id: int = 0
    job_name: str = "worker"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ClientTopology:
        """Reads ``DTENSOR_JOBS`` / ``DTENSOR_CLIENT_ID`` / ``DTENSOR_JOB_NAME`` from `environ` (default
        ``os.environ``); a single client when ``DTENSOR_JOBS`` is absent or empty.

        Raises:
            ClusterConfigError: ``DTENSOR_JOBS`` is malformed or ``DTENSOR_CLIENT_ID`` is missing or out of range.
        """
        env = os.environ if environ is None else environ
        raw_jobs = env.get("DTENSOR_JOBS", "").strip()
        if not raw_jobs:
            return cls()
        jobs = tuple(job.strip() for job in raw_jobs.split(","))
        for job in jobs:
            host, _, port = job.rpartition(":")
            if not host or not port.isdigit():
                raise ClusterConfigError(
                    f"DTENSOR_JOBS={raw_jobs!r}: entry {job!r} is not host:port; "
                    "use e.g. DTENSOR_JOBS=127.0.0.1:9971,127.0.0.1:9972 (one entry per client)."
                )
        if len(set(jobs)) != len(jobs):
            raise ClusterConfigError(f"DTENSOR_JOBS={raw_jobs!r} lists an address twice; every client needs its own.")
        raw_id = env.get("DTENSOR_CLIENT_ID", "")
        if not raw_id.strip().isdigit() or int(raw_id) >= len(jobs):
            raise ClusterConfigError(
                f"DTENSOR_CLIENT_ID={raw_id!r} must be this client's index in DTENSOR_JOBS (0..{len(jobs) - 1})."
            )
        return cls(jobs=jobs, client_id=int(raw_id), job_name=env.get("DTENSOR_JOB_NAME") or "worker")

    @property
    def num_clients(self) -> int:
        """How many clients share the mesh (1 for a single client)."""
        return max(1, len(self.jobs))

    @property
    def is_multi_client(self) -> bool:
        """Whether ``DTENSOR_JOBS`` names more than one client."""
        return self.num_clients > 1

    @property
    def is_chief(self) -> bool:
        """Whether this is client 0, the one that writes checkpoints, the model and the output data."""
        return self.client_id == 0


def resolve_total_devices(requested: int, topology: ClientTopology,
                          environ: Mapping[str, str] | None = None) -> int:
    """The number of mesh devices over all clients: `requested` (``--devices``) when > 0, else
    ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` (which local mode and the estimator launcher set in `environ`, default
    ``os.environ``) x clients when set, else `DEFAULT_TOTAL_DEVICES`.

    Raises:
        ClusterConfigError: ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` is not a positive integer.
    """
    if requested > 0:
        return requested
    env = os.environ if environ is None else environ
    raw = env.get("SMDDP_DTENSOR_DEVICES_PER_CLIENT", "").strip()
    if not raw:
        return DEFAULT_TOTAL_DEVICES
    if not raw.isdigit() or int(raw) < 1:
        raise ClusterConfigError(
            f"SMDDP_DTENSOR_DEVICES_PER_CLIENT={raw!r} must be a positive integer (devices per DTensor client).")
    return int(raw) * topology.num_clients


def initialize_devices(total_devices: int, topology: ClientTopology | None = None) -> ClientTopology:
    """Creates this client's virtual CPUs (``total_devices / clients``; `total_devices` counts the whole mesh) and, for
    several clients, connects them into one DTensor system. Returns the topology in use (default: the environment's).

    Raises:
        MeshConfigError: `total_devices` does not divide over the clients, or TensorFlow already started.
        ClusterConfigError: The ``DTENSOR_*`` variables are malformed.
    """
    topology = topology if topology is not None else ClientTopology.from_environ()
    if total_devices < 1 or total_devices % topology.num_clients:
        raise MeshConfigError(
            f"--devices {total_devices} does not divide over {topology.num_clients} DTensor clients "
            f"(DTENSOR_JOBS); choose a multiple of {topology.num_clients}."
        )
    local_devices = total_devices // topology.num_clients
    # A single client gets the same initialisation as several: one code path, and DTensor's own checks.
    try:
        dtensor.initialize_accelerator_system(DEVICE_TYPE, num_logical_cpu_devices=local_devices)
    except (RuntimeError, ValueError) as exc:
        raise MeshConfigError(
            f"cannot create {local_devices} virtual CPU devices: {exc}. Call initialize_devices before TensorFlow "
            "runs any operation."
        ) from exc
    found = dtensor.num_local_devices(DEVICE_TYPE)
    if found != local_devices:
        raise MeshConfigError(f"asked for {local_devices} virtual CPUs, TensorFlow made {found}.")
    return topology


def build_mesh(dims: Sequence[tuple[str, int]], topology: ClientTopology) -> dtensor.Mesh:
    """Builds a mesh over all devices of all clients (`topology` from `initialize_devices`).

    Raises:
        MeshConfigError: The dimensions (e.g. ``[("batch", 4), ("model", 2)]``) do not multiply to the global device
            count.
    """
    total = dtensor.num_global_devices(DEVICE_TYPE)
    size = math.prod(n for _, n in dims)
    if size != total:
        shape = ", ".join(f"{name}={n}" for name, n in dims)
        raise MeshConfigError(f"mesh ({shape}) needs {size} devices but the run has {total}; adjust --devices.")
    if topology.is_multi_client:
        return dtensor.create_distributed_mesh(list(dims), device_type=DEVICE_TYPE)
    local = [f"{DEVICE_TYPE}:{i}" for i in range(dtensor.num_local_devices(DEVICE_TYPE))]
    return dtensor.create_mesh(list(dims), devices=local)


def local_shards(array: np.ndarray, layout: dtensor.Layout) -> list[np.ndarray]:
    """The slices of the global `array` (the same on every client) that the local devices of `layout`'s mesh hold: one
    view per local device, in local-device order.

    Raises:
        MeshConfigError: `layout`'s rank is not ``array.ndim``, or a sharded axis does not divide by its mesh
            dimension.
    """
    if array.ndim != layout.rank:
        raise MeshConfigError(f"an array of shape {array.shape} cannot take a layout of rank {layout.rank}.")
    mesh = layout.mesh
    for axis, spec in enumerate(layout.sharding_specs):
        if spec != dtensor.UNSHARDED and array.shape[axis] % mesh.dim_size(spec):
            raise MeshConfigError(
                f"axis {axis} of an array of shape {array.shape} does not split evenly over mesh dimension "
                f"{spec!r} of size {mesh.dim_size(spec)}; make it (e.g. the batch size) a multiple of "
                f"{mesh.dim_size(spec)}."
            )
    shards = []
    for location in mesh.local_device_locations():
        index = []
        for axis, spec in enumerate(layout.sharding_specs):
            if spec == dtensor.UNSHARDED:
                index.append(slice(None))
            else:
                width = array.shape[axis] // mesh.dim_size(spec)
                start = location[spec] * width
                index.append(slice(start, start + width))
        shards.append(array[tuple(index)])
    return shards


def pack_global(array: np.ndarray | tf.Tensor, layout: dtensor.Layout) -> tf.Tensor:
    """Packs a global host value (every client passes the same one) onto the mesh as a DTensor with `layout`, each local
    device receiving only its shard."""
    value = array.numpy() if isinstance(array, tf.Tensor) else np.asarray(array)
    return dtensor.pack([tf.constant(shard) for shard in local_shards(value, layout)], layout)


def fetch_global(value: tf.Tensor | tf.Variable) -> np.ndarray:
    """The full value of a DTensor (or DVariable) as numpy, on every client.

    A collective: every client must call it, in the same order.
    """
    layout = dtensor.fetch_layout(value)
    replicated = dtensor.Layout.replicated(layout.mesh, rank=layout.rank)
    if layout != replicated:
        value = dtensor.relayout(tf.convert_to_tensor(value), replicated)
    return dtensor.unpack(tf.convert_to_tensor(value))[0].numpy()


class HostCopy:
    """Pairs mesh variables (DVariables on one mesh) with plain host variables of the same shapes and dtypes, one per
    mesh variable, to copy values both ways. Build the host side from the same model class with no layouts: then
    ``mesh_module.variables`` and ``host_module.variables`` list matching variables in the same order.

    Raises:
        MeshConfigError: The two lists differ in length, shapes or dtypes.
    """

    def __init__(self, mesh_variables: Sequence[tf.Variable], host_variables: Sequence[tf.Variable]) -> None:
        if len(mesh_variables) != len(host_variables):
            raise MeshConfigError(
                f"host copy has {len(host_variables)} variables for {len(mesh_variables)} mesh variables."
            )
        for mesh_var, host_var in zip(mesh_variables, host_variables):
            if mesh_var.shape != host_var.shape or mesh_var.dtype != host_var.dtype:
                raise MeshConfigError(
                    f"variable {mesh_var.name} {mesh_var.shape} {mesh_var.dtype.name} has no matching host "
                    f"variable ({host_var.name} {host_var.shape} {host_var.dtype.name})."
                )
        self.mesh_variables = list(mesh_variables)
        self.host_variables = list(host_variables)

    def pull(self) -> None:
        """Copies the mesh values into the host variables (a collective: every client calls it)."""
        for mesh_var, host_var in zip(self.mesh_variables, self.host_variables):
            host_var.assign(fetch_global(mesh_var))

    def push(self) -> None:
        """Copies the host values onto the mesh, each device receiving its shard of every variable."""
        for mesh_var, host_var in zip(self.mesh_variables, self.host_variables):
            mesh_var.assign(pack_global(host_var.numpy(), dtensor.fetch_layout(mesh_var)))


def _reduce_over_devices(value: float, mesh: dtensor.Mesh, reduce: str) -> float:
    # Every device of the mesh holds one element of a fully sharded tensor; the local devices put this client's
    # value there, so the reduction sees every client's value.
    dims = list(mesh.dim_names)
    local = [tf.constant(np.full([1] * len(dims), value, dtype=np.float64)) for _ in mesh.local_device_ids()]
    packed = dtensor.pack(local, dtensor.Layout(dims, mesh))
    return float(dtensor.unpack(_REDUCERS[reduce](packed))[0].numpy())


@tf.function
def _max_of(x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_max(x)


@tf.function
def _min_of(x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_min(x)


_REDUCERS = {"max": _max_of, "min": _min_of}


def mesh_max(value: float, mesh: dtensor.Mesh) -> float:
    """The largest of the clients' `value`s (a collective: every client calls it)."""
    return _reduce_over_devices(value, mesh, "max")


def mesh_min(value: float, mesh: dtensor.Mesh) -> float:
    """The smallest of the clients' `value`s (a collective: every client calls it)."""
    return _reduce_over_devices(value, mesh, "min")
