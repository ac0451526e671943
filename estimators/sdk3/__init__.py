"""SageMaker SDK v3 plug-ins: ``DistributedConfig`` subclasses for ``sagemaker.train.ModelTrainer``.

Pass one as ``ModelTrainer(..., distributed=SMDDPCompat())`` (or :class:`DTensor`, :class:`ParameterServer`). Each
names its own driver (``driver_dir``/``driver_script``); ModelTrainer ships that directory as the ``sm_drivers``
channel and runs the driver on every host with the config's fields in SM_DISTRIBUTED_CONFIG. What each driver does,
with an example: ``estimators/README.md`` and ``docs/estimators.md``.

Install with the ``sdk3`` extra (``pip install 'smddp-compat[sdk3]'``, i.e. ``sagemaker>=3``). This module
imports only when SDK v3 is installed; importing it elsewhere raises :class:`~estimators.errors.MissingDependencyError`
with the install command.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Optional

from smddp_compat.estimators.errors import MissingDependencyError

try:
    from pydantic import PrivateAttr, field_validator, model_validator
    from sagemaker.train.distributed import DistributedConfig
except ImportError as _exc:  # SDK v2 (or no SDK) here
    raise MissingDependencyError(
        f"estimators.sdk3 needs the SageMaker Python SDK v3 ({_exc}): pip install 'smddp-compat[sdk3]' "
        "(sagemaker>=3) in an environment of its own (v2 and v3 cannot share one; see estimators/sdk3/setup_venv.sh)."
        " With SDK v2 use smddp_compat.estimators.TensorFlow."
    ) from _exc

from smddp_compat.distribution_config import DEFAULT_DTENSOR_PORT, DistributionConfig, FieldNames, parse_mesh
from smddp_compat.estimators import (
    DEFAULT_SOURCE_EXCLUDES, check_image_for_instance_type, instance_spec, plan_distribution, stage_driver_dir,
)

__all__ = ["SMDDPCompat", "DTensor", "ParameterServer", "SOURCE_IGNORE_PATTERNS"]

#: ``SourceCode(ignore_patterns=...)`` that leaves secrets, VCS, caches and virtual environments out of the upload.
SOURCE_IGNORE_PATTERNS: list[str] = list(DEFAULT_SOURCE_EXCLUDES)

#: The plug-ins' settings are named as their own fields in errors.
_PLUG_IN_NAMES = FieldNames(kind="distributed", mesh="mesh")


class _KitDriven(DistributedConfig):
    """A config whose driver is one of the kit's job drivers, shipped with ``smddp_compat/`` beside it."""

    _driver_files: ClassVar[tuple[str, ...]] = ()  # the driver first, then the sibling scripts it imports
    _driver_dir: Optional[str] = PrivateAttr(default=None)

    @property
    def driver_dir(self) -> str:
        """Directory shipped as the driver: the driver, the scripts it imports, and ``smddp_compat/``."""
        if self._driver_dir is None or not os.path.isdir(self._driver_dir):
            self._driver_dir = stage_driver_dir((*self._driver_files, "hyperparameter_args.py"), with_compat=True)
        return self._driver_dir

    @property
    def driver_script(self) -> str:
        """The driver's file name."""
        return self._driver_files[0]

    def _distribution(self) -> dict[str, Any]:
        """The SDK v2 ``distribution`` this config stands for (checked by the estimators' rules)."""
        raise NotImplementedError

    def check(self, instance_type: str, instance_count: int = 1, training_image: Optional[str] = None) -> None:
        """Checks the config against a cluster (call it before ``train()``; ModelTrainer has no hook for it).

        Raises:
            ConfigurationError: Unknown instance type; for :class:`SMDDPCompat` more processes per host than it has
                devices; for :class:`DTensor` clients that cannot share the GPUs evenly, or a mesh that does not
                match the clients' devices (the rules of ``smddp_compat.distribution_config``).

        Warns:
            CpuImageWarning: ``training_image`` (ModelTrainer's, when given) has no CUDA and the type has GPUs:
                every rank would train on the CPU (the rule of ``smddp_compat.image.cuda.image_cuda``).
        """
        plan_distribution(self._distribution(), spec=instance_spec(instance_type), instance_count=instance_count)
        check_image_for_instance_type(training_image, instance_type, instance_count)


