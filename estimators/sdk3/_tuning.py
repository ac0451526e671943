"""SDK v3's ``HyperparameterTuner`` over a ``ModelTrainer``, its trials run on this machine (no Docker, no AWS).

:func:`tune_local` builds the tuning job as the tuner's ``tune()`` would request it (its name, configuration,
static hyperparameters and metric definitions, by the tuner's own code), runs it with local tuning
(:func:`smddp_compat.estimators.run_tuning_job`: Random, Grid or Bayesian, ``max_parallel_jobs`` trials at once),
each trial the trainer's job with the trial's hyperparameters run as :func:`~.train_local` runs it, then gives the
tuner the view of the finished tuning job SageMaker gives: ``tuner.latest_tuning_job`` is a
``sagemaker.core.resources.HyperParameterTuningJob`` that answers ``refresh()`` and ``wait()`` here, so
``tuner.best_training_job()`` and ``tuner.describe()`` work as after a SageMaker tuning job, and so does
``tuner.analytics().dataframe()``, read here (the trainer's own session is left as it was). Tracked in MLflow
(``mlflow=``, or ``MLFLOW_TRACKING_URI``), the tuning job is a run and each trial a run under it.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Mapping, Sequence
from typing import IO, Any

import boto3
from pydantic import PrivateAttr
from sagemaker.core.analytics import HyperparameterTuningJobAnalytics
from sagemaker.core.helper.session_helper import Session
from sagemaker.core.resources import HyperParameterTuningJob
from sagemaker.core.shapes import MetricDefinition
from sagemaker.core.utils.code_injection.codec import transform
from sagemaker.core.utils.utils import serialize

from smddp_compat.estimators import (
    DEFAULT_LOCAL_OUTPUT, ConfigurationError, LocalTuningClient, MlflowSetting, mlflow_settings, run_job, run_tuning_job)
from smddp_compat.estimators.sdk3._local import build_local_spec, local_job_description, plan_of
from smddp_compat.local_mode.environment import default_region
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.tracking import MlflowSettings
from smddp_compat.local_mode.tuning import TuningJob
from smddp_compat.local_mode.name_values import decode_value

__all__ = ["tune_local"]


class _LocalTuningJobView(HyperParameterTuningJob):
    """SDK v3's view of a tuning job run here: ``refresh()`` reads it again, ``wait()`` returns (it has ended)."""

    _local: TuningJob = PrivateAttr()

    @classmethod
    def of(cls, job: TuningJob) -> _LocalTuningJobView:
        view = cls(**transform(job.describe(), "DescribeHyperParameterTuningJobResponse"))
        view._local = job
        return view

    def refresh(self) -> _LocalTuningJobView:  # type: ignore[override]
        fresh = transform(self._local.describe(), "DescribeHyperParameterTuningJobResponse")
        for name, value in fresh.items():
            setattr(self, name, value)
        return self

    def wait(self, *_: Any, **__: Any) -> None:  # type: ignore[override]
        """The tuning job ended before this view was made."""


#: The role a trial's definition names when the trainer has none (a ``Mode.LOCAL_CONTAINER`` trainer): local runs
#: assume no role, and SDK v3's view of a tuning job requires one.
LOCAL_ROLE_ARN = "arn:aws:iam::000000000000:role/smddp-local"


def _trial_trainer(trainer: Any, hyperparameters: Mapping[str, Any], metrics: Sequence[Mapping[str, str]]) -> Any:
    """A copy of ``trainer`` with ``hyperparameters`` (as the toolkit decodes them) and the tuner's metrics."""
    trial = copy.copy(trainer)
    trial.hyperparameters = {key: decode_value(str(value)) for key, value in hyperparameters.items()}
    trial._metric_definitions = [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in metrics]
    return trial


def _request(tuner: Any, job_name: str | None, input_data_config: Sequence[Any] | None,
             output_path: str) -> dict[str, Any]:
    """The CreateHyperParameterTuningJob request ``tuner.tune()`` would send, with the trials' local job as its
    definition (checked as a trial's job is: a trainer local runs cannot run is refused before any trial)."""
    trainer = tuner.model_trainer
    # The tuner's own preparation (its job-name rule, static hyperparameters), without the tags step, which reads
    # the trainer's AWS session.
    tuner._prepare_job_name_for_tuning(job_name=job_name)
    tuner._prepare_static_hyperparameters_for_tuning()
    tuner._prepare_auto_parameters_for_tuning()
    name = tuner._current_job_name
    metrics = [{"Name": d["Name"], "Regex": d["Regex"]} for d in tuner.metric_definitions or ()]
    static = dict(tuner.static_hyperparameters or {})
    job = build_local_spec(_trial_trainer(trainer, static, metrics), input_data_config, output_path=output_path,
                           job_name=name, mlflow=False).request_params("local_process")
    definition = {
        "StaticHyperParameters": static,
        "AlgorithmSpecification": {"TrainingImage": trainer.training_image, "TrainingInputMode": "File",
                                   "MetricDefinitions": metrics},
        "RoleArn": trainer.role or LOCAL_ROLE_ARN,
        **{key: job[key] for key in ("InputDataConfig", "OutputDataConfig", "ResourceConfig", "StoppingCondition")},
    }
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": serialize(tuner._build_tuning_job_config()),
        "TrainingJobDefinition": definition,
    }
    if tuner.warm_start_config is not None:
        request["WarmStartConfig"] = serialize(tuner.warm_start_config)
    if tuner.autotune:
        request["Autotune"] = {"Mode": "Enabled"}
    return request


