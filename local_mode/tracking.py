"""A local job as an MLflow run, as SageMaker's managed MLflow tracks a training job.

SageMaker takes ``MlflowConfig`` (the tracking server, an experiment name, a run name) with CreateTrainingJob and
answers ``MlflowDetails`` (the experiment's and the run's ids) in DescribeTrainingJob. Here both backends do the same
through the job lifecycle (:class:`~local_mode.lifecycle.JobLifecycle`), with any MLflow tracking URI this machine
reaches (``http(s)://`` a tracking server, ``sqlite:`` or ``file:`` a local store):

* before anything starts, the run is made (the experiment too, when it does not exist yet) in state ``RUNNING``,
  named as the job unless a run name is given, in the experiment named, else the job's base name; its params are
  the job's hyperparameters (toolkit parameters left out), its tags the job's name, distribution, instance count and
  type and image; a tracking server that cannot be reached is one line, and the job does not start (unless
  untracked runs were asked for: then the job runs and says it is not tracked);
* the script finds the run in its environment (``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID``,
  ``MLFLOW_EXPERIMENT_ID``): ``import mlflow`` logs to the same run, as on SageMaker;
* when the job has ended, its metric series (every value its metric definitions captured, with the time it was
  printed and its place in its series as the step: the values ``describe()``'s final metrics come from), a link to its
  model artifact, and its status (``FINISHED``, ``FAILED``, ``KILLED`` for a stop) are sent in batches; nothing is
  sent while the job trains, so an outage never slows or fails the training. When the server cannot be reached at
  the end, what was not sent is written to the job's folder (:data:`PENDING_FILE`) and ``smddp mlflow send FILE``
  sends it later (:func:`send_pending`).

Credentials in an ``http(s)://user:password@host`` URI are sent as MLflow's own variables
(``MLFLOW_TRACKING_USERNAME``/``PASSWORD``), never printed, described or written to the job's files (the URI is
kept without them). Every request to the server is bounded (:data:`REQUEST_LIMITS`, unless the environment sets
MLflow's own variables).
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from smddp_compat import contract
from smddp_compat.local_mode.errors import ConfigurationError, TrackingError

__all__ = ["MlflowSettings", "TrackedRun", "RunRecord", "PENDING_FILE", "REQUEST_LIMITS", "RUN_STATUS",
           "send_pending", "base_name", "ensure_experiment"]

#: MLflow's own request settings while the kit talks to the server (the environment's win): one try of at most
#: 10 s, then 2 retries 1 s and 2 s apart (MLflow's defaults retry for about 4 minutes before a refusal is said).
REQUEST_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
                  "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}

#: The run's final status by the job's (SageMaker's ``Stopped`` is MLflow's ``KILLED``).
RUN_STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Stopped": "KILLED"}

#: What the end of a run could not send, in the job's folder: ``smddp mlflow send`` sends it.
PENDING_FILE = "mlflow-pending.json"

_SCHEMES = ("http", "https", "sqlite", "file")
_NAME_LIMIT = 256  # SageMaker's MlflowExperimentName / MlflowRunName
_METRIC_KEY = re.compile(r"[^\w./\- :]")
_BATCH = 1000


@dataclass(frozen=True)
class MlflowSettings:
    """Where a job is tracked: SageMaker's ``MlflowConfig``, with this machine's choices.

    Attributes:
        tracking_uri: An MLflow tracking URI: ``http(s)://`` (a tracking server), ``sqlite:///PATH`` or ``file:PATH``.
        experiment_name: The experiment (made when missing); None: the job's base name.
        run_name: The run's name; None: the job's name.
        untracked_if_unreachable: A server that cannot be reached when the job starts: run untracked (said in one
            line) instead of refusing to start.
        parent_run_id: The run this job's run belongs to (a tuning job's run, for its trials).
    """

    tracking_uri: str
    experiment_name: str | None = None
    run_name: str | None = None
    untracked_if_unreachable: bool = False
    parent_run_id: str | None = None

    def __post_init__(self) -> None:
        uri = self.tracking_uri
        if not isinstance(uri, str) or not uri:
            raise ConfigurationError("mlflow tracking URI", uri, "must be an MLflow tracking URI",
                                     "e.g. http://127.0.0.1:5000 (mlflow server), or sqlite:///ABS/PATH/mlflow.db")
        scheme = urllib.parse.urlsplit(uri).scheme
        if uri.startswith("arn:"):
            raise ConfigurationError(
                "mlflow tracking URI", _without_credentials(uri), "names SageMaker's managed MLflow, which only a job "
                "on SageMaker reaches", "give a tracking server or store this machine reaches (http://HOST:PORT, "
                "sqlite:///ABS/PATH/mlflow.db)")
        if scheme not in _SCHEMES:
            raise ConfigurationError("mlflow tracking URI", _without_credentials(uri),
                                     f"has scheme {scheme or 'none'!r}; one of {', '.join(_SCHEMES)} is tracked here",
                                     "e.g. http://127.0.0.1:5000 (mlflow server), or sqlite:///ABS/PATH/mlflow.db")
        for name, value in (("mlflow experiment name", self.experiment_name), ("mlflow run name", self.run_name)):
            if value is not None and (not isinstance(value, str) or not 1 <= len(value) <= _NAME_LIMIT
                                      or value != value.strip()):
                raise ConfigurationError(name, value, f"must be 1 to {_NAME_LIMIT} characters, not starting or "
                                         "ending with a space", "give a shorter name")

    @property
    def public_uri(self) -> str:
        """The tracking URI without the credentials it may hold (what is described, printed and given to scripts)."""
        return _without_credentials(self.tracking_uri)

    def credentials(self) -> dict[str, str]:
        """MLflow's variables for the URI's credentials (empty when it has none)."""
        parts = urllib.parse.urlsplit(self.tracking_uri)
        if parts.scheme not in ("http", "https") or parts.username is None:
            return {}
        return {"MLFLOW_TRACKING_USERNAME": urllib.parse.unquote(parts.username),
                "MLFLOW_TRACKING_PASSWORD": urllib.parse.unquote(parts.password or "")}

    def named_by(self, config: Mapping[str, Any] | None) -> MlflowSettings:
        """These settings with a request's ``MlflowConfig`` naming the experiment and the run where these name none
        (a replayed SageMaker request keeps its names; where it is tracked stays these settings' URI: its
        ``MlflowResourceArn`` names SageMaker's managed MLflow, which this machine does not reach).

        Raises:
            ConfigurationError: A name in ``config`` that MLflow cannot take (as for these settings' own).
        """
        config = config if isinstance(config, Mapping) else {}
        return replace(self, experiment_name=self.experiment_name or config.get("MlflowExperimentName") or None,
                       run_name=self.run_name or config.get("MlflowRunName") or None)

    def request_config(self) -> dict[str, str]:
        """SageMaker's ``MlflowConfig`` for these settings (the URI stands in for ``MlflowResourceArn``, as SDK v3
        reads it: the tracking URI of the job's run)."""
        return {"MlflowResourceArn": self.public_uri,
                **({"MlflowExperimentName": self.experiment_name} if self.experiment_name else {}),
                **({"MlflowRunName": self.run_name} if self.run_name else {})}


def _without_credentials(uri: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def base_name(job_name: str) -> str:
    """A job's name less the timestamp the kit and the SDKs add (``train-2026-12-04-08-00-00-123`` -> ``train``;
    also SDK v2's tuning jobs' ``-261204-0800``, ``smddp tune``'s ``-261204-080000`` and SDK v3's
    ``-20261204080000``)."""
    return re.sub(r"-(\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}|\d{6}-\d{4}(\d{2})?|\d{14})$", "",
                  job_name) or job_name


def _bound_requests() -> None:
    """MLflow's request settings of :data:`REQUEST_LIMITS` where the environment sets none (MLflow reads them on
    every request); set for the process, as a tuning job's trials share them."""
    for name, value in REQUEST_LIMITS.items():
        os.environ.setdefault(name, value)


def _client(settings: MlflowSettings) -> Any:
    from mlflow import MlflowClient  # noqa: PLC0415 - mlflow is an extra: imported only for a tracked job

    _bound_requests()  # for every later request of this process too (a run's end, a tuning job's trials)

    for name, value in settings.credentials().items():
        os.environ[name] = value  # MLflow reads them per request; the URI it is given holds none
    return MlflowClient(tracking_uri=settings.public_uri)


#: What a client error's text says, in short (the first that matches), else its first line.
_SHORT_REASONS = (("Connection refused", "connection refused"), ("timed out", "timed out"),
                  ("Name or service not known", "the host name is unknown"),
                  ("Max retries exceeded", "no answer"))


def _experiment_id(client: Any, name: str) -> str:
    """The id of the experiment ``name``, made when missing."""
    experiment = client.get_experiment_by_name(name)
    return experiment.experiment_id if experiment else client.create_experiment(name)


def ensure_experiment(settings: MlflowSettings, name: str) -> str:
    """The id of the experiment ``name`` at ``settings``' tracking URI, made (with the store itself, for a new SQLite
    file) when missing: what a job's first run would otherwise make while it is timed.

    Raises:
        ImportError: mlflow is not installed (the ``mlflow`` extra).
    """
    return _experiment_id(_client(settings), name)


def _unreachable(exc: BaseException, settings: MlflowSettings) -> str:
    """One line for a tracking failure, without credentials or a traceback."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for secret in settings.credentials().values():
        if secret:
            text = text.replace(secret, "***")
    text = text.replace(settings.tracking_uri, settings.public_uri)
    short = next((said for found, said in _SHORT_REASONS if found in text), None)
    return f"{settings.public_uri} could not be reached: {short or text[:300]}"


@dataclass
class RunRecord:
    """What a run's end sends: its metrics, tags and status (also what :data:`PENDING_FILE` holds)."""

    tracking_uri: str
    run_id: str
    status: str
    end_time: int
    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)  # key, value, timestamp (ms), step
    tags: dict[str, str] = field(default_factory=dict)

    def send(self, client: Any) -> None:
        """Sends the metrics and tags in batches, then the status (the last call: a run marked ended is complete)."""
        from mlflow.entities import Metric, RunTag  # noqa: PLC0415 - the extra, as above

        for start in range(0, len(self.metrics), _BATCH):
            batch = [Metric(key, value, timestamp, step) for key, value, timestamp, step in
                     self.metrics[start:start + _BATCH]]
            client.log_batch(self.run_id, metrics=batch)
        if self.tags:
            client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in self.tags.items()])
        client.set_terminated(self.run_id, status=self.status, end_time=self.end_time)


