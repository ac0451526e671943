"""A SageMaker training job's life after submission: status, logs, waiting, and its model artifact (boto3 only)."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TextIO

from smddp_compat.estimators._validation import check_job_name, check_positive_int, check_positive_seconds
from smddp_compat.estimators.errors import ConfigurationError, JobError, JobTimeoutError
from smddp_compat.job_files import UnsafeJobFileError, extract_tarball
from smddp_compat.local_mode.metrics import metric_lines

__all__ = [
    "LOG_GROUP", "TERMINAL_STATUSES", "LogEvent", "describe_job", "format_status", "iter_log_events", "wait_for_job",
    "fetch_model", "split_s3_uri",
]

#: CloudWatch Logs group SageMaker writes training jobs' output to (one stream per host: ``<job>/algo-N-<time>``).
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TERMINAL_STATUSES = ("Completed", "Failed", "Stopped")


@dataclass(frozen=True)
class LogEvent:
    """One log line of a job.

    Attributes:
        stream: The log stream (host) it came from.
        timestamp: Milliseconds since the epoch.
        message: The line.
    """

    stream: str
    timestamp: int
    message: str


def _client_error(job_name: str, exc: Exception, doing: str) -> JobError:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
    message = getattr(exc, "response", {}).get("Error", {}).get("Message", str(exc))
    return JobError(job_name, f"{doing} training job {job_name!r} failed: {code}: {message}")


def describe_job(sagemaker_client: Any, job_name: str) -> dict[str, Any]:
    """DescribeTrainingJob.

    Raises:
        ConfigurationError: ``job_name`` breaks SageMaker's naming rule (refused here, not sent).
        JobError: The job does not exist or the call failed (the message names the job and the AWS error).
    """
    check_job_name(job_name)
    try:
        return sagemaker_client.describe_training_job(TrainingJobName=job_name)
    except Exception as exc:  # botocore's ClientError and connection errors alike
        raise _client_error(job_name, exc, "describing") from exc


def format_status(description: dict[str, Any]) -> str:
    """A few lines a person reads: status, secondary status, instances, times, artifacts, final metrics, failure
    reason."""
    resources = description.get("ResourceConfig", {})
    lines = [
        f"job:       {description.get('TrainingJobName')}",
        f"status:    {description.get('TrainingJobStatus')}"
        + (f" ({description['SecondaryStatus']})" if description.get("SecondaryStatus") else ""),
        f"instances: {resources.get('InstanceCount')} x {resources.get('InstanceType')}",
        f"image:     {description.get('AlgorithmSpecification', {}).get('TrainingImage')}",
    ]
    for key, label in (("TrainingStartTime", "started"), ("TrainingEndTime", "ended")):
        if description.get(key):
            lines.append(f"{label + ':':<10} {description[key]}")
    artifacts = description.get("ModelArtifacts", {}).get("S3ModelArtifacts")
    if artifacts:
        lines.append(f"model:     {artifacts}")
    metrics = [m for m in description.get("FinalMetricDataList") or [] if isinstance(m.get("Value"), (int, float))]
    if metrics:  # each metric's last value, as SageMaker read it from the job's logs
        shown = metric_lines((metric.get("MetricName"), metric["Value"]) for metric in metrics)
        lines += [f"metric:    {line}" + (f" (at {metric['Timestamp']})" if metric.get("Timestamp") else "")
                  for line, metric in zip(shown, metrics)]
    if description.get("FailureReason"):
        lines.append(f"failure:   {description['FailureReason']}")
    return "\n".join(lines)


def iter_log_events(logs_client: Any, job_name: str, *, max_events: int | None = None) -> Iterator[LogEvent]:
    """Every log line of a job (``logs_client`` a boto3 ``logs`` client), stream by stream (hosts in name order),
    oldest first; at most ``max_events`` lines (None: all).

    Raises:
        ConfigurationError: ``job_name`` breaks SageMaker's naming rule (a ``/`` would match other jobs' streams),
            or ``max_events`` is not a whole number >= 1.
        JobError: The log group cannot be read.
    """
    check_job_name(job_name)
    if max_events is not None:
        check_positive_int(max_events, "max_events", "--max-events 100")
    try:
        streams: list[str] = []
        paginator = logs_client.get_paginator("describe_log_streams")
        for page in paginator.paginate(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job_name}/"):
            streams += [s["logStreamName"] for s in page.get("logStreams", [])]
    except Exception as exc:
        if "ResourceNotFoundException" in str(type(exc).__name__) + str(getattr(exc, "response", "")):
            return
        raise _client_error(job_name, exc, "reading the logs of") from exc
    count = 0
    for stream in sorted(streams):
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
            if token:
                kwargs["nextToken"] = token
            try:
                page = logs_client.get_log_events(**kwargs)
            except Exception as exc:
                raise _client_error(job_name, exc, "reading the logs of") from exc
            for event in page.get("events", []):
                yield LogEvent(stream, int(event.get("timestamp", 0)), str(event.get("message", "")))
                count += 1
                if max_events is not None and count >= max_events:
                    return
            next_token = page.get("nextForwardToken")
            if not page.get("events") or not next_token or next_token == token:
                break
            token = next_token


def wait_for_job(
    sagemaker_client: Any,
    job_name: str,
    *,
    timeout: float,
    poll: float = 30.0,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Polls a job until it completes, fails or is stopped, printing each change of status to ``stream`` (default:
    stderr); ``poll`` seconds between two DescribeTrainingJob calls, ``timeout`` at most (``clock`` and ``sleep``:
    tests pass their own). Returns the last description (status ``Completed``).

    Raises:
        ConfigurationError: timeout or poll not a finite number > 0, or a malformed job name.
        JobError: The job ended ``Failed`` or ``Stopped`` (with its failure reason).
        JobTimeoutError: Still running after ``timeout`` seconds (the job itself goes on).
    """
    check_positive_seconds(timeout, "timeout", "--timeout 3600")
    check_positive_seconds(poll, "poll", "--poll 30")
    check_job_name(job_name)
    out = stream or sys.stderr
    start = clock()
    last = None
    while True:
        description = describe_job(sagemaker_client, job_name)
        status = description.get("TrainingJobStatus")
        secondary = description.get("SecondaryStatus")
        elapsed = clock() - start
        if (status, secondary) != last:
            print(f"[{elapsed:7.0f} s] {job_name}: {status}" + (f" / {secondary}" if secondary else ""), file=out,
                  flush=True)
            last = (status, secondary)
        if status == "Completed":
            return description
        if status in ("Failed", "Stopped"):
            reason = description.get("FailureReason")
            raise JobError(
                job_name, f"training job {job_name!r} ended {status}" + (f": {reason}" if reason else ""),
                status=status, reason=reason,
            )
        if elapsed >= timeout:
            raise JobTimeoutError(
                job_name, f"training job {job_name!r} is still {status} after {timeout:.0f} s "
                f"(it goes on; wait again or check `smddp status {job_name}`)", status=status,
            )
        sleep(min(poll, max(0.0, timeout - elapsed)))


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``.

    Raises:
        ConfigurationError: Not an ``s3://bucket/key`` URI.
    """
    if not uri.startswith("s3://") or "/" not in uri[5:] or not uri[5:].split("/", 1)[0]:
        raise ConfigurationError("S3 URI", uri, "is not of the form s3://bucket/key", "pass an s3://bucket/key URI")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


def check_destination(destination: object, field: str = "DEST") -> str:
    """Checks where :func:`fetch_model` may put a model: a path it can create, or an empty directory it replaces.

    Returns the absolute path; ``field`` is the option or field named in errors.

    Raises:
        ConfigurationError: Not a non-empty path; a symbolic link (replacing it would drop the link, not fill its
            target); the current directory; an existing file or non-empty directory; or a path under a file or
            a directory this process cannot write to.
    """
    if not isinstance(destination, str) or not destination:
        raise ConfigurationError(field, destination, "must be a directory path", "give e.g. ./model")
    target = os.path.abspath(destination)
    if os.path.islink(destination.rstrip(os.sep) or destination):
        raise ConfigurationError(
            field, destination, "is a symbolic link (the fetched directory would replace the link itself)",
            f"give the link's target ({os.path.realpath(destination)}) or a new directory",
        )
    if target == os.getcwd():
        raise ConfigurationError(field, destination, "is the current directory", "give a new directory, e.g. ./model")
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise ConfigurationError(
            field, destination, "exists and is not an empty directory", "give a new or empty directory"
        )
    ancestor = os.path.dirname(target)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor) or not os.access(ancestor, os.W_OK | os.X_OK):
        why = "is not a directory" if not os.path.isdir(ancestor) else "is not writable"
        raise ConfigurationError(
            field, destination, f"cannot be created: {ancestor} {why}", "give a path in a directory you can write to"
        )
    return target


def fetch_model(sagemaker_client: Any, s3_client: Any, job_name: str, destination: str) -> list[str]:
    """Downloads a completed job's ``model.tar.gz`` and extracts it into ``destination``.

    The archive is checked member by member (regular files and folders only: no absolute paths, ``..``, links,
    devices or FIFOs) and extracted (:func:`smddp_compat.job_files.extract_tarball`, also on Python 3.11.0-3.11.3,
    whose ``extractall`` has no ``filter=``) into a temporary directory beside ``destination``, which then takes its
    place: a failed fetch leaves nothing half written.

    Returns the extracted files, relative to ``destination`` (a directory that must not exist, or be empty).

    Raises:
        ConfigurationError: A malformed job name, or a ``destination`` that cannot be written as a whole (see
            :func:`check_destination`); both refused before any AWS call.
        JobError: The job has no model artifact, or the download or archive is bad.
    """
    check_job_name(job_name)
    destination = check_destination(destination)
    description = describe_job(sagemaker_client, job_name)
    uri = description.get("ModelArtifacts", {}).get("S3ModelArtifacts")
    if not uri:
        raise JobError(
            job_name, f"training job {job_name!r} has no model artifact (status {description.get('TrainingJobStatus')})",
            status=description.get("TrainingJobStatus"),
        )
    bucket, key = split_s3_uri(uri)
    parent = os.path.dirname(destination)
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".smddp-fetch-", dir=parent)
    except OSError as exc:
        raise ConfigurationError(
            "DEST", destination, f"cannot be created ({exc.strerror}: {exc.filename})",
            "give a path in a directory you can write to",
        ) from None
    try:
        archive = os.path.join(scratch, "model.tar.gz")
        try:
            s3_client.download_file(bucket, key, archive)
        except Exception as exc:
            raise _client_error(job_name, exc, f"downloading {uri} of") from exc
        extracted = os.path.join(scratch, "model")
        os.makedirs(extracted)
        try:
            names = extract_tarball(archive, extracted)
        except UnsafeJobFileError as exc:
            raise JobError(job_name, f"the model archive {uri} of {job_name!r} was not extracted: {exc}") from exc
        except tarfile.TarError as exc:
            raise JobError(job_name, f"{uri} is not a readable tar.gz archive: {exc}") from exc
        if os.path.isdir(destination):
            os.rmdir(destination)
        os.replace(extracted, destination)
        return sorted(names)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
