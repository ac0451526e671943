"""A finished ``local_process`` job as the SageMaker SDK shows a training job: ``latest_training_job``, its
``describe()``, the job's logs, its metrics as a data frame, and the record ``attach()`` reads back.

- :class:`LocalTrainingJob` is a ``sagemaker.estimator._TrainingJob`` (``name``, ``job_name``, ``describe()``,
  ``wait()``, ``stop()``, ``rule_job_summary()``) whose description is local mode's one DescribeTrainingJob builder
  (:meth:`~smddp_compat.local_mode.outcome.JobResult.describe`) with what the estimator sends besides the job
  (:func:`job_record`); its metric series is the one local mode read from each line as the processes printed it
  (the hosts' log files have no times), as CloudWatch keeps a SageMaker job's.
- :class:`LocalTrainingJobAnalytics` is a ``sagemaker.analytics.AnalyticsMetricsBase`` whose ``dataframe()`` has
  the columns of ``TrainingJobAnalytics.dataframe()``: ``timestamp`` (seconds since the metric's first value, as
  the SDK normalises them), ``metric_name``, ``value``.
- The record (:data:`RECORD_FILE`) is written to ``<output_path>/<job_name>/`` beside ``output/`` and ``logs/``
  (local folder or S3), so that ``TensorFlow.attach(job_name, local_output=output_path)`` can rebuild the estimator
  and its job later, in another process.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sagemaker.analytics import AnalyticsMetricsBase
from sagemaker.estimator import _TrainingJob

from smddp_compat import contract
from smddp_compat.estimators._local_process import described_as_sent
from smddp_compat.estimators._validation import check_job_name
from smddp_compat.estimators.errors import ConfigurationError, EstimatorError, JobError
from smddp_compat.local_mode.artifacts import job_destination
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.s3 import make_s3_client, parse_s3_uri

__all__ = [
    "RECORD_FILE",
    "RECORD_FORMAT",
    "LocalTrainingJob",
    "LocalTrainingJobAnalytics",
    "job_record",
    "save_record",
    "load_record",
]

logger = logging.getLogger(__name__)

#: The file under ``<output_path>/<job_name>/`` that holds a local_process job's description, log locations,
#: metric series and estimator settings.
RECORD_FILE = "training-job.json"
RECORD_FORMAT = "smddp-compat local_process training job, version 1"
_DATETIME_KEY = "$datetime"


def job_record(
    result: JobResult, *, region: str, role: str | None, image_uri: str | None, volume_size: int | None,
    output_path: str, estimator: Mapping[str, Any],
) -> dict[str, Any]:
    """The record of a finished local_process job: its ``DescribeTrainingJob`` response (local mode's one builder,
    :meth:`~smddp_compat.local_mode.outcome.JobResult.describe`, with what the estimator sends besides the job:
    role, image, instance type, volume, output path, and its session's region in the ARN), its logs, its metric
    series and the estimator's settings (``image_uri`` None: this machine's environment; ``output_path``: where
    the job's ``<job_name>/`` folder is, absolute or ``s3://``; ``estimator``: the constructor arguments ``attach``
    rebuilds the estimator with).
    """
    description = described_as_sent(result, role=role, image_uri=image_uri, volume_size=volume_size or 30,
                                    output_path=output_path, arn=contract.training_job_arn(region, result.job_name))
    return {
        "format": RECORD_FORMAT,
        "description": description,
        "logs": {host: location if "://" in location else os.path.abspath(location)
                 for host, location in result.artifacts.logs.items()},
        "metric_points": [[round((when - result.start).total_seconds(), 3), name, value]
                          for when, name, value in result.metric_series],
        "estimator": dict(estimator),
    }


# -- the record ---------------------------------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_DATETIME_KEY: value.isoformat()}
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _decode(entry: dict[str, Any]) -> Any:
    if set(entry) == {_DATETIME_KEY}:
        return datetime.fromisoformat(entry[_DATETIME_KEY])
    return entry


def _record_location(output: str, job_name: str) -> Any:
    """``<output>/<job_name>/training-job.json`` as a local Path or an S3Location."""
    destination = job_destination(output, job_name)
    return destination / RECORD_FILE if isinstance(destination, Path) else destination.child(RECORD_FILE)


def save_record(output: str, job_name: str, record: Mapping[str, Any]) -> str:
    """Writes a job's record (JSON-ready but for datetimes) beside its artifacts under ``output`` (a folder: one
    file written atomically; ``s3://``: one object); returns where it was written.

    Raises:
        OSError, TypeError, botocore errors: It could not be written (the caller reports it; the job's own result
            stands).
    """
    text = json.dumps(record, default=_encode, indent=1, sort_keys=True) + "\n"
    location = _record_location(output, job_name)
    if isinstance(location, Path):
        location.parent.mkdir(parents=True, exist_ok=True)
        contract.write_atomically(location, text)
        return str(location)
    make_s3_client().put_object(Bucket=location.bucket, Key=location.prefix, Body=text.encode("utf-8"))
    return location.uri


def load_record(output: str, job_name: str) -> dict[str, Any]:
    """Reads the record :func:`save_record` wrote.

    Raises:
        ConfigurationError: A malformed job name, or no record of that job under ``output`` (the fix names the
            output path the job ran with), or a file that is not such a record.
    """
    check_job_name(job_name)
    if not isinstance(output, (str, os.PathLike)) or not os.fspath(output):
        raise ConfigurationError("local_output", output, "must be a folder path or s3:// URI",
                                 "pass the output_path the local_process job ran with (default ./smddp_local_output)")
    output = os.fspath(output)
    if output.startswith("file://"):
        output = output[len("file://"):]
    location = _record_location(output, job_name)
    fix = ("pass as local_output the output_path the job ran with (default ./smddp_local_output); jobs run before "
           "smddp-compat wrote this record cannot be attached")
    try:
        if isinstance(location, Path):
            text = location.read_text(encoding="utf-8")
        else:
            text = make_s3_client().get_object(Bucket=location.bucket, Key=location.prefix)["Body"].read().decode()
    except FileNotFoundError:
        raise ConfigurationError("training_job_name", job_name, f"has no local_process record at {location}",
                                 fix) from None
    except Exception as exc:  # S3's NoSuchKey, a refused request, an unreadable file
        raise ConfigurationError("training_job_name", job_name, f"its record at {location} cannot be read ({exc})",
                                 fix) from exc
    try:
        record = json.loads(text, object_hook=_decode)
    except ValueError as exc:
        raise ConfigurationError("local_output", output, f"{location} is not valid JSON ({exc})", fix) from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise ConfigurationError("local_output", output, f"{location} is not a {RECORD_FORMAT!r} record", fix)
    if record["description"].get("TrainingJobName") != job_name:
        raise ConfigurationError("training_job_name", job_name, f"{location} describes another job "
                                 f"({record['description'].get('TrainingJobName')!r})", fix)
    return record


# -- the job ------------------------------------------------------------------------------------------------------


class LocalTrainingJob(_TrainingJob):
    """A finished ``local_process`` training job, as ``estimator.latest_training_job``.

    ``name`` / ``job_name``, ``describe()`` (``DescribeTrainingJob``'s shape), ``wait()``, ``stop()`` and
    ``rule_job_summary()`` as the SDK's ``_TrainingJob``; plus ``logs()`` / ``print_logs()`` and the metric series.
    ``local_process`` jobs run to their end inside ``fit()``: there is nothing left to wait for or stop.

    Args:
        sagemaker_session: The estimator's session (never called: nothing here goes to AWS).
        record: The job's record (``description``, ``logs``, ``metric_points``, ``estimator``).
    """

    def __init__(self, sagemaker_session: Any, record: Mapping[str, Any]) -> None:
        super().__init__(sagemaker_session=sagemaker_session, job_name=record["description"]["TrainingJobName"])
        self._record = dict(record)

    @property
    def record(self) -> dict[str, Any]:
        """A copy of the whole record (what ``attach`` reads back)."""
        return copy.deepcopy(self._record)

    def describe(self) -> dict[str, Any]:
        """The job's ``DescribeTrainingJob`` response (a copy)."""
        return copy.deepcopy(self._record["description"])

    @property
    def status(self) -> str:
        """``Completed``, ``Failed`` or ``Stopped``."""
        return self._record["description"]["TrainingJobStatus"]

    @property
    def log_locations(self) -> dict[str, str]:
        """Host -> its log (local path or ``s3://`` URI), in host order."""
        return dict(self._record.get("logs") or {})

    def logs(self) -> dict[str, str]:
        """Each host's log text.

        Raises:
            JobError: A log cannot be read (its location is named).
        """
        texts = {}
        for host, location in self.log_locations.items():
            try:
                if location.startswith("s3://"):
                    where = parse_s3_uri(location, "log")
                    body = make_s3_client().get_object(Bucket=where.bucket, Key=where.prefix)["Body"].read()
                    texts[host] = body.decode("utf-8", errors="replace")
                else:
                    with open(location, encoding="utf-8", errors="replace") as handle:
                        texts[host] = handle.read()
            except Exception as exc:  # a moved folder, a deleted object, S3 refused
                raise JobError(self.name, f"the log of {host} of job {self.name!r} at {location} cannot be read "
                               f"({exc})", status=self.status) from exc
        return texts

    def print_logs(self, stream: IO[str] | None = None) -> None:
        """Prints every host's log, host after host (each line prefixed with its host when there are several, as
        the SDK tells a job's log streams apart)."""
        out = stream if stream is not None else sys.stdout
        texts = self.logs()
        several = len(texts) > 1
        for host, text in texts.items():
            for line in text.splitlines():
                out.write(f"[{host}] {line}\n" if several else f"{line}\n")
        out.flush()

    def wait(self, logs: str = "All") -> None:
        """Returns at once (the job ended inside ``fit()``), printing its logs unless ``logs="None"``.

        Raises:
            JobError: The job failed or was stopped (as the SDK's ``wait`` raises for such a job).
        """
        if logs != "None":
            self.print_logs()
        description = self._record["description"]
        if description["TrainingJobStatus"] != "Completed":
            reason = description.get("FailureReason")
            raise JobError(self.name, f"training job {self.name!r} ended {description['TrainingJobStatus']}"
                           + (f": {reason}" if reason else ""), status=description["TrainingJobStatus"], reason=reason)

    def stop(self) -> None:
        """Refused: a local_process job has ended when ``fit()`` returns.

        Raises:
            JobError: Always (naming the job's status).
        """
        raise JobError(self.name, f"training job {self.name!r} already ended ({self.status}): local_process jobs "
                       "run to their end inside fit(); interrupt fit() (Ctrl-C) or set max_run to stop one",
                       status=self.status)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Refused: profiler and resource settings of an ended local job cannot change.

        Raises:
            JobError: Always.
        """
        raise JobError(self.name, f"training job {self.name!r} ended ({self.status}): a local_process job cannot "
                       "be updated", status=self.status)

    @property
    def metric_points(self) -> list[tuple[float, str, float]]:
        """``(seconds since the job was created, metric name, value)`` for every value its processes printed."""
        return [(float(t), str(n), float(v)) for t, n, v in self._record.get("metric_points") or []]

    def metric_names(self) -> list[str]:
        """The names of the job's metric definitions, in order."""
        return [d["Name"] for d in self._record["description"]["AlgorithmSpecification"]["MetricDefinitions"]]


class LocalTrainingJobAnalytics(AnalyticsMetricsBase):
    """``TrainingJobAnalytics`` for a local_process job: ``dataframe()`` (columns ``timestamp``, ``metric_name``,
    ``value``) and ``export_csv()``, from the values the job's processes printed, found by its metric definitions.

    As the SDK does with CloudWatch's series, each metric's ``timestamp`` is seconds since that metric's first
    value, the rows of a metric sorted by it, the metrics in the order asked for (``metric_names``; None: every
    metric definition of the job).

    Raises:
        ConfigurationError: A name that is none of the job's metric definitions.
    """

    def __init__(self, job: LocalTrainingJob, metric_names: Sequence[str] | None = None) -> None:
        self._job = job
        defined = job.metric_names()
        if metric_names is None:
            self._metric_names = defined
        else:
            unknown = [name for name in metric_names if name not in defined]
            if isinstance(metric_names, str) or unknown:
                raise ConfigurationError(
                    "metric_names", metric_names, f"{unknown or metric_names} not among the job's metric "
                    f"definitions ({', '.join(defined) or 'none'})",
                    "give a list of those names, or define the metric with metric_definitions= before fit()",
                )
            self._metric_names = list(metric_names)
        super().__init__()

    @property
    def name(self) -> str:
        """The training job's name."""
        return self._job.name

    def __repr__(self) -> str:
        return f"<smddp_compat LocalTrainingJobAnalytics for {self.name}>"

    def _fetch_dataframe(self) -> Any:
        import pandas as pd

        rows: list[tuple[float, str, float]] = []
        points = self._job.metric_points
        for name in self._metric_names:
            series = sorted(((t, v) for t, n, v in points if n == name), key=lambda point: point[0])  # stable
            if not series:
                logger.warning("Warning: No metrics called %s found", name)
                continue
            base = series[0][0]
            rows += [(round(t - base, 3), name, v) for t, v in series]
        return pd.DataFrame(rows, columns=["timestamp", "metric_name", "value"])


class NoTrainingJobError(EstimatorError, TypeError):
    """Something of a local_process estimator's job asked before it has one; a TypeError too, as the SDK's own
    estimator raises there (its tuner reads ``model_data`` before the first job and expects that)."""


def no_job_error(what: str) -> EstimatorError:
    """The error for ``what`` asked of a local_process estimator that has no job yet."""
    return NoTrainingJobError(
        f"{what}: this local_process estimator has no training job yet. Fix: call fit() first, or "
        "TensorFlow.attach(job_name, local_output=<the job's output_path>) for a job that ran before"
    )
