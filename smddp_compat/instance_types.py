"""SageMaker training instance types the kit knows: vCPUs and GPUs of each.

The table decides how many processes a host runs for ``smdistributed`` (one per GPU, or one per vCPU on CPU types)
and bounds ``processes_per_host`` for ``mpi`` and ``dtensor``. Sizes are from the public EC2/SageMaker instance
specifications. The estimators refuse unknown types early (a typo would otherwise surface as a failed job): their
``instance_spec`` raises with :func:`unknown_instance_type`'s problem and fix.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from smddp_compat.launcher import usable_cores

__all__ = [
    "InstanceSpec", "LOCAL_INSTANCE_TYPES", "find_instance_type", "is_local", "known_instance_types",
    "unknown_instance_type",
]

#: Instance types that do not start AWS instances: the SDK's Docker local mode, and local_mode's process backend.
LOCAL_INSTANCE_TYPES = ("local", "local_gpu", "local_process")


@dataclass(frozen=True)
class InstanceSpec:
    """What one instance of a type offers.

    Attributes:
        name: The instance type, e.g. ``ml.p4d.24xlarge``.
        vcpus: Number of vCPUs.
        gpus: Number of NVIDIA GPUs (0 for CPU types).
    """

    name: str
    vcpus: int
    gpus: int

    @property
    def is_gpu(self) -> bool:
        """True when the type has GPUs."""
        return self.gpus > 0

    @property
    def devices(self) -> int:
        """Devices one host offers to data-parallel processes: its GPUs, or its vCPUs on CPU types."""
        return self.gpus if self.gpus else self.vcpus


# vCPUs of a size, the same in every family here but one (ml.c4.8xlarge has 36).
_VCPUS = {"medium": 2, "large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "9xlarge": 36,
          "10xlarge": 40, "12xlarge": 48, "16xlarge": 64, "18xlarge": 72, "24xlarge": 96, "32xlarge": 128,
          "48xlarge": 192}
_G_GPUS = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1}
_GPUS: dict[str, dict[str, int]] = {  # GPU families: GPUs per size
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}, "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8}, "p4d": {"24xlarge": 8}, "p4de": {"24xlarge": 8},
    "p5": {"48xlarge": 8}, "p5e": {"48xlarge": 8}, "p5en": {"48xlarge": 8}, "g4dn": _G_GPUS,
    **{family: {**_G_GPUS, "24xlarge": 4, "48xlarge": 8} for family in ("g5", "g6", "g6e")},
}
_M5_SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge")
_C5_SIZES = ("xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge")
_SIXTH_SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")
_CPU_SIZES: dict[str, tuple[str, ...]] = {  # CPU families: their sizes
    "m4": ("xlarge", "2xlarge", "4xlarge", "10xlarge", "16xlarge"), "m5": _M5_SIZES, "r5": _M5_SIZES,
    "m6i": _SIXTH_SIZES, "c6i": _SIXTH_SIZES, "r6i": _SIXTH_SIZES,
    "c4": ("xlarge", "2xlarge", "4xlarge", "8xlarge"), "c5": _C5_SIZES, "c5n": _C5_SIZES,
    "t3": ("medium", "large", "xlarge", "2xlarge"),
}
# (vcpus, gpus) per type.
_TABLE: dict[str, tuple[int, int]] = {
    **{f"ml.{family}.{size}": (_VCPUS[size], gpus) for family, sizes in _GPUS.items() for size, gpus in sizes.items()},
    **{f"ml.{family}.{size}": (_VCPUS[size], 0) for family, sizes in _CPU_SIZES.items() for size in sizes},
    "ml.c4.8xlarge": (36, 0),
}


def known_instance_types() -> list[str]:
    """All instance types the kit accepts: the local ones, then the others sorted."""
    return list(LOCAL_INSTANCE_TYPES) + sorted(_TABLE)


def is_local(instance_type: str) -> bool:
    """True for the local instance types (no AWS instance is started)."""
    return instance_type in LOCAL_INSTANCE_TYPES


def find_instance_type(instance_type: str) -> InstanceSpec | None:
    """The spec of a known instance type, or None.

    Local types describe this machine: ``local`` and ``local_process`` have its usable CPU cores as vCPUs and no GPU
    (GPUs are not detected here); ``local_gpu`` counts one GPU.
    """
    cpus = usable_cores() or 1  # the cores this process may use, as local mode counts them
    if instance_type in ("local", "local_process"):
        return InstanceSpec(instance_type, cpus, 0)
    if instance_type == "local_gpu":
        return InstanceSpec(instance_type, cpus, 1)
    counts = _TABLE.get(instance_type)
    return None if counts is None else InstanceSpec(instance_type, *counts)


def unknown_instance_type(instance_type: object) -> tuple[str, str]:
    """The problem and the fix to report for an instance type :func:`find_instance_type` does not know (or not a
    string): the fix suggests the closest known types."""
    if not isinstance(instance_type, str) or not instance_type:
        return ("the instance type must be a non-empty string",
                "pass a SageMaker training type such as 'ml.p4d.24xlarge', 'ml.c5.2xlarge', or 'local_process'")
    if not instance_type.startswith("ml.") and f"ml.{instance_type}" in _TABLE:
        return "unknown SageMaker training instance type", (
            f"SageMaker instance types start with 'ml.': use 'ml.{instance_type}'")
    fix = "pick one from smddp_compat.estimators.known_instance_types()"
    close = difflib.get_close_matches(instance_type, known_instance_types(), n=3, cutoff=0.6)
    if close:
        fix = f"did you mean {' or '.join(repr(c) for c in close)}? ({fix})"
    return "unknown SageMaker training instance type", fix