def _answering_client(region: str) -> LocalTuningClient:
    """A SageMaker client that answers for the tuning jobs run here (the tuner's analytics read through one); its
    other calls would go to ``region``'s SageMaker, and none is made."""
    return LocalTuningClient(boto3.Session(region_name=region).client("sagemaker"))


def tune_local(
    tuner: Any,
    input_data_config: Sequence[Any] | None = None,
    *,
    output_path: str | None = None,
    job_name: str | None = None,
    logs: bool = False,
    stream: IO[str] | None = None,
    mlflow: MlflowSetting = None,
) -> Any:
    """Runs ``tuner``'s tuning job on this machine: every trial the tuner's ``ModelTrainer`` job, with the trial's
    hyperparameters, run by local mode's process backend as :func:`~.train_local` runs it.

    Args:
        tuner: A ``sagemaker.train.tuner.HyperparameterTuner`` over one ``ModelTrainer`` (whose ``source_code``
            has an ``entry_script``), with ``metric_definitions`` that include its objective metric.
        input_data_config: The trials' channels, as :func:`~.train_local` takes them.
        output_path: Folder that receives ``<tuning job>/`` with every trial's ``<trial>/`` (logs, model, output,
            metrics) and ``tuning-job.json``. Default: ``./smddp_local_output``.
        job_name: The tuning job's name (default: the tuner's, from the image and a time stamp).
        logs: Print the trials' prefixed output as they run (kept with each trial either way).
        stream: Where the progress lines (one per ended trial) and the logs go (default: standard output).
        mlflow: Where the tuning job is tracked as an MLflow run, each trial a run under it, as
            :func:`~.train_local` takes it (None: when ``MLFLOW_TRACKING_URI`` is set).

    Returns:
        The ended tuning job as a ``sagemaker.core.resources.HyperParameterTuningJob`` (also
        ``tuner.latest_tuning_job``): status, ``best_training_job``, ``training_job_status_counters``,
        ``objective_status_counters``.

    Raises:
        ConfigurationError: What local tuning cannot run (several trainers, autotune, an objective without a
            metric definition, a strategy it has not, a warm start SageMaker refuses) or a trainer local runs cannot
            express.
        TrackingError: The MLflow server cannot be reached (no trial started), unless the settings allow an
            untracked tuning job.
    """
    trainer = tuner.model_trainer
    if trainer is None:
        raise ConfigurationError("model_trainer_dict", sorted(tuner.model_trainer_dict or ()),
                                 "several ModelTrainers (HyperparameterTuner.create) are not tuned locally",
                                 "tune one ModelTrainer: HyperparameterTuner(model_trainer, ...)")
    request = _request(tuner, job_name, input_data_config, output_path or DEFAULT_LOCAL_OUTPUT)
    name = request["HyperParameterTuningJobName"]
    folder = os.path.abspath(os.path.join(output_path or DEFAULT_LOCAL_OUTPUT, name))
    region = trainer.sagemaker_session.boto_region_name if trainer.sagemaker_session is not None else \
        default_region()
    metrics = request["TrainingJobDefinition"]["AlgorithmSpecification"]["MetricDefinitions"]

    tracking = mlflow_settings(mlflow)

    def run_trial(trial_name: str, hyperparameters: Mapping[str, str], control: JobControl,
                  trial_tracking: MlflowSettings | None) -> Mapping[str, Any]:
        trial = _trial_trainer(trainer, hyperparameters, metrics)
        spec = build_local_spec(trial, input_data_config, output_path=folder, job_name=trial_name,
                                mlflow=trial_tracking or False)
        with contextlib.ExitStack() as stack:
            quiet = None if logs else stack.enter_context(open(os.devnull, "w"))
            result = run_job(spec, stream=quiet or stream, control=control)
        return local_job_description(result, trial)

    client = _answering_client(region)
    processes = (trainer.compute.instance_count or 1) * plan_of(trainer).processes_per_host
    job = run_tuning_job(request, run_trial, folder=folder, region=region, processes_per_trial=processes,
                         stream=stream, created=client.add, mlflow=tracking)
    view = _LocalTuningJobView.of(job)
    # The tuner's analytics read this tuning job through a session of their own: the trainer keeps its session (a
    # Mode.LOCAL_CONTAINER trainer has none, and must not gain an AWS one).
    session = Session(boto_session=boto3.Session(region_name=region), sagemaker_client=client)
    tuner.analytics = lambda: HyperparameterTuningJobAnalytics(job.name, session)
    tuner.latest_tuning_job = view
    return view
