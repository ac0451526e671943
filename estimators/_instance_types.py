"""SageMaker training instance types the estimators know: vCPUs and GPUs of each.

The table decides how many processes a host runs for ``smdistributed`` (one per GPU, or one per vCPU on CPU types)
and bounds ``processes_per_host`` for ``mpi`` and ``dtensor``. Sizes are from the public EC2/SageMaker instance
specifications. Unknown types are refused early (a typo would otherwise surface as a failed job).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from smddp_compat.estimators.errors import UnknownInstanceTypeError
from smddp_compat.launcher import usable_cores

__all__ = ["InstanceSpec", "LOCAL_INSTANCE_TYPES", "instance_spec", "known_instance_types", "is_local"]

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


def _family(prefix: str, sizes: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {f"ml.{prefix}.{size}": counts for size, counts in sizes.items()}


# (vcpus, gpus) per type.
_TABLE: dict[str, tuple[int, int]] = {}
# GPU families.
_TABLE.update(_family("p2", {"xlarge": (4, 1), "8xlarge": (32, 8), "16xlarge": (64, 16)}))
_TABLE.update(_family("p3", {"2xlarge": (8, 1), "8xlarge": (32, 4), "16xlarge": (64, 8)}))
_TABLE.update(_family("p3dn", {"24xlarge": (96, 8)}))
_TABLE.update(_family("p4d", {"24xlarge": (96, 8)}))
_TABLE.update(_family("p4de", {"24xlarge": (96, 8)}))
_TABLE.update(_family("p5", {"48xlarge": (192, 8)}))
_TABLE.update(_family("p5e", {"48xlarge": (192, 8)}))
_TABLE.update(_family("p5en", {"48xlarge": (192, 8)}))
_TABLE.update(
    _family(
        "g4dn",
        {"xlarge": (4, 1), "2xlarge": (8, 1), "4xlarge": (16, 1), "8xlarge": (32, 1), "12xlarge": (48, 4),
         "16xlarge": (64, 1)},
    )
)
for _g in ("g5", "g6", "g6e"):
    _TABLE.update(
        _family(
            _g,
            {"xlarge": (4, 1), "2xlarge": (8, 1), "4xlarge": (16, 1), "8xlarge": (32, 1), "12xlarge": (48, 4),
             "16xlarge": (64, 1), "24xlarge": (96, 4), "48xlarge": (192, 8)},
        )
    )
# CPU families.
_TABLE.update(
    _family("m4", {"xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "10xlarge": (40, 0), "16xlarge": (64, 0)})
)
_TABLE.update(
    _family(
        "m5",
        {"large": (2, 0), "xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "12xlarge": (48, 0),
         "24xlarge": (96, 0)},
    )
)
for _m in ("m6i", "c6i", "r6i"):
    _TABLE.update(
        _family(
            _m,
            {"large": (2, 0), "xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "8xlarge": (32, 0),
             "12xlarge": (48, 0), "16xlarge": (64, 0), "24xlarge": (96, 0), "32xlarge": (128, 0)},
        )
    )
_TABLE.update(_family("c4", {"xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "8xlarge": (36, 0)}))
for _c in ("c5", "c5n"):
    _TABLE.update(
        _family(_c, {"xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "9xlarge": (36, 0), "18xlarge": (72, 0)})
    )
_TABLE.update(
    _family(
        "r5",
        {"large": (2, 0), "xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "12xlarge": (48, 0),
         "24xlarge": (96, 0)},
    )
)
_TABLE.update(_family("t3", {"medium": (2, 0), "large": (2, 0), "xlarge": (4, 0), "2xlarge": (8, 0)}))


def known_instance_types() -> list[str]:
    """All instance types the estimators accept, local ones first.

    Returns:
        Sorted instance type names.
    """
    return list(LOCAL_INSTANCE_TYPES) + sorted(_TABLE)


def is_local(instance_type: str) -> bool:
    """True for the local instance types (no AWS instance is started)."""
    return instance_type in LOCAL_INSTANCE_TYPES


def instance_spec(instance_type: object, *, field: str = "instance_type") -> InstanceSpec:
    """The spec of an instance type.

    Local types describe this machine: ``local`` and ``local_process`` have its usable CPU cores as vCPUs and no GPU
    (GPUs are not detected here); ``local_gpu`` counts one GPU.

    Args:
        instance_type: The type, e.g. ``ml.p3.16xlarge``.
        field: The field name to put in the error.

    Returns:
        Its vCPU and GPU counts.

    Raises:
        UnknownInstanceTypeError: Not a string, or not a known type (the message suggests the closest ones).
    """
    if not isinstance(instance_type, str) or not instance_type:
        raise UnknownInstanceTypeError(
            field, instance_type, "the instance type must be a non-empty string",
            "pass a SageMaker training type such as 'ml.p4d.24xlarge', 'ml.c5.2xlarge', or 'local_process'",
        )
    cpus = usable_cores() or 1  # the cores this process may use, as local mode counts them
    if instance_type in ("local", "local_process"):
        return InstanceSpec(instance_type, cpus, 0)
    if instance_type == "local_gpu":
        return InstanceSpec(instance_type, cpus, 1)
    counts = _TABLE.get(instance_type)
    if counts is None:
        close = difflib.get_close_matches(instance_type, known_instance_types(), n=3, cutoff=0.6)
        hint = "pick one from smddp_compat.estimators.known_instance_types()"
        if close:
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? ({hint})"
        problem = "unknown SageMaker training instance type"
        if not instance_type.startswith("ml.") and f"ml.{instance_type}" in _TABLE:
            hint = f"SageMaker instance types start with 'ml.': use 'ml.{instance_type}'"
        raise UnknownInstanceTypeError(field, instance_type, problem, hint)
    return InstanceSpec(instance_type, counts[0], counts[1])
