"""SageMaker's hyperparameter tuning API answered on this machine (:mod:`smddp_compat.local_mode.tuning` runs the
search), for SDK v2's ``HyperparameterTuner`` over a ``local_process`` estimator and SDK v3's over a ``ModelTrainer``
(``smddp_compat.estimators.sdk3.tune_local``).

:func:`run_tuning_job` runs a CreateHyperParameterTuningJob request here, each trial a local job given by the caller,
kept under ``<output>/<tuning job>/<trial>/`` (logs, model, metrics, record), with the tuning job's own description
beside them (``tuning-job.json``). The SDKs' tuners read a tuning job through their session's ``sagemaker_client``:
``describe_hyper_parameter_tuning_job`` (``describe``, ``wait``, ``best_training_job``, analytics) and
``list_training_jobs_for_hyper_parameter_tuning_job`` (``analytics().dataframe()``); a :class:`LocalTuningClient` in
front of that client answers both for the tuning jobs run here and passes every other call on. For SDK v2 it also
takes ``create_hyper_parameter_tuning_job`` (``tuner.fit``) and runs it with the ``local_process`` estimator; it
returns when the tuning job has ended (``wait=False`` too: the trials run in this process).

A tuning job given MLflow settings is an MLflow run, whichever door started it (``smddp tune --mlflow``, SDK v2's
tuner over an estimator tracked in MLflow, SDK v3's ``tune_local(..., mlflow=...)``): :func:`run_tuning_job` makes
it before the first trial (named as the tuning job; tagged with its strategy and objective), gives every trial the
settings of a run under it (``mlflow.parentRunId``), and ends it with each trial's objective as a series, the best
trial and its run as tags, the trials stopped early tagged so, and the tuning job's status.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from smddp_compat.estimators._local_process import DEFAULT_LOCAL_OUTPUT, channel_uri, mlflow_settings
from smddp_compat.estimators.errors import ConfigurationError, JobError
from smddp_compat.job_files import read_job_file
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.tracking import MlflowSettings, TrackedRun
from smddp_compat.local_mode.tuning import ParentTuningJob, TuningJob, tuning_job_arn
from smddp_compat.local_mode.name_values import decode_value

__all__ = ["LocalTuningClient", "run_tuning_job", "trial_inputs", "TrackedTrialRunner", "DESCRIPTION_FILE",
           "TRAINING_JOBS_FILE", "CHART_FILE"]

#: Runs one trial of :func:`run_tuning_job`, given its name, its hyperparameters, its control and where its job is
#: tracked in MLflow (a run under the tuning job's; None: the trial is not tracked), and returns its
#: DescribeTrainingJob.
TrackedTrialRunner = Callable[[str, Mapping[str, str], JobControl, MlflowSettings | None], Mapping[str, Any]]

#: Beside a tuning job's trials: its DescribeHyperParameterTuningJob answer, and ListTrainingJobsForHyperParameter-
#: TuningJob's (every trial: what a warm start from it learns).
DESCRIPTION_FILE = "tuning-job.json"
TRAINING_JOBS_FILE = "training-jobs.json"
#: Beside them: the objective of each trial and the best so far.
CHART_FILE = "tuning.png"
_PARENT_FILE_LIMIT = 64 << 20


def trial_inputs(definition: Mapping[str, Any]) -> dict[str, str] | None:
    """The channels of a tuning request's ``TrainingJobDefinition`` as the estimator's ``fit`` takes them (channel ->
    ``file://`` or ``s3://`` URI), or None when it has none."""
    channels = {channel["ChannelName"]: channel_uri(channel) for channel in definition.get("InputDataConfig") or []}
    return channels or None


def run_tuning_job(request: Mapping[str, Any], run_trial: TrackedTrialRunner, *, folder: str, region: str,
                   processes_per_trial: int, stream: IO[str] | None = None,
                   created: Callable[[TuningJob], None] | None = None, mlflow: MlflowSettings | None = None,
                   backend: str = "process") -> TuningJob:
    """Runs a CreateHyperParameterTuningJob request here to its end and writes its description to
    ``folder/tuning-job.json``, its trials to ``folder/training-jobs.json`` and a chart of their objective to
    ``folder/tuning.png``, then prints the trials' table on ``stream`` (all of it also when it was interrupted). A
    warm start's parents are read from their folders beside ``folder``. With ``mlflow``, the tuning job is an MLflow
    run and each trial a run under it (see the module's docstring); what could not be sent at the end is kept in
    ``folder``.

    Args:
        request: The request (one ``TrainingJobDefinition``).
        run_trial: Runs one trial (:data:`TrackedTrialRunner`) and returns its DescribeTrainingJob.
        folder: The tuning job's folder (its trials' folders go there too).
        region: The region its ARNs name.
        processes_per_trial: How many processes one trial starts (caps the trials run at once).
        stream: Where the progress lines go (None: standard output).
        created: Called with the tuning job before its first trial starts (to answer for it while it runs).
        mlflow: Where the tuning job is tracked (its run named as the tuning job unless the settings name one), or
            None (untracked; its trials too).
        backend: The trials' backend (``process`` or ``docker``), a tag of the tuning job's run.

    Raises:
        JobError: Several training job definitions (``HyperparameterTuner.create``).
        ConfigurationError: A request local tuning cannot run (:class:`~smddp_compat.local_mode.tuning.TuningJob`).
        TrackingError: The MLflow server cannot be reached (no trial started), unless the settings allow an
            untracked tuning job.
    """
    name = request["HyperParameterTuningJobName"]
    if "TrainingJobDefinitions" in request:
        raise JobError(f"tuning job {name}: several training job definitions (HyperparameterTuner.create) are not "
                       "run locally; tune one estimator or ModelTrainer")
    job = TuningJob(request, region=region, processes_per_trial=processes_per_trial,
                    parents=_parents(request, os.path.dirname(folder)))
    if os.path.lexists(os.path.join(folder, DESCRIPTION_FILE)):  # SageMaker refuses a tuning job name in use
        raise ConfigurationError("job_name", name, f"a tuning job of that name is already in {folder}",
                                 "give the tuning job another name (job_name=...), or another output path")
    printed = stream if stream is not None else sys.stdout

    def say(line: str) -> None:
        printed.write(f"[tuning {name}] {line}\n")
        printed.flush()

    tracked = _tuning_run(request, mlflow, backend, say) if mlflow is not None else None
    trial_settings = tracked.trial_settings() if tracked is not None else None
    trial_runs: dict[str, str] = {}  # trial -> its run

    def tracked_trial(trial_name: str, hyperparameters: Mapping[str, str], control: JobControl) -> Mapping[str, Any]:
        described = run_trial(trial_name, hyperparameters, control, trial_settings)
        if described.get("MlflowDetails"):
            trial_runs[trial_name] = described["MlflowDetails"]["MlflowRunId"]
        return described

    if created is not None:
        created(job)
    try:
        job.run(tracked_trial, stream)
    finally:
        os.makedirs(folder, exist_ok=True)
        for file_name, answer in ((DESCRIPTION_FILE, job.describe()),
                                  (TRAINING_JOBS_FILE, {"TrainingJobSummaries": job.training_job_summaries()})):
            with open(os.path.join(folder, file_name), "w", encoding="utf-8") as out:
                json.dump(answer, out, indent=2, default=str)
        chart = os.path.join(folder, CHART_FILE)
        charted = job.write_chart(chart)
        printed.write(job.table(folder) + (f"chart: {chart}\n" if charted else ""))
        printed.flush()
        if tracked is not None:  # interrupted too: the run ends Stopped (KILLED) with the trials that ended
            tracked.finish_tuning(described=job.describe(), trials=job.training_job_summaries(),
                                  trial_runs=trial_runs, stopped_early=list(job.stopped_early()),
                                  pending_dir=Path(folder), say=say)
    return job


def _tuning_run(request: Mapping[str, Any], settings: MlflowSettings, backend: str,
                say: Callable[[str], None]) -> TrackedRun | None:
    """The tuning job's MLflow run (None: the server cannot be reached and the settings allow that, said): named as
    the tuning job unless the settings name it, its params the static hyperparameters, its tags the tuning job's
    name, strategy, objective and the trials' backend.

    Raises:
        TrackingError: The server cannot be reached.
    """
    config = request["HyperParameterTuningJobConfig"]
    objective = config["HyperParameterTuningJobObjective"]
    name = request["HyperParameterTuningJobName"]
    return TrackedRun.start(
        dataclasses.replace(settings, run_name=settings.run_name or name), job_name=name,
        hyperparameters=request["TrainingJobDefinition"].get("StaticHyperParameters") or {}, say=say,
        tags={"sagemaker.tuning_job_name": name, "sagemaker.tuning_strategy": str(config.get("Strategy", "Bayesian")),
              "sagemaker.objective": f"{objective['Type']} {objective['MetricName']}", "sagemaker.backend": backend})


def _parents(request: Mapping[str, Any], output: str) -> list[ParentTuningJob]:
    """The parent tuning jobs a warm start names, read from their folders beside the new one (``output``/<parent>/:
    what :func:`run_tuning_job` wrote), as data: regular files inside the output folder, JSON objects.

    Raises:
        ConfigurationError: A parent that was not run into this output folder, or whose files are not its own.
    """
    parents = []
    for entry in (request.get("WarmStartConfig") or {}).get("ParentHyperParameterTuningJobs") or []:
        name = str(entry.get("HyperParameterTuningJobName"))
        answers = []
        for file_name in (DESCRIPTION_FILE, TRAINING_JOBS_FILE):
            path = os.path.join(output, name, file_name)
            try:
                answer = json.loads(read_job_file(path, output, limit=_PARENT_FILE_LIMIT))
            except FileNotFoundError:
                raise ConfigurationError("warm_start_config", name, f"is not a tuning job run here: no {path}",
                                         "name a tuning job run into the same output folder") from None
            except (OSError, ValueError) as exc:
                raise ConfigurationError("warm_start_config", name, f"cannot be read from {path} ({exc})",
                                         "warm-start from a tuning job whose folder is as local tuning left it") \
                    from None
            if not isinstance(answer, dict):
                raise ConfigurationError("warm_start_config", name, f"{path} holds no tuning job",
                                         "warm-start from a tuning job whose folder is as local tuning left it")
            answers.append(answer)
        parents.append(ParentTuningJob(name, answers[0], list(answers[1].get("TrainingJobSummaries") or [])))
    return parents


class LocalTuningClient:
    """A SageMaker client that answers for the tuning jobs run here (for SDK v2, also runs them with the
    ``local_process`` estimator ``estimator``); every other attribute is ``client``'s."""

    def __init__(self, client: Any, estimator: Any = None) -> None:
        self._client = client
        self._estimator = estimator
        self._jobs: dict[str, TuningJob] = {}
        self._outputs: dict[str, str] = {}  # trial job name -> the folder its record is under
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def add(self, job: TuningJob) -> None:
        """Answers for ``job`` (a tuning job run here) from now on."""
        with self._lock:
            self._jobs[job.name] = job

    # -- SageMaker's tuning API --------------------------------------------------------------------------------------

    def create_hyper_parameter_tuning_job(self, **request: Any) -> dict[str, Any]:
        """Runs the tuning job to its end (every trial a ``local_process`` job of the estimator), then answers as
        CreateHyperParameterTuningJob. An estimator tracked in MLflow (its ``mlflow``, else ``MLFLOW_TRACKING_URI``)
        makes the tuning job a run, each trial a run under it."""
        estimator = self._estimator
        if estimator is None:
            return self._client.create_hyper_parameter_tuning_job(**request)
        name = request["HyperParameterTuningJobName"]
        definition = request.get("TrainingJobDefinition") or {}
        folder = os.path.abspath(os.path.join(estimator.output_path or DEFAULT_LOCAL_OUTPUT, name))
        inputs = trial_inputs(definition)
        metric_definitions = definition.get("AlgorithmSpecification", {}).get("MetricDefinitions")

        def run_trial(trial_name: str, hyperparameters: Mapping[str, str], control: JobControl,
                      tracking: MlflowSettings | None) -> Mapping[str, Any]:
            trial = copy.copy(estimator)
            trial.mlflow = tracking or False  # a run under the tuning job's, or untracked (never the environment's)
            # The tuned values and the objective's name over the estimator's own (the SDK's sagemaker_* ones are
            # what a SageMaker container reads: the local job sets its own).
            trial._hyperparameters = {**estimator._hyperparameters, **{
                key: decode_value(value) for key, value in hyperparameters.items()
                if not key.startswith("sagemaker_")}}
            trial.output_path, trial.metric_definitions = folder, metric_definitions
            with self._lock:
                self._outputs[trial_name] = folder
            try:
                trial._fit_local_process(inputs, trial_name, control=control)
            except JobError:
                if trial.latest_training_job is None:  # refused before it ran: no record
                    raise
            return trial.latest_training_job.describe()

        job = run_tuning_job(
            request, run_trial, folder=folder, region=estimator.sagemaker_session.boto_region_name,
            processes_per_trial=estimator.instance_count * estimator.distribution_plan.processes_per_host,
            created=self.add, mlflow=mlflow_settings(estimator.mlflow))
        return {"HyperParameterTuningJobArn": tuning_job_arn(job.region, job.name)}

    def describe_hyper_parameter_tuning_job(self, HyperParameterTuningJobName: str) -> dict[str, Any]:  # noqa: N803
        """DescribeHyperParameterTuningJob of a tuning job run here (else SageMaker's answer)."""
        job = self._jobs.get(HyperParameterTuningJobName)
        if job is None:
            return self._client.describe_hyper_parameter_tuning_job(
                HyperParameterTuningJobName=HyperParameterTuningJobName)
        return job.describe()

    def list_training_jobs_for_hyper_parameter_tuning_job(self, **request: Any) -> dict[str, Any]:
        """ListTrainingJobsForHyperParameterTuningJob of a tuning job run here: one page holds every trial."""
        job = self._jobs.get(request.get("HyperParameterTuningJobName", ""))
        if job is None:
            return self._client.list_training_jobs_for_hyper_parameter_tuning_job(**request)
        summaries = job.training_job_summaries()
        if request.get("StatusEquals"):
            summaries = [s for s in summaries if s["TrainingJobStatus"] == request["StatusEquals"]]
        return {"TrainingJobSummaries": summaries}

    def local_output_of(self, training_job_name: str) -> str | None:
        """The folder holding the record of a trial run here (for ``attach``), or None."""
        return self._outputs.get(training_job_name)
