"""How a local job ended, whichever backend ran it: :class:`JobResult`, the one outcome type, and the one
DescribeTrainingJob builder (:meth:`JobResult.describe`) the twin's answer, the process backend's result and the
estimator's local view all use.

The answer holds what SageMaker's does (checked against botocore's output shape of DescribeTrainingJob in the
tests): the request's own members echoed, the job's ARN and times, ``SecondaryStatusTransitions`` with SageMaker's
status messages, ``ModelArtifacts`` and ``FinalMetricDataList``. The times follow SageMaker's answers: the
``Starting`` transition begins at ``CreationTime`` and ends at ``TrainingStartTime``, when the downloads begin (the
developer guide: "The start time in CloudWatch Logs might be later than this time. The difference is due to the
time it takes to download the training data"); ``TrainingEndTime`` is the start of the last transition, after the
artifacts were uploaded, or, for a failed job, "the time when Amazon SageMaker detects a job failure";
``TrainingTimeInSeconds`` is the whole seconds between the two.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from smddp_compat import contract
from smddp_compat.launcher import ProcessResult
from smddp_compat.local_mode.api_model import response_members
from smddp_compat.local_mode.artifacts import MODEL_TARBALL, UNCOMPRESSED_MODEL, ArtifactPaths
from smddp_compat.local_mode.errors import JobFailedError
from smddp_compat.local_mode.metrics import metric_lines
from smddp_compat.local_mode.s3 import S3Location

__all__ = [
    "COMPLETED",
    "FAILED",
    "STOPPED",
    "STATUS_MESSAGES",
    "UNBILLED_STATUSES",
    "TWIN_NOTES",
    "SecondaryStatusLog",
    "JobResult",
    "model_location",
]

COMPLETED = "Completed"
FAILED = "Failed"
STOPPED = "Stopped"

#: ``StatusMessage`` of a secondary status when none is given, as SageMaker words it in its answers (the last message
#: of each status: ``Starting`` shows "Starting the training job." and "Launching requested ML instances." first).
#: SageMaker's wording for MaxRuntimeExceeded and MaxWaitTimeExceeded was not found in AWS's pages: the kit's own.
STATUS_MESSAGES = {
    "Starting": "Preparing the instances for training",
    "Downloading": "Downloading input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading generated training model",
    "Stopping": "Stopping the training job",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopped": "Training job stopped",
    "MaxRuntimeExceeded": "Training job stopped: MaxRuntimeInSeconds exceeded",
    "MaxWaitTimeExceeded": "Training job stopped: MaxWaitTimeInSeconds exceeded",
}

#: The secondary statuses a job ends in.
_FINAL = frozenset({"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"})

#: Secondary statuses whose time is not billed (a managed spot job waiting for, and restarting on, new instances).
UNBILLED_STATUSES = ("Interrupted", "Restarting")

#: The member of the twin's answer that is its own (what it did differently), not SageMaker's: left out when the
#: answer is checked against DescribeTrainingJob's output shape.
TWIN_NOTES = "Twin"

#: The members DescribeTrainingJob adds to a job's answer even when the request left them out.
_DEFAULT_FLAGS = ("EnableNetworkIsolation", "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining")

#: SageMaker's default StoppingCondition.MaxRuntimeInSeconds (one day).
_DEFAULT_MAX_RUNTIME = 86400


def model_location(destination: Path | S3Location, compression: str = "GZIP") -> str:
    """Where a job's model is stored under its destination (``<destination>/output/model.tar.gz``, or the model's
    folder ``output/model`` when ``CompressionType`` is ``NONE``), stored or not: ``ModelArtifacts`` names it
    whatever the job's end."""
    name = UNCOMPRESSED_MODEL if compression == "NONE" else MODEL_TARBALL
    if isinstance(destination, S3Location):
        return destination.child("output", name).uri
    return os.path.abspath(destination / "output" / name)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class SecondaryStatusLog:
    """The secondary statuses a job goes through and when it enters each (``SecondaryStatusTransitions``).

    The first status entered (``Starting``) is the job's creation (``CreationTime``); a final status (:meth:`finish`:
    ``Completed``, ``Failed``, ``Stopped``, ``MaxRuntimeExceeded``, ...) ends when it starts, as in SageMaker's
    answers. Thread-safe.
    """

    def __init__(self) -> None:
        self._entered: list[tuple[str, str, datetime]] = []
        self._lock = threading.Lock()

    def enter(self, status: str, message: str | None = None, when: datetime | None = None) -> datetime:
        """Notes that the job entered ``status``; entering the current status again changes nothing.

        Args:
            status: A secondary status (``Starting``, ``Downloading``, ``Training``, ``Uploading``, ``Stopping``, ...).
            message: Its ``StatusMessage`` (default: SageMaker's, :data:`STATUS_MESSAGES`).
            when: When (default: now).

        Returns:
            When the job entered it.
        """
        with self._lock:
            if self._entered and self._entered[-1][0] == status:
                return self._entered[-1][2]
            moment = when or _now()
            self._entered.append((status, message or STATUS_MESSAGES.get(status, status), moment))
            return moment

    finish = enter  # the final status is entered like any other; it then ends when it starts

    @property
    def transitions(self) -> list[dict[str, Any]]:
        """``SecondaryStatusTransitions``: each status with its start, its end (the next one's start; a final status
        ends when it starts) and its message."""
        with self._lock:
            entered = list(self._entered)
        answer = []
        for index, (status, message, moment) in enumerate(entered):
            item: dict[str, Any] = {"Status": status, "StartTime": moment}
            if index + 1 < len(entered):
                item["EndTime"] = entered[index + 1][2]
            elif status in _FINAL:
                item["EndTime"] = moment
            item["StatusMessage"] = message
            answer.append(item)
        return answer