class SMDDPCompat(_KitDriven):
    """Runs an SMDDP (``smdistributed.dataparallel.tensorflow``) or Horovod script on smddp-compat.

    Parameters:
        processes_per_host: Ranks per host (default: the host's GPUs, else its vCPUs, as SMDDP did).
        custom_mpi_options: Extra mpirun options for multi-host jobs, split like a shell would split them but never
            given to a shell.
    """

    processes_per_host: Optional[int] = None
    custom_mpi_options: Optional[str] = None
    _driver_files: ClassVar[tuple[str, ...]] = ("smddp_driver.py",)

    @model_validator(mode="after")
    def _checked(self) -> "SMDDPCompat":
        DistributionConfig.from_flat("smddp", processes_per_host=self.processes_per_host,
                                     custom_mpi_options=self.custom_mpi_options, names=_PLUG_IN_NAMES)
        return self

    def _distribution(self) -> dict[str, Any]:
        config: dict[str, Any] = {"enabled": True}
        if self.processes_per_host is not None:
            config["processes_per_host"] = self.processes_per_host
        return {"smdistributed": {"dataparallel": config}}


class DTensor(_KitDriven):
    """Runs a DTensor script: every process becomes a DTensor client with DTENSOR_* set.

    Parameters:
        processes_per_host: DTensor clients per host.
        devices_per_process: GPUs (or virtual CPUs) each client drives; exported as
            ``SMDDP_DTENSOR_DEVICES_PER_CLIENT``.
        device_type: ``"GPU"`` or ``"CPU"`` (default: GPU on GPU instances).
        mesh: The global mesh, e.g. ``{"batch": 8, "model": 2}``; exported as ``SMDDP_DTENSOR_MESH``.
        port: First port of the clients on each host.
        job_name: DTENSOR_JOB_NAME.
    """

    processes_per_host: int = 1
    devices_per_process: Optional[int] = None
    device_type: Optional[str] = None
    mesh: Optional[dict[str, int]] = None
    port: int = DEFAULT_DTENSOR_PORT
    job_name: str = "worker"
    _driver_files: ClassVar[tuple[str, ...]] = ("dtensor_driver.py", "dtensor_launch.py")

    @field_validator("mesh", mode="before")
    @classmethod
    def _parsed_mesh(cls, mesh: object) -> Optional[dict[str, int]]:
        """The mesh as a mapping, or (name, size) pairs whose names must then be distinct."""
        parsed = parse_mesh(mesh, _PLUG_IN_NAMES.mesh)
        return None if parsed is None else dict(parsed)

    @model_validator(mode="after")
    def _checked(self) -> "DTensor":
        DistributionConfig(
            "dtensor", self.processes_per_host, "", self.mesh, self.devices_per_process, self.device_type, self.port,
            self.job_name, names=_PLUG_IN_NAMES,
        )
        return self

    def _distribution(self) -> dict[str, Any]:
        """Checked against a cluster, the clients share the devices and the mesh fills them."""
        return {"dtensor": {"enabled": True, **{k: v for k, v in self.model_dump().items() if v is not None}}}


class ParameterServer(_KitDriven):
    """Runs a parameter-server script (TensorFlow's ``ParameterServerStrategy``) as SageMaker's TensorFlow toolkit
    runs SDK v2's ``distribution={"parameter_server": {"enabled": True}}``: on two or more hosts a parameter server
    per host beside the script, whose ``TF_CONFIG`` names the first host's task ``master`` and the others' ``worker``
    (``smddp_compat.parameter_server`` turns it into what TF 2.21's strategy expects); one host runs the script alone.
    It has no settings (as the toolkit's strategy has none).
    """

    _driver_files: ClassVar[tuple[str, ...]] = ("ps_driver.py",)

    def _distribution(self) -> dict[str, Any]:
        return {"parameter_server": {"enabled": True}}
