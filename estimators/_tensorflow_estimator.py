"""``smddp_compat.estimators.TensorFlow``: the SageMaker SDK v2 TensorFlow estimator, with SMDDP on any TensorFlow and DTensor.

A drop-in subclass of ``sagemaker.tensorflow.TensorFlow`` (same constructor, ``fit``, ``attach``, ``logs``,
``deploy``...) that adds the ``smdistributed`` distribution on every TensorFlow version, the ``dtensor`` one,
``instance_type="local_process"`` (the job runs on this machine through local_mode, then the SDK's view of it:
:mod:`smddp_compat.estimators._local_job`), every field checked before any upload or AWS call (the region last),
sessions that opt out of the SDK's telemetry (:func:`sdk_config_without_telemetry`), the SDK v2 notices of its own
doing quieted (:mod:`smddp_compat.estimators._sdk_notices`) and an upload that leaves secrets out
(:data:`smddp_compat.estimators.DEFAULT_SOURCE_EXCLUDES`). The reference of each: ``estimators/README.md``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
from collections.abc import Iterator
from typing import Any, Mapping, Sequence

from smddp_compat import contract
from smddp_compat.estimators._sdk_config_validation import check_each_configuration_once
from smddp_compat.estimators._sdk_notices import sdk_v2_notices_quieted

with sdk_v2_notices_quieted():  # the kit's own import of SDK v2: its notice is the kit's doing, not the user's
    from sagemaker.deprecations import renamed_kwargs
    from sagemaker.tensorflow import TensorFlow as _SdkTensorFlow
    from sagemaker.utils import name_from_base

    from smddp_compat.estimators import _local_job

from smddp_compat.estimators import _local_process
from smddp_compat.estimators._local_tuning import LocalTuningClient
from smddp_compat.estimators._distribution import DistributionPlan, plan_distribution
from smddp_compat.estimators._images import resolve_training_image
from smddp_compat.estimators._source_bundle import DEFAULT_SOURCE_EXCLUDES, stage_source
from smddp_compat.estimators._validation import (
    check_channel_names, check_entry_point, check_hyperparameters, check_instance_count, check_job_name,
    check_positive_int, check_region, check_role, _is_pipeline_variable, check_s3_uri, instance_spec, resolve_region,
    sagemaker_mlflow_config,
)
from smddp_compat.estimators.errors import ConfigurationError, JobError, raised_as_estimator_errors
from smddp_compat.image.cuda import check_image_for_instance_type
from smddp_compat.instance_types import is_local
from smddp_compat.local_mode.lifecycle import JobControl

check_each_configuration_once()  # SDK v2 re-checks an unchanged configuration on every lookup: once is enough

__all__ = ["TensorFlow", "LOCAL_PLACEHOLDER_ROLE", "SDK_V1_ARGUMENT_NAMES", "sdk_config_without_telemetry"]

logger = logging.getLogger(__name__)

#: Role given to the SDK for local jobs that name none (the SDK insists on one; nothing uses it locally).
LOCAL_PLACEHOLDER_ROLE = "arn:aws:iam::000000000000:role/smddp-compat-local"
#: Environment variable telling the job which smddp-compat distribution launched it.
DISTRIBUTION_ENV = "SMDDP_COMPAT_DISTRIBUTION"
_LOCAL_PROCESS_REGION = "us-east-1"
#: The base of the names a tuner gives a local_process estimator's jobs (SageMaker's, from its TensorFlow training
#: images' name).
LOCAL_BASE_JOB_NAME = "tensorflow-training"
#: The estimator's whole-number fields the SDK sends unchecked (seconds, GB), with an example for the fix.
_POSITIVE_INT_FIELDS = {"max_run": "max_run=86400", "max_wait": "max_wait=172800", "volume_size": "volume_size=30"}
#: The SDK v1 argument names SDK v2's TensorFlow estimator still accepts (old -> new). The SDK holds no table of
#: them: its constructors rename each with ``sagemaker.deprecations.renamed_kwargs``, in
#: ``sagemaker.estimator.EstimatorBase.__init__`` (the ``train_*`` names), ``sagemaker.estimator.Framework.__init__``
#: (``image_name``) and ``sagemaker.tensorflow.estimator.TensorFlow.__init__`` (``distributions``). This mirrors them.
SDK_V1_ARGUMENT_NAMES = {
    "train_instance_count": "instance_count",
    "train_instance_type": "instance_type",
    "train_max_run": "max_run",
    "train_use_spot_instances": "use_spot_instances",
    "train_max_wait": "max_wait",
    "train_volume_size": "volume_size",
    "train_volume_kms_key": "volume_kms_key",
    "image_name": "image_uri",
    "distributions": "distribution",
}


class TensorFlow(_SdkTensorFlow):
    """SageMaker's TensorFlow estimator with SMDDP on any TensorFlow version, DTensor, and local processes.

    Example:
        >>> from smddp_compat.estimators import TensorFlow  # the only line that changes  # doctest: +SKIP
        >>> est = TensorFlow(entry_point="train.py", role=role, instance_type="ml.p4d.24xlarge",
        ...                  instance_count=2, image_uri=image, framework_version="2.21",
        ...                  distribution={"smdistributed": {"dataparallel": {"enabled": True}}})
        >>> est.fit({"train": "s3://bucket/train"})  # doctest: +SKIP
    """

    def __init__(
        self,
        entry_point: str,
        *,
        distribution: Mapping[str, Any] | None = None,
        source_excludes: Sequence[str] = DEFAULT_SOURCE_EXCLUDES,
        region: str | None = None,
        mlflow: _local_process.MlflowSetting = None,
        **kwargs: Any,
    ) -> None:
        """Checks every field, then builds the SDK estimator.

        SDK v1 argument names (``train_instance_type``, ``distributions``, ... :data:`SDK_V1_ARGUMENT_NAMES`) are
        renamed first, by the SDK's own ``renamed_kwargs`` (its deprecation warning included; given with the new
        name too, the old name's value wins, as in the SDK), so every check below sees the new names.

        Args:
            entry_point: The training script (relative to ``source_dir`` when given), as in the SDK.
            distribution: As in the SDK, plus ``smdistributed`` on any version and ``dtensor`` (see
                :mod:`smddp_compat.estimators._distribution` for every key).
            source_excludes: Name patterns left out of the uploaded code (default: secrets, VCS, caches, venvs).
            region: The AWS region of the session the estimator makes when no ``sagemaker_session`` is given
                (default: the AWS configuration's). Not an SDK argument.
            mlflow: Where a ``local_process`` job is tracked as an MLflow run, as SageMaker's managed MLflow tracks a
                training job (:mod:`smddp_compat.local_mode.tracking`): ``MlflowSettings``, a tracking URI, or
                False (untracked); None (the default): tracked when ``MLFLOW_TRACKING_URI`` is set when ``fit()``
                runs (the experiment ``MLFLOW_EXPERIMENT_NAME``'s when set), as SDK v2's ``fit()`` reads it. A
                tuner's tuning job is then a run, each trial a run under it. For a job on SageMaker: the ARN of a
                SageMaker MLflow app or tracking server, or SageMaker's ``MlflowConfig`` itself (``MlflowResourceArn``,
                ``MlflowExperimentName``, ``MlflowRunName``), sent as the request's ``MlflowConfig`` (SageMaker's
                managed MLflow then tracks the job). Not an SDK argument.
            **kwargs: Every other argument of ``sagemaker.tensorflow.TensorFlow`` (``role``, ``instance_type``,
                ``instance_count``, ``framework_version``, ``py_version``, ``image_uri``, ``source_dir``,
                ``dependencies``, ``hyperparameters``, ``output_path``, ``max_run``, ``environment``, ...).
                ``model_dir`` (the script's ``--model_dir``) defaults to ``/opt/ml/model``, the host's model folder
                uploaded as ``model.tar.gz``, for every distribution: the SDK's ``s3://`` default for non-MPI jobs
                is no place TensorFlow 2.21 can save to (it has no S3 file system). ``model_dir=False`` sends none.

        Raises:
            ConfigurationError: An unknown instance type, a count < 1, a bad distribution, processes per host that
                do not fit the instance, a DTensor mesh that does not fill the devices, a missing entry point or
                source dir, hyperparameters that are not JSON-serialisable, a malformed role ARN, ``max_run``,
                ``max_wait`` or ``volume_size`` not a whole number >= 1, a malformed ``base_job_name``, an
                ``output_path`` that is not ``s3://`` (for SageMaker jobs), no training image for the framework
                version, an ``mlflow`` setting that is not one (a tracking URI for a SageMaker job, a malformed ARN), or (checked last) no region, or one SageMaker does not run in. Raised before any upload or
                AWS call.

        Warns:
            CpuImageWarning: A GPU instance type with an image without CUDA (every rank would train on the CPU),
                by :func:`smddp_compat.estimators.check_image_for_instance_type`'s rule; before any upload.
            LocalVersionWarning: A ``local_process`` job's ``framework_version`` or ``py_version`` differs from this
                machine's TensorFlow or Python, which run it.
        """
        kwargs = _renamed_sdk_v1_arguments({**kwargs, "distribution": distribution})
        distribution = kwargs.pop("distribution")
        if kwargs.get("instance_groups"):
            raise ConfigurationError(
                "instance_groups", kwargs["instance_groups"], "heterogeneous clusters are not supported",
                "use instance_type and instance_count",
            )
        instance_type = kwargs.get("instance_type")
        instance_count = check_instance_count(kwargs.get("instance_count", 1))
        kwargs["instance_count"] = instance_count
        spec = instance_spec(instance_type)
        source_dir = kwargs.get("source_dir")
        dependencies = list(kwargs.get("dependencies") or [])
        if kwargs.get("git_config"):
            raise ConfigurationError(
                "git_config", kwargs["git_config"], "is not supported by smddp-compat's estimator",
                "clone the repository yourself and pass source_dir",
            )
        check_entry_point(entry_point, source_dir, dependencies)
        hyperparameters = check_hyperparameters(
            kwargs.get("hyperparameters"), local_process=instance_type == "local_process"
        )
        kwargs["hyperparameters"] = hyperparameters
        if kwargs.get("model_dir") is None:  # the SDK's default (s3:// unless MPI) is no place the script can save to
            kwargs["model_dir"] = contract.CONTAINER_MODEL_DIR
        plan = plan_distribution(distribution, spec=spec, instance_count=instance_count)
        if isinstance(source_dir, str) and source_dir.startswith("s3://") and plan.ships_compat:
            raise ConfigurationError(
                "source_dir", source_dir,
                f"distribution {plan.kind!r} must add smddp-compat to the uploaded code, which an S3 source_dir "
                "does not allow", "pass a local source_dir",
            )
        role = check_role(kwargs.get("role"), required=not is_local(instance_type))  # type: ignore[arg-type]
        if role is None and is_local(instance_type):  # type: ignore[arg-type]
            kwargs["role"] = LOCAL_PLACEHOLDER_ROLE
        for field, example in _POSITIVE_INT_FIELDS.items():
            if kwargs.get(field) is not None and not _is_pipeline_variable(kwargs[field]):
                check_positive_int(kwargs[field], field, example)
        base_job_name = kwargs.get("base_job_name")
        if base_job_name is not None and not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9-]*", str(base_job_name)):
            # name_from_base() trims it and appends "-<timestamp>": its characters are what must be right.
            raise ConfigurationError(
                "base_job_name", base_job_name, "must start with a letter or digit and hold only letters, digits "
                "and '-' (it starts SageMaker job names)", "use e.g. base_job_name='mnist-smddp'",
            )
        if kwargs.get("output_path") is not None and not is_local(instance_type):  # type: ignore[arg-type]
            check_s3_uri(kwargs["output_path"], "output_path")
        sagemaker_mlflow: dict[str, str] | None = None
        if mlflow is not None and mlflow is not False:
            if instance_type == "local_process":
                _local_process.mlflow_settings(mlflow)  # checked now; the environment is read by fit()
            else:
                sagemaker_mlflow = sagemaker_mlflow_config(mlflow, instance_type)
        session = kwargs.get("sagemaker_session")
        if session is not None:
            job_region = getattr(session, "boto_region_name", None)
            if region is not None and job_region is not None and region != job_region:
                raise ConfigurationError(
                    "region", region, f"differs from the region of sagemaker_session ({job_region!r})",
                    "pass one of the two",
                )
        elif instance_type == "local_process":
            job_region = None if region is None else check_region(region)
        else:
            job_region = resolve_region(region)  # last: a missing region hides no mistake of the job itself
        environment = dict(kwargs.get("environment") or {})
        if plan.strategy.sdk_key:  # a distribution was asked for
            environment.setdefault(DISTRIBUTION_ENV, plan.kind)
        kwargs["environment"] = environment or None

        image = resolve_training_image(
            image_uri=kwargs.get("image_uri"),
            framework_version=kwargs.get("framework_version"),
            py_version=kwargs.get("py_version"),
            instance_type=instance_type,  # type: ignore[arg-type]
            region=job_region,
        )
        if instance_type == "local_process":  # this machine's TensorFlow and Python run it, whatever was asked
            _local_process.warn_of_other_versions(kwargs.get("framework_version"), kwargs.get("py_version"),
                                                  stacklevel=2)
        if image is not None:
            kwargs["image_uri"] = image
            # A GPU type with an image without CUDA: every rank on the CPU. Said now, before any upload.
            check_image_for_instance_type(image, instance_type, instance_count, stacklevel=2)  # type: ignore[arg-type]
        if session is None:  # every check passed: only now the SDK's session and its AWS clients
            if instance_type == "local_process":
                kwargs["sagemaker_session"] = _offline_session(job_region)
            else:
                kwargs["sagemaker_session"] = _kit_session(job_region, instance_type)  # type: ignore[arg-type]

        self.distribution_plan: DistributionPlan = plan
        self.compat_distribution: dict[str, Any] = plan.original
        self.source_excludes: tuple[str, ...] = tuple(source_excludes)
        self.mlflow: _local_process.MlflowSetting | Mapping[str, str] = mlflow
        self.sagemaker_mlflow_config = sagemaker_mlflow
        local_process = instance_type == "local_process"
        # The SDK's own distribution checks parse instance types as ml.<family>.<size>; local_process jobs never
        # reach the SDK's launch, so it gets no distribution and the plan is kept beside it.
        # The SDK refuses smdistributed after TF 2.11 in its constructor, but builds SMDDP's hyperparameters from
        # self.distribution on any version: the distribution is set after the constructor's checks.
        set_after = local_process or plan.strategy.distribution_set_after_sdk_checks
        with sdk_v2_notices_quieted():  # the SDK's "TensorFlow is part of SDK v2" notice, caused by this subclass
            super().__init__(
                entry_point=entry_point, distribution=None if set_after else plan.sdk_distribution, **kwargs
            )
        if set_after:
            self.distribution = plan.sdk_distribution or {}
        if local_process and session is None:  # the kit's offline session: SDK v2's tuner runs its trials here
            self.sagemaker_session.sagemaker_client = LocalTuningClient(self.sagemaker_session.sagemaker_client, self)

    def hyperparameters(self) -> dict[str, str]:
        """The SDK's hyperparameters, plus ``sagemaker_mpi_num_of_processes_per_host`` for an SMDDP job that set
        ``processes_per_host`` (the toolkit's SMDDP launch reads it)."""
        hyperparameters = super().hyperparameters()
        hyperparameters.update(self.distribution_plan.hyperparameters)
        return hyperparameters

    # -- training --------------------------------------------------------------------------------------------------

    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: str = "All",
        job_name: str | None = None,
        experiment_config: dict[str, str] | None = None,
    ) -> Any:
        """Starts the training job, as the SDK does, with the staged code.

        For ``instance_type="local_process"`` the job runs here through local_mode and its result (status,
        artifacts, failure reason) is returned; ``wait`` and ``logs`` are ignored (the run streams its output). Its
        script gets the arguments SageMaker would give it, ``--model_dir`` included, paths in the host's own tree
        (:func:`~smddp_compat.estimators._local_process.script_hyperparameters`).

        Args:
            inputs: Channels, as in the SDK (``s3://`` URIs, ``TrainingInput``, ``file://`` in local modes; plain
                local paths with ``local_process``). The other arguments are the SDK's.

        Returns:
            What the SDK's ``fit`` returns, or local_mode's ``JobResult`` for ``local_process`` (also kept as
            ``self.local_result``; ``result.artifacts.model`` is the model.tar.gz). After a ``local_process`` job,
            completed or not, ``latest_training_job`` is its :class:`~smddp_compat.estimators._local_job.LocalTrainingJob`
            and its record is saved beside its artifacts for :meth:`attach`.

        Raises:
            JobError: A ``local_process`` job that failed or was stopped (the reason names the failed process).
        """
        if job_name is not None:
            check_job_name(job_name)  # before the code is uploaded under <bucket>/<job_name>/source/
        check_channel_names(inputs)  # '.' and '..' pass SageMaker's pattern and name input/data itself or input
        if self.instance_type == "local_process":
            return self._fit_local_process(inputs, job_name)
        with self._mlflow_config_sent():
            if isinstance(self.source_dir, str) and self.source_dir.startswith("s3://"):
                return super().fit(inputs, wait, logs, job_name, experiment_config)
            staged = stage_source(self.entry_point, self.source_dir, self.dependencies, self.distribution_plan,
                                  excludes=self.source_excludes)
            saved = (self.entry_point, self.source_dir, self.dependencies)
            self.entry_point, self.source_dir, self.dependencies = staged.entry_point, staged.directory, []
            try:
                return super().fit(inputs, wait, logs, job_name, experiment_config)
            finally:
                self.entry_point, self.source_dir, self.dependencies = saved
                staged.cleanup()

    @contextlib.contextmanager
    def _mlflow_config_sent(self) -> Iterator[None]:
        """Within the block, the CreateTrainingJob request this estimator's session sends carries
        :attr:`sagemaker_mlflow_config` as ``MlflowConfig`` (SDK v2 has no argument for it): added by a botocore
        handler of the request's parameters, the client's own extension point, removed when the block ends."""
        config = self.sagemaker_mlflow_config
        client_meta = getattr(getattr(self.sagemaker_session, "sagemaker_client", None), "meta", None)
        if config is None or client_meta is None:
            yield
            return

        def add_config(params: dict[str, Any], **_: Any) -> None:
            params["MlflowConfig"] = dict(config)

        event, handler_id = "provide-client-params.sagemaker.CreateTrainingJob", f"smddp-mlflow-{id(self)}"
        client_meta.events.register(event, add_config, unique_id=handler_id)
        try:
            yield
        finally:
            client_meta.events.unregister(event, unique_id=handler_id)

    def _prepare_for_training(self, job_name: str | None = None) -> None:
        """The SDK's preparation; a ``local_process`` job (a tuner prepares one per tuning job) stages nothing: it
        runs from ``source_dir`` on this machine.

        Raises:
            ConfigurationError: A ``local_process`` estimator given a session of its own (its tuning job would go to
                SageMaker, which runs no local_process job).
        """
        if self.instance_type != "local_process":
            super()._prepare_for_training(job_name)
            return
        if not isinstance(getattr(self.sagemaker_session, "sagemaker_client", None), LocalTuningClient):
            raise ConfigurationError(
                "sagemaker_session", self.sagemaker_session, "is not the session smddp-compat gives a local_process "
                "estimator: its tuning job would go to SageMaker", "leave sagemaker_session out to tune here",
            )
        self._current_job_name = job_name or name_from_base(self.base_job_name or LOCAL_BASE_JOB_NAME)

    def training_image_uri(self) -> str:
        """The SDK's image; for ``local_process`` the ``image_uri`` given, else ``tensorflow-training`` (this
        machine's environment runs the job: no image is looked up; a tuner names its jobs after it, as SageMaker's
        TensorFlow training images name them)."""
        if self.instance_type == "local_process":
            return self.image_uri or LOCAL_BASE_JOB_NAME
        return super().training_image_uri()

    def _fit_local_process(self, inputs: Any, job_name: str | None, control: JobControl | None = None) -> Any:
        self.latest_training_job = None
        with raised_as_estimator_errors():  # local_mode's errors leave fit() as the estimators' own
            spec = _local_process.build_job_spec(
                entry_point=self.entry_point,
                source_dir=self.source_dir,
                instance_count=self.instance_count,
                plan=self.distribution_plan,
                hyperparameters=self._hyperparameters,
                inputs=inputs,
                output_path=self.output_path,
                max_run=self.max_run,
                job_name=job_name or (name_from_base(self.base_job_name) if self.base_job_name else None),
                environment=self.environment,
                checkpoint_local_path=self.checkpoint_local_path,
                checkpoint_s3_uri=self.checkpoint_s3_uri,
                metric_definitions=self.metric_definitions,
                model_dir=self.model_dir,
                mlflow=_local_process.mlflow_settings(self.mlflow),
            )
            self._current_job_name = spec.job_name
            self.local_result = _local_process.run_job(spec, control=control)
        self.latest_training_job = self._local_training_job(spec, self.local_result)
        with raised_as_estimator_errors():
            # A failed job raises local_mode's JobFailedError (rank, host, exit code), re-raised as a JobError.
            self.local_result.raise_for_status()
        return self.local_result

    def _local_training_job(self, spec: Any, result: Any) -> Any:
        """The ended local job as ``latest_training_job``; its record is saved beside its artifacts (a record that
        cannot be written is warned about: the job's own result stands, only ``attach`` will not find it)."""
        record = _local_job.job_record(
            result, region=self.sagemaker_session.boto_region_name, role=self.role, image_uri=self.image_uri,
            volume_size=self.volume_size, estimator=self._attach_settings(),
            output_path=spec.output_path if "://" in spec.output_path else os.path.abspath(spec.output_path),
        )
        try:
            _local_job.save_record(spec.output_path, spec.job_name, record)
        except Exception as exc:  # noqa: BLE001 - a full disk, S3 refused: the job's result stands
            logger.warning("the record of job %s was not saved (%s): attach() will not find this job",
                           spec.job_name, exc)
        return _local_job.LocalTrainingJob(self.sagemaker_session, record)

    def _attach_settings(self) -> dict[str, Any]:
        """The constructor arguments :meth:`attach` rebuilds this estimator with (local paths made absolute)."""
        source_dir = self.source_dir
        entry_point = self.entry_point
        if source_dir and not str(source_dir).startswith("s3://"):
            source_dir = os.path.abspath(source_dir)
        elif not source_dir:
            entry_point = os.path.abspath(entry_point)
        settings: dict[str, Any] = {
            "entry_point": entry_point,
            "source_dir": source_dir,
            "dependencies": [os.path.abspath(d) for d in self.dependencies or []],
            "instance_count": self.instance_count,
            "hyperparameters": dict(self._hyperparameters or {}),
            "model_dir": self.model_dir,
            "distribution": dict(self.compat_distribution) or None,
            "framework_version": self.framework_version,
            "py_version": self.py_version,
            "metric_definitions": self.metric_definitions,
            "environment": {k: v for k, v in (self.environment or {}).items() if k != DISTRIBUTION_ENV} or None,
            "max_run": self.max_run,
            "base_job_name": self.base_job_name,
            "checkpoint_local_path": self.checkpoint_local_path,
            "source_excludes": list(self.source_excludes),
        }
        if self.role != LOCAL_PLACEHOLDER_ROLE:
            settings["role"] = self.role
        return settings

    # -- the job after fit(), as the SDK shows it ----------------------------------------------------------------

    def _local_job(self, what: str) -> Any:
        job = self.latest_training_job
        if not isinstance(job, _local_job.LocalTrainingJob):
            raise _local_job.no_job_error(what)
        return job

    @property
    def model_data(self) -> Any:
        """Where the model artifact of the latest job is (the SDK's ``model_data``): for ``local_process``, the
        absolute path (or ``s3://`` URI, for an S3 ``output_path``) of its ``model.tar.gz``.

        Raises:
            EstimatorError: A ``local_process`` estimator with no job yet (fit() or attach() first).
            JobError: The job stored no model artifact.
        """
        if self.instance_type != "local_process":
            return super().model_data
        job = self._local_job("model_data")
        description = job.describe()
        model = description.get("ModelArtifacts", {}).get("S3ModelArtifacts")
        if not model:
            raise JobError(job.name, f"training job {job.name!r} stored no model artifact "
                           f"(status {description['TrainingJobStatus']})", status=description["TrainingJobStatus"])
        return model

    def logs(self) -> None:
        """Prints the latest job's logs (the SDK's ``logs()``): for ``local_process``, each host's log file as
        local mode wrote it under ``<output_path>/<job_name>/logs/``.

        Raises:
            EstimatorError: A ``local_process`` estimator with no job yet.
            JobError: A log cannot be read.
        """
        if self.instance_type != "local_process":
            return super().logs()
        self._local_job("logs()").print_logs()
        return None

    @property
    def training_job_analytics(self) -> Any:
        """The SDK's ``TrainingJobAnalytics`` of the latest job; for ``local_process`` a
        :class:`~smddp_compat.estimators._local_job.LocalTrainingJobAnalytics`, whose ``dataframe()`` has the
        columns ``timestamp``, ``metric_name``, ``value`` of every value the job's ``metric_definitions`` found
        in its processes' output.

        Raises:
            EstimatorError: A ``local_process`` estimator with no job yet.
        """
        if self.instance_type != "local_process":
            return super().training_job_analytics
        return _local_job.LocalTrainingJobAnalytics(self._local_job("training_job_analytics"))

    @classmethod
    def attach(
        cls,
        training_job_name: str,
        sagemaker_session: Any = None,
        model_channel_name: str = "model",
        *,
        local_output: str | None = None,
    ) -> "TensorFlow":
        """The SDK's ``attach``; with ``local_output``, an estimator bound to a ``local_process`` job that ran
        before (in this process or another), read from the record its ``fit()`` saved under
        ``<local_output>/<training_job_name>/``.

        The attached estimator has the job's settings (entry point, hyperparameters, distribution, metric
        definitions...), ``instance_type="local_process"`` and ``output_path=local_output``; its
        ``latest_training_job``, ``model_data``, ``logs()`` and ``training_job_analytics`` are the job's. A failed
        or stopped job attaches too (its description says why; the SDK's attach would raise). Nothing is run.

        Args:
            training_job_name: The job's name.
            sagemaker_session: As in the SDK (None: a SageMaker job's default session; an offline one for a local
                job).
            model_channel_name: As in the SDK (SageMaker jobs only).
            local_output: The ``output_path`` the ``local_process`` job ran with (a folder or ``s3://``; the
                default was ``./smddp_local_output``). None: a SageMaker job, attached by the SDK.

        Raises:
            ConfigurationError: No record of that job under ``local_output``, a malformed job name, or a setting
                of the job that no longer holds (e.g. its entry point was moved): the message names it.
        """
        client = getattr(sagemaker_session, "sagemaker_client", None)
        if local_output is None and isinstance(client, LocalTuningClient):  # a trial of a tuning job run here
            local_output = client.local_output_of(training_job_name)
        if local_output is None:
            return super().attach(training_job_name, sagemaker_session, model_channel_name)
        with raised_as_estimator_errors():
            record = _local_job.load_record(local_output, training_job_name)
        try:
            estimator = cls(instance_type="local_process", output_path=local_output,
                            sagemaker_session=sagemaker_session, **record["estimator"])
        except ConfigurationError as exc:
            raise ConfigurationError(
                exc.field, exc.value, f"{exc.problem} (a setting of the attached job {training_job_name!r})", exc.fix
            ) from exc
        estimator.latest_training_job = _local_job.LocalTrainingJob(estimator.sagemaker_session, record)
        estimator._current_job_name = training_job_name
        estimator.local_result = None
        return estimator


def _renamed_sdk_v1_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with every SDK v1 name renamed by the SDK's ``renamed_kwargs`` (which warns) and then dropped."""
    for old, new in SDK_V1_ARGUMENT_NAMES.items():
        if old in kwargs:
            renamed_kwargs(old, new, kwargs.get(new), kwargs)
            del kwargs[old]
    return kwargs


def sdk_config_without_telemetry(boto_session: Any = None) -> dict[str, Any]:
    """The SageMaker SDK's configuration as the SDK itself loads it, with its telemetry opted out.

    The SDK sends a telemetry request (an STS call, then an HTTPS GET to an AWS bucket) from every ``fit`` unless
    its config sets ``SageMaker.PythonSDK.Modules.TelemetryOptOut``. The user's own files (the admin and user
    config, ``SAGEMAKER_ADMIN_CONFIG_OVERRIDE`` / ``SAGEMAKER_USER_CONFIG_OVERRIDE``) are loaded and kept: only
    a missing ``TelemetryOptOut`` is set to true. One the user wrote (``false`` included) is left as written.
    Nothing on disk or in the environment changes. Returns a config dict for
    ``sagemaker.Session(sagemaker_config=...)``; ``boto_session`` reads an S3-hosted config (None: the SDK's default).
    """
    from sagemaker.config import load_sagemaker_config

    s3_resource = boto_session.resource("s3") if boto_session is not None else None
    config = copy.deepcopy(load_sagemaker_config(s3_resource=s3_resource) or {})
    config.setdefault("SchemaVersion", "1.0")
    modules = config.setdefault("SageMaker", {}).setdefault("PythonSDK", {}).setdefault("Modules", {})
    modules.setdefault("TelemetryOptOut", True)
    return config


def _kit_session(region: str, instance_type: str) -> Any:
    """The SDK session of a job that named none: in ``region``, telemetry opted out (a ``LocalSession`` for the
    SDK's Docker local mode)."""
    import boto3
    import sagemaker

    boto_session = boto3.Session(region_name=region)
    config = sdk_config_without_telemetry(boto_session)
    if instance_type in ("local", "local_gpu"):
        from sagemaker.local import LocalSession

        return LocalSession(boto_session=boto_session, sagemaker_config=config)
    return sagemaker.Session(boto_session=boto_session, sagemaker_config=config)


def _offline_session(region: str | None = None) -> Any:
    """A SageMaker session for local_process jobs: a regional boto3 session (``region``, else the AWS
    configuration's, else us-east-1), telemetry opted out; no AWS call is ever made with it."""
    import boto3
    import sagemaker

    boto_session = boto3.Session(region_name=region) if region else boto3.Session()
    if boto_session.region_name is None:
        boto_session = boto3.Session(region_name=_LOCAL_PROCESS_REGION)
    return sagemaker.Session(boto_session=boto_session, sagemaker_config=sdk_config_without_telemetry(boto_session))
