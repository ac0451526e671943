"""How a replayed job ended, in DescribeTrainingJob's terms: the twin's answer, its status transitions and its
``FailureReason``.

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

import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smddp_compat import contract
from smddp_compat.local_mode.s3 import S3Location
from smddp_compat.local_mode.artifacts import MODEL_TARBALL, UNCOMPRESSED_MODEL
from smddp_compat.local_mode.layout import HostLayout

if TYPE_CHECKING:
    from smddp_compat.local_mode.docker.request import TrainingJobRequest

__all__ = [
    "STATUS_MESSAGES",
    "UNBILLED_STATUSES",
    "SecondaryStatusLog",
    "TwinResult",
    "TWIN_NOTES",
    "failure_reason",
    "model_location",
]


#: Exit codes of a replayed job by its secondary status, then its status.
_EXIT_CODES = {"Completed": 0, "MaxRuntimeExceeded": 124, "Stopped": 143}

#: ``StatusMessage`` of a secondary status when none is given, as SageMaker words it in its answers (the last message
#: of each status: ``Starting`` shows "Starting the training job." and "Launching requested ML instances." first).
#: SageMaker's wording for MaxRuntimeExceeded and MaxWaitTimeExceeded was not found in AWS's pages: the twin's own.
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

#: The member of :meth:`TwinResult.describe`'s answer that is the twin's own (what it did differently), not
#: SageMaker's: left out when the answer is checked against DescribeTrainingJob's output shape.
TWIN_NOTES = "Twin"

#: The members DescribeTrainingJob adds to a job's answer even when the request left them out.
_DEFAULT_FLAGS = ("EnableNetworkIsolation", "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining")

# SageMaker's default StoppingCondition.MaxRuntimeInSeconds (one day).
_DEFAULT_MAX_RUNTIME = 86400

def model_location(destination: Path | S3Location, compression: str = "GZIP") -> str:
    """Where a job's model is stored under its destination (``<destination>/output/model.tar.gz``, or the model's
    folder ``output/model`` when ``CompressionType`` is ``NONE``), stored or not: ``ModelArtifacts`` names it
    whatever the job's end."""
    name = UNCOMPRESSED_MODEL if compression == "NONE" else MODEL_TARBALL
    if isinstance(destination, S3Location):
        return destination.child("output", name).uri
    return str(destination / "output" / name)


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

    def finish(self, status: str, message: str | None = None, when: datetime | None = None) -> datetime:
        """Notes the job's final status; returns when it was entered (``TrainingEndTime`` unless the job failed)."""
        return self.enter(status, message, when)

    @property
    def created(self) -> datetime | None:
        """``CreationTime``: when the first status was entered (None before)."""
        with self._lock:
            return self._entered[0][2] if self._entered else None

    @property
    def last(self) -> tuple[str, datetime] | None:
        """The current (or final) secondary status and when it was entered, or None."""
        with self._lock:
            return (self._entered[-1][0], self._entered[-1][2]) if self._entered else None

    def entered(self, status: str) -> datetime | None:
        """When the job first entered ``status``, or None."""
        with self._lock:
            return next((moment for name, _message, moment in self._entered if name == status), None)

    def seconds_in(self, *statuses: str) -> float:
        """Seconds spent in ``statuses`` (a status not yet left counts until now)."""
        with self._lock:
            entered = list(self._entered)
        total = 0.0
        for index, (name, _message, moment) in enumerate(entered):
            if name in statuses:
                total += ((entered[index + 1][2] if index + 1 < len(entered) else _now()) - moment).total_seconds()
        return total

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