@dataclass(frozen=True)
class JobResult:
    """How a local job ended, in DescribeTrainingJob's terms, whichever backend ran it.

    Attributes:
        job_name: The job's name.
        status: ``Completed``, ``Failed`` or ``Stopped``, as SageMaker names a training job's status.
        secondary_status: ``Completed``, ``Failed``, ``Stopped``, ``MaxRuntimeExceeded`` or ``MaxWaitTimeExceeded``.
        failure_reason: Why the job did not complete (``FailureReason``), or None.
        exit_code: What ``smddp local`` returns: 0 completed, the failed process's or host's code (or 1), 124 past
            the time limit, 128 + the signal that stopped it (143 for a StopTrainingJob of the twin).
        artifacts: Where ``model.tar.gz``, ``output.tar.gz`` and the logs are.
        start: When the job was created (``CreationTime``).
        end: When it ended.
        duration: Seconds its processes or containers ran.
        transitions: ``SecondaryStatusTransitions`` (:attr:`SecondaryStatusLog.transitions`).
        model_location: Where the model is stored, or would have been (``ModelArtifacts`` is always answered).
        processes: How each of the process backend's processes ended (the launcher's own result), in index order.
        failed_label: The ``algo-N,index`` of the process that failed first (process backend).
        exit_codes: Host -> its container's exit code (the twin).
        final_metric_data: ``FinalMetricDataList``: each metric of the job's definitions with its last value.
        metric_series: ``(when, metric name, value)`` for every value the job printed, in order.
        request_params: The CreateTrainingJob members of the job (the twin's request; the process backend's job as
            that request would say it): those DescribeTrainingJob answers are echoed.
        arn: ``TrainingJobArn``.
        failure_detected: When the job's failure was seen (``TrainingEndTime`` of a failed job), or None.
        mlflow_details: ``MlflowDetails`` (the job's MLflow run: :mod:`~local_mode.tracking`), or None.
        notes: The twin's own notes, what it did differently from SageMaker (``Warnings``, ``WorldSize``,
            ``S3Writes``), answered under :data:`TWIN_NOTES`; None for the process backend.
    """

    job_name: str
    status: str
    secondary_status: str
    failure_reason: str | None
    exit_code: int
    artifacts: ArtifactPaths
    start: datetime = field(default_factory=_now)
    end: datetime = field(default_factory=_now)
    duration: float = 0.0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    model_location: str | None = None
    processes: tuple[ProcessResult, ...] = ()
    failed_label: str | None = None
    exit_codes: Mapping[str, int] = field(default_factory=dict)
    final_metric_data: list[dict[str, Any]] = field(default_factory=list)
    metric_series: list[tuple[datetime, str, float]] = field(default_factory=list)
    request_params: Mapping[str, Any] = field(default_factory=dict)
    arn: str | None = None
    failure_detected: datetime | None = None
    mlflow_details: Mapping[str, str] | None = None
    notes: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Whether the job completed."""
        return self.status == COMPLETED

    @property
    def max_run_exceeded(self) -> bool:
        """The job was stopped because its time limit passed (secondary status ``MaxRuntimeExceeded``)."""
        return self.secondary_status == "MaxRuntimeExceeded"

    @property
    def model_artifacts(self) -> str | None:
        """The stored model (``model.tar.gz``, or the folder of an uncompressed one), or None."""
        return self.artifacts.model

    @property
    def output_artifacts(self) -> str | None:
        """The stored ``output.tar.gz``, or None."""
        return self.artifacts.output

    @property
    def logs(self) -> Mapping[str, str]:
        """Host -> its log (a file or an ``s3://`` URI)."""
        return self.artifacts.logs

    @property
    def final_metrics(self) -> dict[str, float]:
        """Metric name -> its last value (:attr:`final_metric_data` as a mapping)."""
        return {entry["MetricName"]: entry["Value"] for entry in self.final_metric_data}

    def raise_for_status(self) -> JobResult:
        """Returns the result when the job completed.

        Raises:
            JobFailedError: The job failed or was stopped.
        """
        if not self.ok:
            failed = next((p for p in self.processes if p.spec.label == self.failed_label), None)
            raise JobFailedError(
                self.job_name, self.status, self.failure_reason or "unknown reason", label=self.failed_label,
                exit_code=failed.returncode if failed else None, host=failed.spec.host if failed else None,
            )
        return self

    def summary(self) -> str:
        """A few lines for humans: status, duration, final metrics, artifacts, logs, failure reason."""
        lines = [f"local job {self.job_name}: {self.status} in {self.duration:.1f} s"]
        lines += [f"  metric {line}" for line in metric_lines(self.final_metrics.items())]
        if self.artifacts.model:
            lines.append(f"  model:  {self.artifacts.model}")
        if self.artifacts.output:
            lines.append(f"  output: {self.artifacts.output}")
        lines += [f"  log {host}: {log}" for host, log in self.artifacts.logs.items()]
        lines += [f"  warning: name clash between hosts (SageMaker would keep only one): {clash}"
                  for clash in self.artifacts.clashes]
        lines += [f"  left out: {note}" for note in self.artifacts.skipped]
        if self.failure_reason:
            lines.append(f"  failure reason: {self.failure_reason}")
        return "\n".join(lines)

    def _transitions(self) -> list[dict[str, Any]]:
        if self.transitions:
            return list(self.transitions)
        log = SecondaryStatusLog()  # no record of the statuses: what is known, the start and the end
        log.enter("Starting", when=self.start)
        log.enter("Training", when=self.start)
        log.finish(self.secondary_status, when=self.end)
        return log.transitions

    def describe(self) -> dict[str, Any]:
        """The DescribeTrainingJob answer SageMaker would give for this job (and, from the twin, its own notes).

        The request's members (:attr:`request_params`) that DescribeTrainingJob answers, then the job's name, ARN,
        statuses, ``SecondaryStatusTransitions``, times, ``ModelArtifacts``, ``FinalMetricDataList``,
        ``MlflowDetails`` for a tracked job and, for a
        failed job only (as SageMaker answers: a stopped job has none), ``FailureReason``; under :data:`TWIN_NOTES`,
        what the twin did differently.
        """
        transitions = self._transitions()
        echoed = response_members("DescribeTrainingJob")
        answer: dict[str, Any] = {key: value for key, value in self.request_params.items() if key in echoed}
        for flag in _DEFAULT_FLAGS:
            answer.setdefault(flag, False)
        # Required in the answer; SageMaker fills in its default when the request left it out.
        answer.setdefault("StoppingCondition", {"MaxRuntimeInSeconds": _DEFAULT_MAX_RUNTIME})
        first, last = transitions[0], transitions[-1]
        started = next((t["StartTime"] for t in transitions if t["Status"] == "Downloading"), None) or next(
            (t["StartTime"] for t in transitions if t["Status"] == "Training"), None
        )
        ended = self.failure_detected if self.status == FAILED and self.failure_detected else last["StartTime"]
        answer.update({
            "TrainingJobName": self.job_name,
            "TrainingJobArn": self.arn or contract.training_job_arn("us-east-1", self.job_name),
            "ModelArtifacts": {"S3ModelArtifacts": self.artifacts.model or self.model_location or ""},
            "TrainingJobStatus": self.status,
            "SecondaryStatus": self.secondary_status,
            "CreationTime": first["StartTime"],
            "LastModifiedTime": last["StartTime"],
            "SecondaryStatusTransitions": transitions,
            "FinalMetricDataList": list(self.final_metric_data),
        })
        if started is not None:
            seconds = max(0, int((ended - started).total_seconds()))
            unbilled = sum(
                (t.get("EndTime", t["StartTime"]) - t["StartTime"]).total_seconds()
                for t in transitions if t["Status"] in UNBILLED_STATUSES
            )
            answer.update({
                "TrainingStartTime": started,
                "TrainingEndTime": ended,
                "TrainingTimeInSeconds": seconds,
                "BillableTimeInSeconds": max(0, int(seconds - unbilled)),
            })
        if self.mlflow_details:
            answer["MlflowDetails"] = dict(self.mlflow_details)
        if self.failure_reason and self.status == FAILED:  # SageMaker's FailureReason: why a failed job failed
            answer["FailureReason"] = contract.truncate_failure_reason(self.failure_reason)
        if self.notes is not None:
            answer[TWIN_NOTES] = dict(self.notes)
        return answer
