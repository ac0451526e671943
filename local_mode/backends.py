"""The two ways local mode runs a job, each returning the one :class:`~local_mode.outcome.JobResult`.

* :class:`ProcessBackend` (``smddp local``'s default): this machine's processes, one ``/opt/ml`` tree per simulated
  host; it receives the checked job (:class:`~local_mode.spec.JobSpec`) and plans every process with
  :mod:`smddp_compat.cluster`'s rules.
* :class:`DockerBackend` (``--backend docker``): the SageMaker twin; it receives a checked CreateTrainingJob request
  (:class:`~local_mode.docker.request.TrainingJobRequest`) and starts the image as SageMaker starts it.

Both run the one job lifecycle (:class:`~local_mode.lifecycle.JobLifecycle`) and return its result: the job's name,
SageMaker's status words, the failure reason, the DescribeTrainingJob answer and the exit code the CLI returns (0
completed, the failed process's code or 1, 124 past the time limit, 128 + the signal that stopped it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO, ClassVar

from smddp_compat.local_mode.docker.request import TrainingJobRequest
from smddp_compat.local_mode.docker.twin import SageMakerTwin
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.runner import run
from smddp_compat.local_mode.spec import JobSpec
from smddp_compat.local_mode.tracking import MlflowSettings

__all__ = ["ProcessBackend", "DockerBackend"]


@dataclass
class ProcessBackend:
    """This machine's processes (:func:`smddp_compat.local_mode.runner.run`).

    Attributes:
        stream: Where the processes' prefixed output and the summary go (standard output when None).
        show_tf_logs: Also show TensorFlow's C++ log lines there.
    """

    name: ClassVar[str] = "process"
    stream: IO[str] | None = None
    show_tf_logs: bool = False

    def run(self, job: JobSpec, control: JobControl | None = None) -> JobResult:
        """Runs the job's H x P processes; see :func:`smddp_compat.local_mode.runner.run`."""
        return run(job, stream=self.stream, show_tf_logs=self.show_tf_logs, control=control)


@dataclass
class DockerBackend:
    """The SageMaker twin (:class:`smddp_compat.local_mode.docker.twin.SageMakerTwin`).

    Each attribute is the twin's argument of the same name (see its docstring); None gives the twin's default, and
    for ``stream`` standard error.
    """

    name: ClassVar[str] = "docker"
    gpus_per_host: int | None = None
    stop_grace: float | None = None
    stream: IO[str] | None = None
    job_name: str | None = None
    output: str | None = None
    checkpoints: str | None = None
    interrupt_after: float | None = None
    short_toolkit_waits: bool | None = None
    tracking: MlflowSettings | None = None

    def run(self, request: TrainingJobRequest) -> JobResult:
        """Replays the request; see :meth:`smddp_compat.local_mode.docker.twin.SageMakerTwin.run`. (A
        :class:`~local_mode.spec.JobSpec` runs in the twin through the request the kit's estimator sends for it:
        ``smddp_compat.estimators.replay.replay_spec``, a layer above local mode.)"""
        options = {} if self.stop_grace is None else {"stop_grace": self.stop_grace}
        return SageMakerTwin(
            request, gpus_per_host=self.gpus_per_host, stream=self.stream if self.stream is not None else sys.stderr,
            job_name=self.job_name, output=self.output, checkpoints=self.checkpoints,
            interrupt_after=self.interrupt_after, short_toolkit_waits=self.short_toolkit_waits,
            tracking=self.tracking, **options,
        ).run()