@dataclass
class TwinResult:
    """How a replayed job ended, in DescribeTrainingJob's terms.

    Attributes:
        job_name: The job's name.
        status: ``Completed``, ``Failed`` or ``Stopped``.
        secondary_status: ``Completed``, ``Failed``, ``Stopped`` or ``MaxRuntimeExceeded``.
        failure_reason: ``FailureReason`` (None unless Failed).
        model_artifacts: The ``model.tar.gz`` URI, or None when it was not stored.
        output_artifacts: The ``output.tar.gz`` URI, or None.
        start: When the containers started.
        end: When the job ended.
        exit_codes: Host -> its container's exit code.
        logs: Host -> its log (``<output>/<job>/logs/<host>.log``, a file or an ``s3://`` URI).
        processes_per_host: The GPUs the twin granted each host (0 for CPU instance types).
        secondary_status_transitions: ``SecondaryStatusTransitions`` (:attr:`SecondaryStatusLog.transitions`);
            empty: the answer has the final status only, from ``start`` to ``end``.
        billable_seconds: The containers' run time less the time not billed, as the twin counted it. The answer's
            ``BillableTimeInSeconds`` follows SageMaker's rule instead: ``TrainingTimeInSeconds`` less the time in
            :data:`UNBILLED_STATUSES` (a spot job's interruptions), so it equals the training time of any other job.
        warnings: What the twin does differently from SageMaker for this request (``Twin.Warnings`` in the answer).
        world_sizes: The job's world size on SageMaker and here (``Twin.WorldSize``), or empty.
        s3_writes: What the job wrote to S3 (kept by the twin, never written to the request's S3).
        request: The request replayed: its members are echoed in the answer.
        arn: ``TrainingJobArn``.
        model_location: Where the model is stored, or would have been (``ModelArtifacts`` is always answered).
        final_metric_data: ``FinalMetricDataList``: each metric of ``MetricDefinitions`` with its last value.
        failure_detected: When the twin saw the job fail (``TrainingEndTime`` of a failed job), or None.
    """

    job_name: str
    status: str
    secondary_status: str
    failure_reason: str | None
    model_artifacts: str | None
    output_artifacts: str | None
    start: datetime
    end: datetime
    exit_codes: dict[str, int] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    processes_per_host: int = 0
    secondary_status_transitions: list[dict[str, Any]] = field(default_factory=list)
    billable_seconds: float | None = None
    warnings: list[str] = field(default_factory=list)
    world_sizes: dict[str, int] = field(default_factory=dict)
    s3_writes: list[str] = field(default_factory=list)
    request: TrainingJobRequest | None = None
    arn: str | None = None
    model_location: str | None = None
    final_metric_data: list[dict[str, Any]] = field(default_factory=list)
    failure_detected: datetime | None = None

    @property
    def ok(self) -> bool:
        """True when the job completed."""
        return self.status == "Completed"

    @property
    def exit_code(self) -> int:
        """0 completed, 124 past ``MaxRuntimeInSeconds``, 143 stopped, else the first failed host's code (or 1)."""
        if self.secondary_status in _EXIT_CODES:
            return _EXIT_CODES[self.secondary_status]
        failed = [code for code in self.exit_codes.values() if code]
        return _EXIT_CODES.get(self.status, failed[0] if failed else 1)

    def _transitions(self) -> list[dict[str, Any]]:
        if self.secondary_status_transitions:
            return list(self.secondary_status_transitions)
        log = SecondaryStatusLog()  # no record of the statuses: what is known, the start and the end
        log.enter("Starting", when=self.start)
        log.enter("Training", when=self.start)
        log.finish(self.secondary_status, when=self.end)
        return log.transitions

    def describe(self) -> dict[str, Any]:
        """The DescribeTrainingJob answer SageMaker would give for this job, and the twin's own notes.

        The request's members as sent (those DescribeTrainingJob answers), then the job's name, ARN, statuses,
        ``SecondaryStatusTransitions``, times, ``ModelArtifacts``, ``FinalMetricDataList`` and ``FailureReason``;
        under :data:`TWIN_NOTES`, what the twin did differently (``Warnings``, ``WorldSize``, ``S3Writes``).
        """
        transitions = self._transitions()
        answer: dict[str, Any] = {}
        if self.request is not None:
            from smddp_compat.local_mode.docker._api_model import response_members

            echoed = response_members("DescribeTrainingJob")
            answer.update({key: value for key, value in self.request.params.items() if key in echoed})
            for flag in _DEFAULT_FLAGS:
                answer.setdefault(flag, False)
        # Required in the answer; SageMaker fills in its default when the request left it out.
        answer.setdefault("StoppingCondition", {
            "MaxRuntimeInSeconds": self.request.max_runtime if self.request is not None else _DEFAULT_MAX_RUNTIME
        })
        first, last = transitions[0], transitions[-1]
        started = next((t["StartTime"] for t in transitions if t["Status"] == "Downloading"), None) or next(
            (t["StartTime"] for t in transitions if t["Status"] == "Training"), None
        )
        ended = self.failure_detected if self.status == "Failed" and self.failure_detected else last["StartTime"]
        answer.update({
            "TrainingJobName": self.job_name,
            "TrainingJobArn": self.arn or contract.training_job_arn("us-east-1", self.job_name),
            "ModelArtifacts": {"S3ModelArtifacts": self.model_artifacts or self.model_location or ""},
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
        if self.failure_reason:
            answer["FailureReason"] = contract.truncate_failure_reason(self.failure_reason)
        notes: dict[str, Any] = {"Warnings": list(self.warnings)}
        if self.world_sizes:
            notes["WorldSize"] = dict(self.world_sizes)
        if self.s3_writes:
            notes["S3Writes"] = list(self.s3_writes)
        answer[TWIN_NOTES] = notes
        return answer


# Open MPI's report of the process that ended the job: "... rank 2 with PID 0 on node algo-2 exited on signal 9".
_MPI_CULPRIT = re.compile(r"rank \d+ with PID \d+ on node \S+ exited on signal \d+[^\n]*")


def failure_reason(
    layouts: dict[str, HostLayout], failed_host: str | None, codes: dict[str, int], log_dir: Path
) -> str:
    """``FailureReason`` as SageMaker words it (``AlgorithmError:`` and the failure file), naming the host; when
    mpirun reports which rank on which node ended the job, that comes first (the host that failed is then the one
    that ran mpirun, not the one where the rank died)."""
    culprit = ""
    for host in layouts:
        log = log_dir / f"{host}.log"
        found = _MPI_CULPRIT.search(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else None
        if found:
            culprit = f"mpirun: {found.group(0).strip()}. "
            break
    order = [failed_host] if failed_host else []
    order += [host for host in layouts if host not in order]
    for host in order:
        text = contract.read_failure_reason(layouts[host].failure_file)
        if text:
            return contract.truncate_failure_reason(
                f"AlgorithmError: {culprit}{text} (on {host}, exit code {codes.get(host)})"
            )
    code = codes.get(failed_host or "")
    return f"AlgorithmError: {culprit}{failed_host} exited with code {code} and wrote no failure file"
