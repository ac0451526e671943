"""SageMaker's hyperparameter tuning API answered on this machine, for SDK v2's ``HyperparameterTuner`` over a
``local_process`` estimator (:mod:`smddp_compat.local_mode.tuning` runs the search).

The SDK's tuner talks to SageMaker through its session's ``sagemaker_client``: ``create_hyper_parameter_tuning_job``
(``tuner.fit``), ``describe_hyper_parameter_tuning_job`` (``describe``, ``wait``, ``best_training_job``, analytics)
and ``list_training_jobs_for_hyper_parameter_tuning_job`` (``analytics().dataframe()``). A ``local_process``
estimator's session gets a :class:`LocalTuningClient` in front of its client: it answers those three from tuning
jobs run here, each trial a ``local_process`` job of the estimator with the trial's hyperparameters, kept under
``<output_path>/<tuning job>/<trial>/`` (logs, model, metrics, record), and passes every other call on.

``tuner.fit()`` returns when the tuning job has ended (``wait=False`` too: the trials run in this process).
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from smddp_compat.estimators._local_process import DEFAULT_LOCAL_OUTPUT, channel_uri, decoded_hyperparameter
from smddp_compat.estimators.errors import JobError
from smddp_compat.local_mode.tuning import TuningJob

__all__ = ["LocalTuningClient", "trial_inputs"]


def trial_inputs(definition: Mapping[str, Any]) -> dict[str, str] | None:
    """The channels of a tuning request's ``TrainingJobDefinition`` as the estimator's ``fit`` takes them (channel ->
    ``file://`` or ``s3://`` URI), or None when it has none."""
    channels = {channel["ChannelName"]: channel_uri(channel) for channel in definition.get("InputDataConfig") or []}
    return channels or None


class LocalTuningClient:
    """A SageMaker client whose tuning calls run here (for the ``local_process`` estimator ``estimator``); every
    other attribute is ``client``'s."""

    def __init__(self, client: Any, estimator: Any) -> None:
        self._client = client
        self._estimator = estimator
        self._jobs: dict[str, TuningJob] = {}
        self._outputs: dict[str, str] = {}  # trial job name -> the folder its record is under
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    # -- SageMaker's tuning API --------------------------------------------------------------------------------------

    def create_hyper_parameter_tuning_job(self, **request: Any) -> dict[str, Any]:
        """Runs the tuning job to its end (every trial here), then answers as CreateHyperParameterTuningJob."""
        name = request["HyperParameterTuningJobName"]
        if "TrainingJobDefinitions" in request:
            raise JobError(f"tuning job {name}: several estimators (HyperparameterTuner.create) are not run locally; "
                           "tune one local_process estimator")
        definition = request["TrainingJobDefinition"]
        estimator = self._estimator
        job = TuningJob(request, region=estimator.sagemaker_session.boto_region_name,
                        processes_per_trial=estimator.instance_count * estimator.distribution_plan.processes_per_host)
        with self._lock:
            self._jobs[name] = job
        folder = os.path.abspath(os.path.join(estimator.output_path or DEFAULT_LOCAL_OUTPUT, name))
        inputs = trial_inputs(definition)
        metric_definitions = definition.get("AlgorithmSpecification", {}).get("MetricDefinitions")

        def run_trial(trial_name: str, hyperparameters: Mapping[str, str]) -> Mapping[str, Any]:
            trial = copy.copy(estimator)
            # The tuned values and the objective's name over the estimator's own (the SDK's sagemaker_* ones are
            # what a SageMaker container reads: the local job sets its own).
            trial._hyperparameters = {**estimator._hyperparameters, **{
                key: decoded_hyperparameter(value) for key, value in hyperparameters.items()
                if not key.startswith("sagemaker_")}}
            trial.output_path, trial.metric_definitions = folder, metric_definitions
            with self._lock:
                self._outputs[trial_name] = folder
            try:
                trial._fit_local_process(inputs, trial_name)
            except JobError:
                if trial.latest_training_job is None:  # refused before it ran: no record
                    raise
            return trial.latest_training_job.describe()

        try:
            job.run(run_trial)
        finally:
            described = job.describe()
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "tuning-job.json"), "w", encoding="utf-8") as out:
                json.dump(described, out, indent=2, default=str)
        return {"HyperParameterTuningJobArn": described["HyperParameterTuningJobArn"]}

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

