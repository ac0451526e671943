"""SageMaker SDK v3 plug-ins: ``DistributedConfig`` subclasses for ``sagemaker.train.ModelTrainer``.

Pass one as ``ModelTrainer(..., distributed=SMDDPCompat())``: one config per distribution SDK v2's
``TensorFlow(distribution=...)`` takes (:class:`SMDDPCompat`, :class:`Horovod`, :class:`MultiWorkerMirrored`,
:class:`DTensor`, :class:`ParameterServer`; no distribution is ``distributed=None``, SDK v3's own one script per
host), built and checked by the same rules, the errors naming the config's fields. Each names its own driver
(``driver_dir``/``driver_script``); ModelTrainer ships that directory as the ``sm_drivers`` channel and runs the
driver on every host with the config's fields in SM_DISTRIBUTED_CONFIG. What each driver does, with an example:
``estimators/README.md`` and ``docs/estimators.md``.

Install with the ``sdk3`` extra (``pip install 'smddp-compat[sdk3]'``, i.e. ``sagemaker>=3.27,<4``). This module
imports only when SDK v3 is installed; importing it elsewhere raises :class:`~estimators.errors.MissingDependencyError`
with the install command.

:func:`train_local` runs a ``ModelTrainer``'s job on this machine with local mode's process backend (no Docker);
:func:`tune_local` runs a ``HyperparameterTuner``'s tuning job here, every trial such a job.
"""

from __future__ import annotations

import os
from typing import ClassVar, Optional

from smddp_compat.estimators.errors import missing_sdk_error

try:
    from pydantic import PrivateAttr, field_validator, model_validator
    from sagemaker.train.distributed import DistributedConfig
except ImportError as _exc:  # SDK v2 (or no SDK) here
    raise missing_sdk_error(3, _exc) from _exc

from smddp_compat.distribution_config import DEFAULT_DTENSOR_PORT, DistributionConfig, FieldNames, parse_mesh
from smddp_compat.estimators import (
    DEFAULT_SOURCE_EXCLUDES, DistributionPlan, check_image_for_instance_type, instance_spec, plan_distribution,
    stage_driver_dir,
)

__all__ = [
    "SMDDPCompat", "Horovod", "MultiWorkerMirrored", "DTensor", "ParameterServer", "SOURCE_IGNORE_PATTERNS", "train_local",
    "tune_local",
]

#: ``SourceCode(ignore_patterns=...)`` that leaves secrets, VCS, caches and virtual environments out of the upload.
SOURCE_IGNORE_PATTERNS: list[str] = list(DEFAULT_SOURCE_EXCLUDES)

#: The plug-ins' settings are named as their own fields in errors.
_PLUG_IN_NAMES = FieldNames(kind="distributed", mesh="mesh")


class _KitDriven(DistributedConfig):
    """A config whose driver is one of the kit's job drivers, shipped with ``smddp_compat/`` beside it.

    Its fields are settings of :class:`~smddp_compat.distribution_config.DistributionConfig` under the same names, so
    the config is checked by that one model when it is built and by :func:`plan_distribution` in :meth:`check`.
    """

    _kind: ClassVar[str]  # the distribution's name (smddp_compat.strategies)
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

    def distribution_config(self) -> DistributionConfig:
        """The kit's model of this config (its SDK v2 twin is ``distribution_config().to_sdk_dict()``).

        Raises:
            ConfigurationError: A value the distribution refuses, named as this config's field.
        """
        given = {name: value for name, value in self.model_dump().items() if value is not None}
        return DistributionConfig(self._kind, names=_PLUG_IN_NAMES, **given)

    @model_validator(mode="after")
    def _checked(self) -> "_KitDriven":
        self.distribution_config()
        return self

    def check(self, instance_type: str, instance_count: int = 1,
              training_image: Optional[str] = None) -> DistributionPlan:
        """Checks the config against a cluster (call it before ``train()``; ModelTrainer has no hook for it) by the
        rules SDK v2's ``distribution=`` is checked by, and returns the plan, every default filled in.

        Raises:
            ConfigurationError: Unknown instance type, a count below 1; for :class:`SMDDPCompat` and
                :class:`Horovod` more processes per host than it has devices; for :class:`DTensor` clients that
                cannot share the GPUs evenly, or a mesh that does not match the clients' devices (the rules of
                ``smddp_compat.distribution_config``).

        Warns:
            CpuImageWarning: ``training_image`` (ModelTrainer's, when given) has no CUDA and the type has GPUs:
                every rank would train on the CPU (the rule of ``smddp_compat.image.cuda.image_cuda``).
        """
        plan = plan_distribution(self.distribution_config(), spec=instance_spec(instance_type),
                                 instance_count=instance_count)
        check_image_for_instance_type(training_image, instance_type, instance_count)
        return plan


