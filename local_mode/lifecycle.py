"""One job's life on this machine, the same sequence in both backends: :class:`JobLifecycle`.

claim the name and destination -> prepare the hosts (``Downloading``) -> start and supervise them (``Training``)
-> store the artifacts whatever the end (``Uploading``) -> :class:`~local_mode.outcome.JobResult` -> clean up.

A backend (the process backend, :mod:`~local_mode.runner`; the SageMaker twin, :mod:`~local_mode.docker.twin`)
supplies only what differs: how the hosts are prepared, how their processes or containers start and are watched,
what it does once they ended, and what it releases. What follows is written here once and holds in both:

* the destination is claimed for the job's whole life and refused when it already holds another job's files;
* a stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) before the hosts run ends the job ``Stopped`` (exit code 128 +
  the signal) with nothing left running and the temporary tree removed;
* the model, output and logs are stored whatever the end, as SageMaker stores them; when they cannot be, the job is
  ``Failed`` with SageMaker's ``ClientError`` reason and the hosts' folders are kept (their path is said);
* ``SecondaryStatusTransitions`` and the metrics (one :class:`~local_mode.metrics.MetricWatch` fed every line the
  job prints) are recorded as they happen, and the answer is built by one builder
  (:meth:`~local_mode.outcome.JobResult.describe`);
* a job given MLflow settings is a run (:mod:`~local_mode.tracking`): made before anything starts (a server that
  cannot be reached stops the job there, unless it may run untracked), in the scripts' environment
  (:attr:`JobLifecycle.tracking_environment`), ended with the job's metric series and status.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from smddp_compat import contract
from smddp_compat.launcher import StopSignalled, stop_signals_handled
from smddp_compat.local_mode.artifacts import ArtifactPaths, store_artifacts
from smddp_compat.errors import SmddpError
from smddp_compat.local_mode.errors import ArtifactError, ConfigurationError, LocalModeError
from smddp_compat.local_mode.job_claim import claimed_job
from smddp_compat.local_mode.layout import HostLayout
from smddp_compat.local_mode.metrics import MetricDefinition, MetricWatch
from smddp_compat.local_mode.outcome import COMPLETED, FAILED, STOPPED, JobResult, SecondaryStatusLog, model_location
from smddp_compat.local_mode.s3 import S3Location, check_s3_destination
from smddp_compat.local_mode.tracking import MlflowSettings, TrackedRun

__all__ = ["JobControl", "JobEnd", "JobLifecycle"]

#: Exit codes by secondary status (a failure gives the failed process's or host's own code).
_EXIT_CODES = {COMPLETED: 0, "MaxRuntimeExceeded": 124}


@dataclass
class JobControl:
    """A job's handle for whoever runs it from another thread (a tuning job's trials): :meth:`stop` is SageMaker's
    StopTrainingJob (the job ends ``Stopped``, its artifacts stored), and ``on_metric`` hears each metric value as the
    job's logs print it (:class:`~local_mode.metrics.MetricWatch`'s ``on_value``)."""

    on_metric: Callable[[str, float], None] | None = None
    stop_requested: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        """Asks the job to stop; it may be called from any thread, before the job starts too."""
        self.stop_requested.set()


@dataclass
class JobEnd:
    """How the hosts' processes or containers ended, as a backend's :meth:`JobLifecycle._supervise` reports it.

    Attributes:
        status: ``Completed``, ``Failed`` or ``Stopped``.
        secondary: The secondary status (``MaxRuntimeExceeded`` for a time limit); the status when None.
        exit_code: The failed process's or host's code (a failure), or 128 + the signal that stopped the job; None:
            the status's own (0 completed, 124 past the time limit, 143 stopped, 1 failed).
        reason: ``FailureReason``, or None.
        details: More :class:`~local_mode.outcome.JobResult` fields the backend knows (``processes``, ...).
    """

    status: str
    secondary: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> int:
        """The exit code ``smddp local`` returns."""
        if self.exit_code is not None:
            return self.exit_code
        return _EXIT_CODES.get(self.secondary or self.status, 143 if self.status == STOPPED else 1)


class JobLifecycle:
    """The sequence every local job runs (see the module docstring); a backend subclasses it, with ``destination``
    ``<output>/<job_name>`` (a folder or an S3 location) and ``compression`` ``OutputDataConfig.CompressionType``.

    A backend implements :meth:`_make_root`, :meth:`_prepare`, :meth:`_supervise` and :meth:`_log_files`, and may
    override :meth:`_after_end` (last syncs once the hosts ended), :meth:`_release` (what it started, removed
    whatever happened), :meth:`_on_signal` (a signal while the hosts run), :meth:`_extras` and :meth:`_say`.
    """

    _prefix = "[local_mode]"

    def __init__(self, job_name: str, destination: Path | S3Location, *,
                 metric_definitions: tuple[MetricDefinition, ...] = (), compression: str = "GZIP",
                 control: JobControl | None = None, tracking: MlflowSettings | None = None) -> None:
        self.job_name = job_name
        self.tracking = tracking
        self.tracked: TrackedRun | None = None
        self.destination = destination
        self.compression = compression
        self.control = control if control is not None else JobControl()
        self.statuses = SecondaryStatusLog()
        self.metrics = MetricWatch(metric_definitions, keep_series=True, on_value=self.control.on_metric)
        self.stream: IO[str] | None = None
        self._phase = "preparing"
        #: Keep the job's tree at the end: a folder the user chose, the twin's ``keep``, or a tree that holds what
        #: could not be stored or uploaded.
        self._keep_root = False

    # -- what a backend supplies -------------------------------------------------------------------------------------

    def _make_root(self) -> Path:
        """Creates the folder of the job's host trees (removed at the end unless :attr:`_keep_root` is set)."""
        raise NotImplementedError

    def _prepare(self, root: Path) -> dict[str, HostLayout]:
        """Builds every host's ``/opt/ml`` tree with its channels and code (``Downloading``); returns them."""
        raise NotImplementedError

    def _supervise(self, root: Path, layouts: dict[str, HostLayout]) -> JobEnd:
        """Starts the hosts' processes or containers (the status is then ``Training``) and watches them to their end."""
        raise NotImplementedError

    def _log_files(self, root: Path, layouts: Mapping[str, HostLayout]) -> dict[str, Path]:
        """Host -> its log file."""
        raise NotImplementedError

    def _after_end(self, layouts: dict[str, HostLayout], end: JobEnd) -> None:
        """Once the hosts ended, before the artifacts are stored (the twin's last syncs)."""

    def _release(self) -> None:
        """Removes what the backend started (run whatever happened, once)."""

    def _on_signal(self, signum: int) -> None:
        """A stop signal while the hosts run (the process backend's group handles its own)."""

    def _extras(self, end: JobEnd) -> dict[str, Any]:
        """More :class:`JobResult` fields (the request's members, the ARN, the twin's notes)."""
        return {}

    def _tracked_facts(self) -> tuple[Mapping[str, Any], dict[str, str]]:
        """The job's hyperparameters and its MLflow run's tags (distribution, instance count and type, image)."""
        return {}, {}

    @property
    def tracking_environment(self) -> dict[str, str]:
        """What the job's scripts get to log to its MLflow run (empty for an untracked job)."""
        return self.tracked.environment() if self.tracked is not None else {}

    def _say(self, message: str) -> None:
        if self.stream is not None:
            self.stream.write(f"{self._prefix} {message}\n")
            self.stream.flush()

    # -- the sequence ------------------------------------------------------------------------------------------------

    def _check_destination(self, client: Any | None = None) -> None:
        """Refuses a destination that already exists (nothing is written over another job's), or an S3 bucket that
        cannot be reached with ``client`` (found before the training, not after it)."""
        destination = self.destination
        if isinstance(destination, S3Location):
            check_s3_destination(destination, "output_path", self.job_name, client=client)
        elif destination.exists() or destination.is_symlink():
            raise ConfigurationError(
                "job_name", self.job_name, f"results of a job with this name already exist at {destination}; "
                "nothing is written over another job's", "choose another job name (--job-name) or output folder "
                "(--output), or remove that folder",
            )

    def _prepared(self, root: Path) -> dict[str, HostLayout]:
        """:meth:`_prepare`, with a file system's refusal (a full disk, a file-size limit) said in one line."""
        try:
            return self._prepare(root)
        except OSError as exc:
            if isinstance(exc, SmddpError):  # already says what and how to fix it
                raise
            raise LocalModeError(
                f"the job's hosts could not be prepared in {root}: {exc.strerror or exc}"
                f"{f' ({exc.filename})' if exc.filename else ''}. Fix: free space there, or give a folder on a "
                "disk with room (--work-dir, or the TMPDIR environment variable)"
            ) from exc

    def _training(self) -> datetime:
        """Notes that the hosts run (a backend calls it once they started)."""
        self._phase = "running"
        return self.statuses.enter("Training")

    def run(self) -> JobResult:
        """Runs the job to its end and cleans up; see the module docstring.

        Returns:
            The job's result (it does not raise when the job fails: :meth:`JobResult.raise_for_status`).

        Raises:
            ConfigurationError: The job's name or destination is taken, or the destination cannot be reached.
            ChannelError: A channel could not be fetched (nothing was started).
        """
        self.statuses = SecondaryStatusLog()
        self.statuses.enter("Starting")  # CreationTime
        self._phase = "preparing"
        root = self._make_root()
        with stop_signals_handled(self._on_stop_signal):
            return self._run_in(root)

    def _run_in(self, root: Path) -> JobResult:
        """:meth:`run`'s sequence in the job's tree ``root``, its stop signals handled (:meth:`_on_stop_signal`)."""
        destination_is_ours = False  # it did not exist when the job claimed it
        try:
            with claimed_job(self.destination, self.job_name):
                self._check_destination()
                destination_is_ours = True
                if self.tracking is not None:
                    hyperparameters, tags = self._tracked_facts()
                    self.tracked = TrackedRun.start(self.tracking, job_name=self.job_name,
                                                    hyperparameters=hyperparameters, tags=tags, say=self._say)
                self.statuses.enter("Downloading")
                layouts = self._prepared(root)
                if self.control.stop_requested.is_set():  # StopTrainingJob while it downloaded: nothing starts
                    self._phase = "interrupted"
                    raise StopSignalled(signal.SIGTERM)
                end = self._supervise(root, layouts)
                detected = datetime.now(timezone.utc) if end.status == FAILED else None
                self._phase = "finishing"
                self.statuses.enter("Uploading")
                self._after_end(layouts, end)
                artifacts = self._store(root, layouts, end)
                result = self._result(end, artifacts, detected)
        except StopSignalled as stopped:
            asked = self.control.stop_requested.is_set() and stopped.signum == signal.SIGTERM
            self._say(f"{'asked to stop' if asked else signal.Signals(stopped.signum).name} before the job started: "
                      "nothing was left running")
            end = JobEnd(STOPPED, exit_code=128 + stopped.signum)
            result = self._result(end, ArtifactPaths(model=None, output=None), None)
        finally:
            ours_unused = destination_is_ours and self._phase in ("preparing", "interrupted")
            self._phase = "cleaning"
            try:
                self._release()
            finally:
                if not self._keep_root:
                    shutil.rmtree(root, ignore_errors=True)
                if ours_unused:
                    self._remove_empty_destination()
        return result

    def _remove_empty_destination(self) -> None:
        """A job that ended before its hosts ran leaves no folder it created (the empty checkpoints folder) that
        would make its name taken; a destination holding any file is left as it is."""
        destination = self.destination
        if isinstance(destination, Path) and destination.is_dir() and not destination.is_symlink():
            if not any(files for _, _, files in os.walk(destination)):
                shutil.rmtree(destination, ignore_errors=True)

    def _store(self, root: Path, layouts: dict[str, HostLayout], end: JobEnd) -> ArtifactPaths:
        """Stores the hosts' model, output and logs whatever the end; when they cannot be stored the job fails as
        SageMaker fails it (``ClientError``) and the hosts' folders are kept, their path said."""
        try:
            return store_artifacts(
                self.destination,
                model_dirs={host: layout.model_dir for host, layout in layouts.items()},
                output_data_dirs={host: layout.output_data_dir for host, layout in layouts.items()},
                log_files=self._log_files(root, layouts),
                scratch_dir=root,
                compression=self.compression,
            )
        except ArtifactError as exc:
            self._keep_root = True  # the trained model is only there now
            hosts = next(iter(layouts.values())).root.parent if layouts else root
            ended = end.secondary or end.status
            end.status = end.secondary = FAILED
            end.exit_code = 1
            end.reason = contract.truncate_failure_reason(
                f"ClientError: the job ended {ended} but its artifacts could not be stored: {exc}. Nothing was "
                f"deleted: the hosts' model, output and checkpoint folders are kept under {hosts}"
            )
            return ArtifactPaths(model=None, output=None)

    def _result(self, end: JobEnd, artifacts: ArtifactPaths, detected: datetime | None) -> JobResult:
        secondary = end.secondary or end.status
        created = self.statuses.transitions[0]["StartTime"]
        finished = self.statuses.finish(secondary)
        if self.tracked is not None:
            local = self.destination if isinstance(self.destination, Path) and self.destination.is_dir() else None
            self.tracked.finish(status=end.status, series=self.metrics.series, model=artifacts.model, ended=finished,
                                pending_dir=local, say=self._say)
        return JobResult(
            job_name=self.job_name, status=end.status, secondary_status=secondary, failure_reason=end.reason,
            exit_code=end.code, artifacts=artifacts, start=created, end=finished,
            transitions=self.statuses.transitions, model_location=model_location(self.destination, self.compression),
            final_metric_data=self.metrics.final_metric_data(), metric_series=list(self.metrics.series),
            failure_detected=detected, mlflow_details=self.tracked.details() if self.tracked else None,
            **end.details, **self._extras(end),
        )

    def _on_stop_signal(self, signum: int, _frame: object) -> None:
        """A stop signal (heard in the main thread only): it ends the preparation (:class:`StopSignalled`); while
        the hosts run, it is :meth:`_on_signal`'s; later ones are noted only (the clean-up runs to its end)."""
        if self._phase == "preparing":
            self._phase = "interrupted"
            raise StopSignalled(signum)
        if self._phase == "running":
            self._on_signal(signum)