def _metric_points(series: Sequence[tuple[datetime, str, float]]) -> list[tuple[str, float, int, int]]:
    """The job's metric series as MLflow points: each value at the time it was printed, its step its place in its
    own series (0, 1, ...), its name with characters MLflow refuses written ``_``."""
    steps: dict[str, int] = {}
    points = []
    for when, name, value in series:
        key = _METRIC_KEY.sub("_", name)[:250]
        points.append((key, float(value), int(when.timestamp() * 1000), steps.get(key, 0)))
        steps[key] = steps.get(key, 0) + 1
    return points


def _param_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class TrackedRun:
    """A job's MLflow run, from :meth:`start` (before the hosts start) to :meth:`finish` (once the job has ended).

    Attributes:
        settings: Where it is tracked.
        run_id: The run's id.
        experiment_id: Its experiment's id.
        experiment_name: Its experiment's name.
    """

    settings: MlflowSettings
    run_id: str
    experiment_id: str
    experiment_name: str = ""
    _client: Any = field(repr=False, default=None)

    @classmethod
    def start(cls, settings: MlflowSettings, *, job_name: str, hyperparameters: Mapping[str, Any],
              tags: Mapping[str, str], say: Callable[[str], None]) -> TrackedRun | None:
        """Makes the job's run (and its experiment when missing), with its params and tags, in state RUNNING.

        Returns:
            The run; None when the server cannot be reached and ``settings.untracked_if_unreachable`` (said).

        Raises:
            TrackingError: The server cannot be reached (nothing started).
        """
        try:
            client = _client(settings)
            experiment_name = settings.experiment_name or base_name(job_name)
            experiment_id = _experiment_id(client, experiment_name)
            all_tags = {"sagemaker.training_job_name": job_name, **tags}
            if settings.parent_run_id:
                all_tags["mlflow.parentRunId"] = settings.parent_run_id
            run = client.create_run(experiment_id, run_name=settings.run_name or job_name, tags=all_tags)
            params = contract.split_toolkit_parameters(hyperparameters)[0]
            if params:
                from mlflow.entities import Param  # noqa: PLC0415 - the extra, as above

                client.log_batch(run.info.run_id, params=[Param(k, _param_value(v)) for k, v in params.items()])
        except ImportError as exc:
            raise ConfigurationError("mlflow tracking URI", settings.public_uri, f"needs mlflow ({exc})",
                                     "pip install 'smddp-compat[mlflow]' (setup.sh installs it)") from exc
        except Exception as exc:  # noqa: BLE001 - any failure of the client or the server is the same line
            reason = _unreachable(exc, settings)
            if settings.untracked_if_unreachable:
                say(f"not tracked in MLflow: {reason}")
                return None
            raise TrackingError(
                settings.public_uri, f"could not be used: {reason}",
                "start the tracking server (mlflow server --host 127.0.0.1 --port PORT), fix the URI, or run "
                "untracked when it cannot be reached (--mlflow-optional; MlflowSettings(URI, "
                "untracked_if_unreachable=True))") from None
        say(f"tracked in MLflow: run {run.info.run_id} in experiment {experiment_name!r} at {settings.public_uri}")
        return cls(settings, run.info.run_id, experiment_id, experiment_name, client)

    def environment(self) -> dict[str, str]:
        """What the job's scripts get to log to the same run (``import mlflow`` finds it)."""
        return {"MLFLOW_TRACKING_URI": self.settings.public_uri, "MLFLOW_RUN_ID": self.run_id,
                "MLFLOW_EXPERIMENT_ID": self.experiment_id, **self.settings.credentials()}

    def details(self) -> dict[str, str]:
        """SageMaker's ``MlflowDetails``."""
        return {"MlflowExperimentId": self.experiment_id, "MlflowRunId": self.run_id}

    def finish(self, *, status: str, series: Sequence[tuple[datetime, str, float]], model: str | None,
               ended: datetime, pending_dir: Path | None, say: Callable[[str], None]) -> None:
        """Sends the job's metric series, its model's place and its final status (``status``: the job's).

        When the server cannot be reached, what was not sent is written to ``pending_dir`` /
        :data:`PENDING_FILE` (the current folder when None) and the command that sends it is said; the job's own
        outcome is unchanged.
        """
        record = RunRecord(self.settings.public_uri, self.run_id, RUN_STATUS.get(status, "FAILED"),
                           int(ended.timestamp() * 1000), _metric_points(series),
                           {"sagemaker.status": status, **({"sagemaker.model_artifacts": model} if model else {})})
        self._end(record, pending_dir, say)

    def trial_settings(self) -> MlflowSettings:
        """The settings of a tuning job's trial: a run of this run's experiment, under it (a child run), named as
        the trial."""
        return MlflowSettings(self.settings.tracking_uri, experiment_name=self.experiment_name,
                              untracked_if_unreachable=self.settings.untracked_if_unreachable,
                              parent_run_id=self.run_id)

    def finish_tuning(self, *, described: Mapping[str, Any], trials: Sequence[Mapping[str, Any]],
                      trial_runs: Mapping[str, str], stopped_early: Sequence[str], pending_dir: Path | None,
                      say: Callable[[str], None]) -> None:
        """Ends a tuning job's run (``described``: DescribeHyperParameterTuningJob; ``trials``: its training job
        summaries; ``trial_runs``: trial -> its run): the objective of each trial that gave one as a series in the
        order they ended, the best trial (name and run) as tags, the trials stopped early tagged so, and the tuning
        job's status."""
        objective = [(t["TrainingEndTime"], t["FinalHyperParameterTuningJobObjectiveMetric"]["MetricName"],
                      t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]) for t in trials
                     if t.get("FinalHyperParameterTuningJobObjectiveMetric") and t.get("TrainingEndTime")]
        best = (described.get("BestTrainingJob") or {}).get("TrainingJobName")
        status = str(described.get("HyperParameterTuningJobStatus", "Failed"))
        ended = described.get("HyperParameterTuningEndTime") or datetime.now().astimezone()
        tags = {"sagemaker.status": status, **({"sagemaker.best_training_job": best} if best else {}),
                **({"sagemaker.best_run_id": trial_runs[best]} if best in trial_runs else {})}
        record = RunRecord(self.settings.public_uri, self.run_id, RUN_STATUS.get(status, "FAILED"),
                           int(ended.timestamp() * 1000), _metric_points(sorted(objective, key=lambda o: o[0])), tags)
        for trial in stopped_early:
            if trial in trial_runs:
                try:
                    self._client.set_tag(trial_runs[trial], "sagemaker.stopped_early", "true")
                except Exception as exc:  # noqa: BLE001 - said; the tuning run's end is still sent or kept
                    say(f"MLflow: trial {trial} was not tagged as stopped early: {_unreachable(exc, self.settings)}")
        self._end(record, pending_dir, say)

    def _end(self, record: RunRecord, pending_dir: Path | None, say: Callable[[str], None]) -> None:
        """Sends ``record``; when it cannot be sent, keeps it in ``pending_dir`` and says how to send it later."""
        try:
            record.send(self._client)
            return
        except Exception as exc:  # noqa: BLE001 - kept, whatever failed
            reason = _unreachable(exc, self.settings)
        folder = pending_dir if pending_dir is not None else Path.cwd()
        path = folder / PENDING_FILE
        contract.write_atomically(path, json.dumps(asdict(record)))
        say(f"MLflow: the run's end was not sent ({reason}); {len(record.metrics)} metric points and its status "
            f"are kept in {path}: send them with `smddp mlflow-send {path}`")


def send_pending(path: Path) -> RunRecord:
    """Sends a run's end kept in ``path`` (:data:`PENDING_FILE`) to the server it names, then removes the file.

    Credentials, if the server needs them, come from MLflow's own variables (``MLFLOW_TRACKING_USERNAME``...).

    Raises:
        ConfigurationError: The file is not a run's kept end.
        TrackingError: The server still cannot be reached (the file is kept).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        record = RunRecord(str(data["tracking_uri"]), str(data["run_id"]), str(data["status"]),
                           int(data["end_time"]), [(str(k), float(v), int(t), int(s)) for k, v, t, s in data["metrics"]],
                           {str(k): str(v) for k, v in data["tags"].items()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError("file", str(path), f"is not a run's end kept by a job ({exc})",
                                 f"give the {PENDING_FILE} a job wrote") from None
    settings = MlflowSettings(record.tracking_uri)
    try:
        record.send(_client(settings))
    except Exception as exc:  # noqa: BLE001 - the same line, whatever failed
        raise TrackingError(str(path), f"was not sent: {_unreachable(exc, settings)}",
                            "start the tracking server and send it again", field="file") from None
    Path(path).unlink()
    return record