class _HorovodRanks(_KitDriven):
    """H x P Horovod ranks, started by ``smddp_driver.py`` (the fields are :class:`Horovod`'s)."""

    processes_per_host: Optional[int] = None
    custom_mpi_options: Optional[str] = None


class SMDDPCompat(_HorovodRanks):
    """Runs an SMDDP (``smdistributed.dataparallel.tensorflow``) script on smddp-compat, as SDK v2's
    ``distribution={"smdistributed": {"dataparallel": {...}}}``: one rank per GPU of a host, else per vCPU (as SMDDP
    did), the ``smdistributed`` alias on every rank's path. Parameters: those of :class:`Horovod` (here
    ``processes_per_host`` defaults to the host's GPUs, else its vCPUs).
    """

    _kind = "smddp"
    _driver_files = ("smddp_driver.py",)


class Horovod(_HorovodRanks):
    """Runs a Horovod script (Horovod's API, or the kit's Horovod face ``smddp_compat.horovod``) as SDK v2's
    ``distribution={"mpi": {...}}``: one rank per GPU of a host, else one per host. SDK v3's own ``MPI`` is not the
    same launch (docs/estimators.md says why).

    Parameters:
        processes_per_host: Ranks per host (default: the host's GPUs, else 1).
        custom_mpi_options: Extra mpirun options for multi-host jobs, split like a shell would split them but never
            given to a shell.
    """

    _kind = "mpi"
    _driver_files = ("horovod_driver.py", "smddp_driver.py")


class MultiWorkerMirrored(_KitDriven):
    """Runs a ``MultiWorkerMirroredStrategy`` script as SageMaker's TensorFlow toolkit runs SDK v2's
    ``distribution={"multi_worker_mirrored_strategy": {"enabled": True}}``: one worker per host, whose ``TF_CONFIG``
    lists every host's worker on port 8890 in SM_HOSTS order, this host's index its task (worker 0 the chief). It
    has no settings (as the toolkit's strategy has none).
    """

    _kind = "mwms"
    _driver_files = ("mwms_driver.py",)


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
    _kind = "dtensor"
    _driver_files = ("dtensor_driver.py", "dtensor_launch.py")

    @field_validator("mesh", mode="before")
    @classmethod
    def _parsed_mesh(cls, mesh: object) -> Optional[dict[str, int]]:
        """The mesh as a mapping, or (name, size) pairs whose names must then be distinct."""
        parsed = parse_mesh(mesh, _PLUG_IN_NAMES.mesh)
        return None if parsed is None else dict(parsed)


class ParameterServer(_KitDriven):
    """Runs a parameter-server script (TensorFlow's ``ParameterServerStrategy``) as SageMaker's TensorFlow toolkit
    runs SDK v2's ``distribution={"parameter_server": {"enabled": True}}``: on two or more hosts a parameter server
    per host beside the script, whose ``TF_CONFIG`` names the first host's task ``master`` and the others' ``worker``
    (``smddp_compat.parameter_server`` turns it into what TF 2.21's strategy expects); one host runs the script alone.
    It has no settings (as the toolkit's strategy has none).
    """

    _kind = "parameter_server"
    _driver_files = ("ps_driver.py",)


from smddp_compat.estimators.sdk3._local import train_local  # noqa: E402  (after the configs it checks)
from smddp_compat.estimators.sdk3._tuning import tune_local  # noqa: E402
