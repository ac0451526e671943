"""The SageMaker twin: what SageMaker does with a CreateTrainingJob request, done with this machine's Docker engine.

:class:`SageMakerTwin` follows SageMaker's start sequence for a
:class:`~local_mode.docker.request.TrainingJobRequest`, step by step as ``local_mode/docker/README.md`` describes it:
each host's ``/opt/ml``, an internal network of the job's own with the twin's own S3, every container started with
``train``, checkpoints and TensorBoard synced while it runs, the artifacts and DescribeTrainingJob's answer at the end.
Every other member of the request is reproduced, warned about once at the start (``[twin] warning: ...``) or
refused, as the table of :mod:`~smddp_compat.local_mode.docker._fields` says.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import psutil

from smddp_compat import contract
from smddp_compat.image import LATEST_TAG, Engine, find_engine, image_exists
from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.cuda import check_image_for_instance_type
from smddp_compat.image.train import SHORT_TOOLKIT_WAITS
from smddp_compat.instance_types import find_instance_type
from smddp_compat.launcher import ConsoleStream
from smddp_compat.local_mode.artifacts import job_destination
from smddp_compat.local_mode.channels import copy_s3_prefix, download_s3_channel, place_channel
from smddp_compat.local_mode.docker._containers import TWIN_LABEL, Mount, TwinEngine
from smddp_compat.local_mode.docker._fields import config_files
from smddp_compat.local_mode.docker._failure_reason import failure_reason
from smddp_compat.local_mode.docker._reaper import reaper_argv
from smddp_compat.local_mode.docker._twin_s3 import Snapshot, create_buckets, script_writes, snapshot
from smddp_compat.local_mode.docker.errors import ContainerError, ImageNotFoundError
from smddp_compat.local_mode.docker.request import TrainingJobRequest
from smddp_compat.local_mode.errors import ChannelError, ConfigurationError
from smddp_compat.local_mode.folder_sync import FolderSync, sync_target
from smddp_compat.local_mode.layout import HostLayout, create_host_tree, resource_config
from smddp_compat.local_mode.lifecycle import JobControl, JobEnd, JobLifecycle
from smddp_compat.local_mode.metrics import watchable_definitions
from smddp_compat.local_mode.name_values import decode_value
from smddp_compat.local_mode.outcome import FAILED, JobResult
from smddp_compat.local_mode.s3 import S3Location, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.spec import DEFAULT_OUTPUT_PATH
from smddp_compat.local_mode.tracking import MlflowSettings

__all__ = ["SageMakerTwin", "replay", "replay_job_name", "cut_toolkit_waits", "NETWORK_INTERFACE", "STOP_GRACE_SECONDS"]

NETWORK_INTERFACE = "eth0"
"""The interface each container's hosts talk over (written to resourceconfig.json)."""

STOP_GRACE_SECONDS = 120.0
"""SageMaker's time between SIGTERM and SIGKILL when a job is stopped or runs out of time."""

_S3_PORT = 9000
_S3_READY_SECONDS = 60.0
_POLL_SECONDS = 0.5
TRACKED_FROM_THE_LOGS = ("mlflow: the job's run is made and ended on this machine, its metrics read from the "
                         "containers' logs; the containers get no MLFLOW_RUN_ID (they reach no server of this machine)")
"""The twin's own choice for a tracked job (``tracking``), said at the start and listed in ``Twin.Warnings``."""


SHORT_WAITS_WARNING = ("short_toolkit_waits: the training toolkit's fixed 30 s sleeps after an MPI or SMDDP launch "
                       "last at most 1 s here; SageMaker waits them (and bills them)")
"""The twin's own choice, said at the start and listed in ``Twin.Warnings``, when the toolkit's waits are cut."""
YIELD_WHEN_IDLE = "OMPI_MCA_mpi_yield_when_idle"
"""Open MPI's setting that makes a rank waiting in MPI yield its core (see :func:`shared_cores_environment`)."""
BINDING_POLICY = "OMPI_MCA_hwloc_base_binding_policy"
"""Open MPI's setting of where mpirun binds each rank (``--bind-to``; see :func:`shared_cores_environment`)."""
_TWIN_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "smddp-twin", "AWS_SECRET_ACCESS_KEY": "smddp-twin"}


def failed_exit_code(codes: dict[str, int], failed_host: str | None) -> int:
    """The exit code a failed job reports: the failed host's own, never that of a host the twin killed after it (137),
    which may come first in host order; else the first non-zero code; else 1."""
    if failed_host and codes.get(failed_host):
        return codes[failed_host]
    return next((code for code in codes.values() if code), 1)


class SageMakerTwin(JobLifecycle):
    """Runs one CreateTrainingJob request as SageMaker would, in containers on this machine (the twin's part of the
    job's lifecycle, :class:`~local_mode.lifecycle.JobLifecycle`).

    Args:
        request: The request.
        gpus_per_host: For GPU instance types: the GPUs each host shows the toolkit (one process each, on the CPU);
            default: the instance type's GPUs, at most this machine's cores divided among the hosts (at least 1).
        stream: Where the twin's and the containers' output goes (``[algo-N]`` prefixes), or None.
        stop_grace: Seconds between SIGTERM and SIGKILL on a stop or when the time runs out.
        checkpoint_sync_seconds: How often ``/opt/ml/checkpoints`` (and the TensorBoard folder) is synced.
        keep: Keep the job's folder (hosts' trees and logs) instead of removing it.
        s3_client_factory: Makes the client of the S3 the request came from (default: boto3, honouring
            ``AWS_ENDPOINT_URL``).
        job_name: The replay's own job name (default: the request's name + ``-replay-`` + 6 hex digits). A replay never
            runs under the name of the job it replays.
        output: Where the replay's artifacts go, ``<output>/<job_name>/output/{model,output}.tar.gz`` and
            ``<output>/<job_name>/logs/``: a folder (default ``./smddp_local_output``) or ``s3://bucket/prefix``
            (S3 the request came from). Refused when something is already there: nothing is written over.
        checkpoints: A folder or ``s3://`` prefix checkpoints are read from at the start and synced to while the job
            runs (pass the same one again to resume). Default: read from the request's ``CheckpointConfig.S3Uri``
            (never written to), synced to ``<output>/<job_name>/checkpoints``.
        interrupt_after: For a managed spot job (``EnableManagedSpotTraining``): seconds after its containers start
            when the twin interrupts it once, as EC2 reclaims spot instances (see :meth:`interrupt`).
        short_toolkit_waits: Cut the training toolkit's fixed sleeps after an MPI or SMDDP launch (30 s on the
            leader after ``mpirun``, 30 s on each worker) to at most 1 s, in the kit's image (``image/train.py``).
            Not SageMaker's behaviour, which keeps them: the answer lists it under ``Twin.Warnings``. None: cut
            when ``SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1`` is in this process's environment (a default for every twin
            job of a shell or a test run), kept otherwise.
        control: The job's handle for a caller in another thread (a tuning job): its stop is :meth:`stop`'s, its
            metric listener hears the job's metrics as they are printed.

    Raises:
        ConfigurationError: A setting is out of range, ``checkpoints`` is given for a request without
            ``CheckpointConfig``, or ``interrupt_after`` for one without ``EnableManagedSpotTraining``.
        ImageNotFoundError: The request's image, or the kit's image (for the twin's S3), is not in the engine.
        DockerUnavailableError: Docker cannot be used.
    """

    _prefix = "[twin]"

    def __init__(
        self,
        request: TrainingJobRequest,
        *,
        gpus_per_host: int | None = None,
        stream: IO[str] | None = sys.stdout,
        stop_grace: float = STOP_GRACE_SECONDS,
        checkpoint_sync_seconds: float = 5.0,
        keep: bool = False,
        s3_client_factory: Callable[[], Any] = make_s3_client,
        engine: Engine | None = None,
        job_name: str | None = None,
        output: str | None = None,
        checkpoints: str | None = None,
        interrupt_after: float | None = None,
        short_toolkit_waits: bool | None = None,
        control: JobControl | None = None,
        tracking: MlflowSettings | None = None,
    ) -> None:
        timings = [("stop_grace", stop_grace), ("checkpoint_sync_seconds", checkpoint_sync_seconds)]
        if interrupt_after is not None:
            timings.append(("interrupt_after", interrupt_after))
        for setting, seconds in timings:
            if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
                raise ConfigurationError(setting, seconds, "must be a finite number of seconds above 0", "use e.g. 30")
        if interrupt_after is not None:
            _check_spot(request, "interrupt_after", interrupt_after)
        name = job_name if job_name is not None else replay_job_name(request.job_name)
        self.request = request.renamed(name)
        self.output = output if output is not None else DEFAULT_OUTPUT_PATH
        definitions, self._metric_problems = watchable_definitions(
            (self.request.params.get("AlgorithmSpecification") or {}).get("MetricDefinitions"),
            "AlgorithmSpecification.MetricDefinitions",
        )
        if tracking is not None:  # a replayed request's MlflowConfig names the run; tracking says where it goes
            tracking = tracking.named_by(self.request.params.get("MlflowConfig"))
        super().__init__(name, job_destination(self.output, name), metric_definitions=definitions,
                         compression=request.compression, control=control, tracking=tracking)
        self.stream = ConsoleStream(stream) if stream is not None else None  # type: ignore[assignment]
        self.checkpoint_source, self.checkpoint_target = self._checkpoint_locations(checkpoints)
        self.tensorboard_target = self._job_folder("tensorboard") if self.request.tensorboard_s3 is not None else None
        self.stop_grace = stop_grace
        self.checkpoint_sync_seconds = checkpoint_sync_seconds
        self.keep = keep
        self._s3_factory = s3_client_factory
        self.engine = engine or find_engine()
        for image in {request.image, LATEST_TAG}:
            if not image_exists(self.engine, image):
                raise ImageNotFoundError(image)
        self.gpus_per_host = _granted_gpus(request, gpus_per_host)
        self._image_problems = _cpu_image_on_gpu(self.engine, request)  # said when the job starts, before any upload
        self.job_id = f"{name[:40].lower()}-{uuid.uuid4().hex[:6]}"
        self.docker = TwinEngine(self.engine, self.job_id)
        self._stop_reason: str | None = None
        self._stop_requested = self.control.stop_requested  # StopTrainingJob: stop(), or the job's control
        self._kill_now = threading.Event()
        self.started = threading.Event()
        self._checkpoint_sync: FolderSync | None = None  # made with the request's S3 client, in run()
        self._tensorboard_sync: FolderSync | None = None
        self.interrupt_after = interrupt_after
        short_toolkit_waits = cut_toolkit_waits(short_toolkit_waits)
        self.short_toolkit_waits = short_toolkit_waits
        self._twin_choices = [SHORT_WAITS_WARNING] if short_toolkit_waits else []
        self._request_warnings = list(request.warnings)
        if tracking is not None:
            self._twin_choices.append(TRACKED_FROM_THE_LOGS)
            self._request_warnings = [line for line in request.warnings if not line.startswith("MlflowConfig:")]
        self._interrupt_at: float | None = None  # monotonic time of the interruption interrupt_after asks for
        self._interrupt_requested = threading.Event()
        self._ran_seconds = 0.0  # the containers' run time before the current run (a spot job's earlier runs)
        self._first_start: float | None = None  # monotonic time the containers first started
        # One run's own, reset when run() starts: the reaper, what the job wrote to S3, the host that failed first.
        self._reaper: subprocess.Popen[bytes] | None = None
        self._writes: list[str] = []
        self._failed_host: str | None = None

    # -- public ------------------------------------------------------------------------------------------------------

    def container(self, host: str) -> str:
        """The name of ``host``'s container (for ``docker exec`` / ``docker kill`` while the job runs)."""
        return self.docker.container_name(host)

    def stop(self) -> None:
        """StopTrainingJob: SIGTERM to every container, SIGKILL after the grace period; the job ends Stopped.

        A second call during the grace period sends SIGKILL at once.
        """
        if self._stop_requested.is_set():
            self._kill_now.set()
        self._stop_reason = self._stop_reason or "Stopped"
        self._stop_requested.set()

    def interrupt(self) -> None:
        """A spot interruption of this managed spot job, as EC2 reclaims its instances: SIGTERM to every container
        (SIGKILL after the grace period), secondary status ``Interrupted``, the checkpoint folders synced, then
        ``Restarting``: every container starts again on a fresh ``/opt/ml`` (as a new instance has) whose
        checkpoint folder is filled from where checkpoints were synced; the job keeps its name, and the time
        between the interruption and the restart is not billed.

        Raises:
            ConfigurationError: The request is not a managed spot job (``EnableManagedSpotTraining``).
        """
        _check_spot(self.request, "interrupt", "()")
        self._interrupt_requested.set()

    def run(self) -> JobResult:
        """Runs the job to its end (completed, failed, stopped or out of time) and cleans up.

        Run from the main thread, SIGINT and SIGTERM stop the job as StopTrainingJob does (a second one kills the
        containers at once); the job then ends Stopped, with nothing left running. Should this process die outright,
        a reaper of its own (:mod:`~smddp_compat.local_mode.docker._reaper`) removes the containers and the network.

        Returns:
            The job's outcome; artifacts are under ``<output>/<job_name>/``.

        Raises:
            ChannelError: A channel or the source could not be fetched from the request's S3.
            ConfigurationError: The output already holds files of another job, or cannot be reached.
            ContainerError: The engine refused a network or a container.
        """
        self._reaper = None
        self._writes = []
        self._failed_host = None
        result = super().run()
        for clash in result.artifacts.clashes:
            self._say(f"warning: name clash between hosts (SageMaker would keep only one): {clash}")
        if result.failure_reason:
            self._say(f"FailureReason: {result.failure_reason}")
        self._say(f"job {result.job_name}: {result.status} ({result.secondary_status}) in "
                  f"{(result.end - result.start).total_seconds():.1f} s; model: {result.model_artifacts}")
        return result

    # -- the lifecycle's steps ---------------------------------------------------------------------------------------

    def _make_root(self) -> Path:
        self._root = Path(tempfile.mkdtemp(prefix=f"smddp-twin-{self.request.job_name[:30]}-"))
        self._keep_root = self.keep
        return self._root

    def _log_files(self, root: Path, layouts: Mapping[str, HostLayout]) -> dict[str, Path]:
        return {host: self._log_dir / f"{host}.log" for host in layouts}

    def _check_destination(self, client: Any | None = None) -> None:
        request = self.request
        self._user_s3 = self._s3_factory()
        super()._check_destination(client=self._user_s3)
        self._reaper = self._start_reaper(self._root)
        self._say(f"job {request.job_name}: {request.instance_count} x {request.instance_type}, image "
                  f"{request.image}; artifacts to {_shown(self.destination)}")
        if self.gpus_per_host:
            world = self._world_sizes()
            self._say(
                f"{request.instance_type} has GPUs on SageMaker; here each host runs on the CPU and shows "
                f"{self.gpus_per_host} stand-in GPU(s) to the toolkit (nvidia-smi), which starts one process "
                f"per GPU: world size {world['Twin']} here ({request.instance_count} x {self.gpus_per_host}), "
                f"{world['SageMaker']} on SageMaker ({request.instance_count} x "
                f"{_instance_gpus(request.instance_type)})"
            )
        for warning in [*self._twin_choices, *self._request_warnings, *self._metric_problems,
                        *self._image_problems]:  # each said once
            self._say(f"warning: {warning}")

    def _prepare(self, root: Path) -> dict[str, HostLayout]:
        self._log_dir = self.destination / "logs" if isinstance(self.destination, Path) else root
        self._log_dir.mkdir(parents=True, exist_ok=True)
        layouts = self._prepare_hosts(root, self._user_s3)
        self.docker.log_path = str(root / "docker.log")
        self.docker.create_network(isolated=self.request.network_isolation)
        self._twin_s3, self._twin_endpoint = self._start_s3_service()
        self._staged = self._stage_for_containers(self._user_s3, self._twin_s3, root)
        return layouts

    def _supervise(self, root: Path, layouts: dict[str, HostLayout]) -> JobEnd:
        self._start_hosts(root, layouts, self._twin_endpoint, self._log_dir)
        self.ran_from = self._training()
        self.started.set()
        status, secondary, self._failed_host, codes = self._watch_run(layouts)
        while secondary == "Interrupted" and not self._stop_requested.is_set():
            self._restart(root, layouts, self._twin_endpoint, self._log_dir)  # the same job, on new spot instances
            status, secondary, self._failed_host, codes = self._watch_run(layouts)
        if secondary == "Interrupted":  # stopped between the interruption and the restart
            status, secondary = "Stopped", self._stop_reason or "Stopped"
        code = failed_exit_code(codes, self._failed_host) if status == FAILED else None
        return JobEnd(status, secondary, exit_code=code,
                      details={"exit_codes": codes})

    def _after_end(self, layouts: dict[str, HostLayout], end: JobEnd) -> None:
        self.docker.wait_for_logs()
        self._sync_folders(layouts)
        self._writes = self._list_script_writes(self._twin_s3, self._staged, self._user_s3)
        if end.status == FAILED:
            end.reason = failure_reason(layouts, self._failed_host, end.details["exit_codes"], self._log_dir)
        end.details["duration"] = (datetime.now(timezone.utc) - self.ran_from).total_seconds()

    def _tracked_facts(self) -> tuple[Mapping[str, Any], dict[str, str]]:
        request = self.request
        hyperparameters = {name: decode_value(value) for name, value in request.hyperparameters.items()}
        return hyperparameters, {"sagemaker.instance_count": str(request.instance_count),
                                 "sagemaker.instance_type": request.instance_type, "sagemaker.image": request.image,
                                 "sagemaker.backend": "docker"}

    def _extras(self, end: JobEnd) -> dict[str, Any]:
        request = self.request
        notes: dict[str, Any] = {"Warnings": [*self._twin_choices, *self._request_warnings]}
        if self.gpus_per_host:
            notes["WorldSize"] = self._world_sizes()
        if self._writes:
            notes["S3Writes"] = list(self._writes)
        params = dict(request.params)
        if self.tracking is not None:  # the run the job was tracked in, as SageMaker answers it
            params["MlflowConfig"] = self.tracking.request_config()
        return {"request_params": params, "arn": contract.training_job_arn(self._region(), request.job_name),
                "notes": notes}

    def _release(self) -> None:
        self.docker.remove_job()
        if self._reaper is not None:  # cleaned up by ourselves: dismiss the reaper
            self._reaper.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._reaper.wait(timeout=10)

    def _on_signal(self, signum: int) -> None:
        if self._stop_requested.is_set():
            self._say("signal again: killing the containers now")
        self.stop()

    # -- steps -------------------------------------------------------------------------------------------------------

    def _prepare_hosts(self, root: Path, user_s3: Any) -> dict[str, HostLayout]:
        request = self.request
        hosts = request.hosts
        data_config = {channel.name: channel.input_data_config() for channel in request.channels}
        layouts = {
            host: create_host_tree(
                root / "hosts" / host, host,
                encoded_hyperparameters=request.hyperparameters,
                resource=resource_config(hosts, host, request.instance_type, NETWORK_INTERFACE),
                data_config=data_config,
                checkpoint_config=request.checkpoint_config(),
            )
            for host in hosts
        }  # fmt: skip
        for channel in request.channels:
            staged = root / "channels" / channel.name
            download_s3_channel(channel.source, staged, channel=channel.name, client=user_s3)
            place_channel(staged, [layouts[host].channel_dir(channel.name) for host in hosts],
                          sharded=channel.distribution != "FullyReplicated")
        if self.checkpoint_target is not None:
            self._checkpoint_sync = FolderSync(
                sync_target(self.checkpoint_target, user_s3), what="checkpoints", mirror_deletions=True,
                say=self._say,
            )
            source = self.checkpoint_source
            self._fill_checkpoints(
                root, layouts, None if source == self.checkpoint_target else sync_target(source, user_s3)
            )
        if self.tensorboard_target is not None:
            self._tensorboard_sync = FolderSync(
                sync_target(self.tensorboard_target, user_s3), what="tensorboard", mirror_deletions=False,
                say=self._say,
            )
        return layouts

    def _fill_checkpoints(self, root: Path, layouts: dict[str, HostLayout], source: Any | None = None) -> None:
        """Fills every host's checkpoint folder, as SageMaker does at the start and at a spot restart: from
        ``source`` (the first time: where checkpoints are read from), else from where they are synced to."""
        assert self._checkpoint_sync is not None
        count = self._checkpoint_sync.fill(
            [layout.checkpoints_dir for layout in layouts.values()], root / "checkpoints", source=source
        )
        if count:
            where = (source or self._checkpoint_sync.target).uri
            self._say(f"checkpoints: resuming from {where} ({count} file(s) in every host's checkpoint folder)")

    def _start_s3_service(self) -> tuple[Any | None, str | None]:
        """Starts the twin's S3 (moto) on the job's network; returns a client of it and its endpoint, once it answers.

        Under ``EnableNetworkIsolation`` there is none, (None, None): SageMaker's isolated containers reach no S3
        (and get no credentials) while it still fetches their channels and stores their artifacts itself ("Run
        Training and Inference Containers in Internet-Free Mode"); the job's network keeps no route out and lets the
        hosts reach one another, as SageMaker limits an isolated job's traffic "to the peers of each training
        container".
        """
        if self.request.network_isolation:
            self._say("EnableNetworkIsolation: no S3, no credentials and no route out in the containers; the hosts "
                      "reach one another")
            return None, None
        self.docker.start(
            "s3", LATEST_TAG, ["moto_server", "-H", "0.0.0.0", "-p", str(_S3_PORT)], environment={}, mounts=[]
        )
        endpoint = f"http://{self.docker.address('s3')}:{_S3_PORT}"
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3", endpoint_url=endpoint, region_name=self._region(),
            aws_access_key_id=_TWIN_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=_TWIN_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=Config(connect_timeout=2, read_timeout=30, retries={"max_attempts": 1}),
        )
        deadline = time.monotonic() + _S3_READY_SECONDS
        while True:
            try:
                client.list_buckets()
                break
            except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet" until the deadline
                if time.monotonic() > deadline:
                    raise ContainerError(f"the twin's S3 service at {endpoint} did not answer within "
                                      f"{_S3_READY_SECONDS:.0f} s ({exc})") from exc
                time.sleep(0.3)
        return client, endpoint

    def _stage_for_containers(self, user_s3: Any, twin_s3: Any | None, root: Path) -> Snapshot:
        """Puts into the twin's S3 what the containers may read themselves: the request's buckets, the source, and
        every channel's objects at their own keys (a script may read its data with boto3, as on SageMaker); returns
        what it then holds, against which :meth:`_list_script_writes` finds what the job wrote
        (:mod:`~smddp_compat.local_mode.docker._twin_s3`). Nothing without the twin's S3 (network isolation)."""
        if twin_s3 is None:
            return {}
        request = self.request
        create_buckets(twin_s3, [
            *(location.bucket for location in request.s3_uris().values()), request.output_path.bucket,
            *(channel.source.bucket for channel in request.channels),
            *(location.bucket for location in (request.checkpoint_s3, request.tensorboard_s3) if location),
        ])
        for channel in request.channels:
            copy_s3_prefix(channel.source, user_s3, twin_s3, channel=channel.name,
                           staged=root / "channels" / channel.name)
        for name, location in request.s3_uris().items():
            if name == "model_dir":
                continue
            with tempfile.TemporaryFile() as data:
                try:
                    user_s3.download_fileobj(location.bucket, location.prefix, data)
                except Exception as exc:  # noqa: BLE001 - botocore raises several unrelated types here
                    raise ChannelError(
                        name, location.uri, f"could not be read from S3 ({exc})",
                        "upload the source first (the estimator does), or fix the URI and AWS_ENDPOINT_URL",
                    ) from exc
                data.seek(0)
                twin_s3.upload_fileobj(data, location.bucket, location.prefix)
        return snapshot(twin_s3)

    def _list_script_writes(self, twin_s3: Any | None, staged: Snapshot, user_s3: Any) -> list[str]:
        """What the job wrote to the twin's S3 (or deleted of what was staged), said and kept under
        ``<output>/<job>/s3/``; never written to the request's S3. A failure to list is said; the job's outcome
        stands."""
        if twin_s3 is None:
            return []
        try:
            writes = [write.describe() for write in script_writes(twin_s3, staged, self.destination, user_s3)]
        except Exception as exc:  # noqa: BLE001 - the twin's S3 gone or failing: said, the job's outcome stands
            writes = [f"what the job wrote to the twin's S3 could not be listed ({type(exc).__name__}: {exc})"]
        for write in writes:
            self._say(f"S3 write: {write}")
        return writes

    def _world_sizes(self) -> dict[str, int]:
        """For a GPU instance type: the job's GPUs on SageMaker and here (one process each in a per-GPU launch)."""
        if not self.gpus_per_host:
            return {}
        hosts = self.request.instance_count
        return {"SageMaker": hosts * _instance_gpus(self.request.instance_type), "Twin": hosts * self.gpus_per_host}

    def _region(self) -> str:
        region = self.request.hyperparameter(contract.REGION)
        return region if isinstance(region, str) and region else os.environ.get("AWS_DEFAULT_REGION", "us-east-1")

    def _start_hosts(
        self, root: Path, layouts: dict[str, HostLayout], twin_endpoint: str | None, log_dir: Path
    ) -> None:
        request = self.request
        region = self._region()
        # The twin's S3 and its throwaway credentials; none under network isolation (twin_endpoint None).
        s3_access = {"AWS_ENDPOINT_URL": twin_endpoint, **_TWIN_CREDENTIALS} if twin_endpoint else {}
        environment = {
            contract.TRAINING_JOB_NAME: request.job_name,
            "TRAINING_JOB_ARN": contract.training_job_arn(region, request.job_name),
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            **s3_access,
            **request.environment,
        }
        environment.update(shared_cores_environment(environment))
        environment.pop(SHORT_TOOLKIT_WAITS, None)  # the twin's own switch: only short_toolkit_waits sets it
        if self.short_toolkit_waits:
            environment[SHORT_TOOLKIT_WAITS] = "1"
        for layout in layouts.values():  # the Debugger's and the profiler's configuration, as SageMaker writes them
            for name, content in config_files(request.params).items():
                (layout.input_config_dir / name).write_text(json.dumps(content), encoding="utf-8")
        extra: list[Mount] = []
        if self.gpus_per_host:
            stand_in = root / "nvidia-smi"
            stand_in.write_text(_nvidia_smi_stand_in(request.instance_type, self.gpus_per_host), encoding="utf-8")
            stand_in.chmod(0o755)
            extra.append(Mount(stand_in, "/usr/local/bin/nvidia-smi", read_only=True))
        for host, layout in layouts.items():
            mounts = [
                Mount(layout.input_dir, f"{contract.OPT_ML}/{contract.INPUT_DIR}"),
                Mount(layout.model_dir, f"{contract.OPT_ML}/{contract.MODEL_DIR}"),
                Mount(layout.output_dir, f"{contract.OPT_ML}/{contract.OUTPUT_DIR}"),
                Mount(layout.checkpoints_dir, request.checkpoint_local_path),
                *extra,
            ]
            if not self._tensorboard_dir(layout).is_relative_to(layout.output_dir):
                self._tensorboard_dir(layout).mkdir(exist_ok=True)
                mounts.append(Mount(self._tensorboard_dir(layout), request.tensorboard_local_path))
            entrypoint, arguments = request.container_start
            self.docker.start(
                host, request.image, arguments, environment=environment, mounts=mounts, entrypoint=entrypoint
            )
            self.docker.follow_logs(host, self.stream, log_dir / f"{host}.log",
                                    on_line=functools.partial(self.metrics.observe, host=host))

    def _watch_run(self, layouts: dict[str, HostLayout]) -> tuple[str, str, str | None, dict[str, int]]:
        """Watches one run of the containers (a spot job has one per restart) until it ends."""
        request = self.request
        run_start = time.monotonic()
        if self._first_start is None:
            self._first_start = run_start
            if self.interrupt_after is not None:
                self._interrupt_at = run_start + self.interrupt_after
        # MaxRuntimeInSeconds bounds a spot job's runs together; MaxWaitTimeInSeconds its runs and waits together.
        deadline = run_start + request.max_runtime - self._ran_seconds
        wait_deadline = self._first_start + (request.max_wait or math.inf)
        next_sync = time.monotonic() + self.checkpoint_sync_seconds
        try:
            return self._watch(layouts, deadline, wait_deadline, next_sync)
        finally:
            self._ran_seconds += time.monotonic() - run_start

    def _watch(
        self, layouts: dict[str, HostLayout], deadline: float, wait_deadline: float, next_sync: float
    ) -> tuple[str, str, str | None, dict[str, int]]:
        """Watches the containers until the job ends, fails, is stopped or (spot) is interrupted."""
        request = self.request
        hosts = list(layouts)
        while True:
            states = self.docker.states(hosts)
            failed = next((h for h in hosts if not states[h].running and states[h].exit_code != 0), None)
            if failed is not None:
                for host in hosts:
                    if states[host].running:
                        self.docker.signal(host, "SIGKILL")
                codes = {host: state.exit_code for host, state in self.docker.states(hosts).items()}
                self._say(f"{failed} exited with code {states[failed].exit_code}: the job failed")
                return "Failed", "Failed", failed, codes
            if not any(state.running for state in states.values()):
                return "Completed", "Completed", None, {host: 0 for host in hosts}
            if time.monotonic() > deadline and self._stop_reason is None:
                self._stop_reason = "MaxRuntimeExceeded"
                self._stop_requested.set()
                self._say(f"MaxRuntimeInSeconds ({request.max_runtime} s) exceeded: stopping the job")
            if request.spot and time.monotonic() > wait_deadline and self._stop_reason is None:
                self._stop_reason = "MaxWaitTimeExceeded"
                self._stop_requested.set()
                self._say(f"MaxWaitTimeInSeconds ({request.max_wait} s) exceeded: stopping the job")
            if not self._stop_requested.is_set() and self._interruption_due():
                self._say("spot interruption (EC2 reclaims the job's spot instances): SIGTERM to every container; "
                          "the job then restarts on new instances from its synced checkpoints")
                self._stop_containers(hosts)
                codes = {host: state.exit_code for host, state in self.docker.states(hosts).items()}
                return "InProgress", "Interrupted", None, codes
            if self._stop_requested.is_set():
                self.statuses.enter("Stopping")
                self._stop_containers(hosts)
                codes = {host: state.exit_code for host, state in self.docker.states(hosts).items()}
                return "Stopped", self._stop_reason or "Stopped", None, codes
            if time.monotonic() >= next_sync:
                self._sync_folders(layouts)
                next_sync = time.monotonic() + self.checkpoint_sync_seconds
            time.sleep(_POLL_SECONDS)

    def _interruption_due(self) -> bool:
        """Whether a spot interruption is asked for now (:meth:`interrupt`, or ``interrupt_after`` reached once)."""
        if self._interrupt_requested.is_set():
            self._interrupt_requested.clear()
            return True
        if self._interrupt_at is not None and time.monotonic() >= self._interrupt_at:
            self._interrupt_at = None
            return True
        return False

    def _restart(self, root: Path, layouts: dict[str, HostLayout], twin_endpoint: str | None, log_dir: Path) -> None:
        """A managed spot restart after an interruption, as SageMaker restarts the job on new instances: the last
        sync of what the old ones wrote, their containers removed; each host's ``/opt/ml`` folders the job writes
        (model, output, checkpoints, TensorBoard) empty again, as a new instance's are, its checkpoint folder filled
        from where checkpoints were synced, and every container started again (``Interrupted``, ``Restarting``,
        ``Training``)."""
        self.statuses.enter("Interrupted", "Training job interrupted: the spot instances were reclaimed")
        self.docker.wait_for_logs()
        self._sync_folders(layouts)
        for host in layouts:
            run_command([self.engine.docker, "rm", "--force", self.container(host)], timeout=120,
                        log_path=self.docker.log_path)
        self.statuses.enter("Restarting", "Restarting the training job on new spot instances")
        for layout in layouts.values():
            for folder in (layout.model_dir, layout.output_dir, layout.checkpoints_dir, self._tensorboard_dir(layout)):
                shutil.rmtree(folder, ignore_errors=True)
            for folder in (layout.model_dir, layout.output_data_dir, layout.output_intermediate_dir,
                           layout.checkpoints_dir):
                folder.mkdir(parents=True, exist_ok=True)
        if self._checkpoint_sync is not None:
            self._fill_checkpoints(root, layouts)
        self._say("restarting every container")
        self._start_hosts(root, layouts, twin_endpoint, log_dir)
        self.statuses.enter("Training")

    def _stop_containers(self, hosts: list[str]) -> None:
        self._say(f"stopping: SIGTERM to every container, SIGKILL after {self.stop_grace:.0f} s (stop again, or "
                  "Ctrl-C again, to kill them now)")
        for host in hosts:
            self.docker.signal(host, "SIGTERM")
        deadline = time.monotonic() + self.stop_grace
        while (time.monotonic() < deadline and not self._kill_now.is_set()
               and any(s.running for s in self.docker.states(hosts).values())):
            time.sleep(_POLL_SECONDS)
        for host, state in self.docker.states(hosts).items():
            if state.running:
                self.docker.signal(host, "SIGKILL")

    def _sync_folders(self, layouts: dict[str, HostLayout]) -> None:
        """One sync of every host's checkpoint folder (both ways: new, changed and deleted files) and TensorBoard
        folder (new and changed files) to their targets (see :mod:`~smddp_compat.local_mode.folder_sync`)."""
        if self._checkpoint_sync is not None:
            self._checkpoint_sync.sync([layout.checkpoints_dir for layout in layouts.values()])
        if self._tensorboard_sync is not None:
            self._tensorboard_sync.sync([self._tensorboard_dir(layout) for layout in layouts.values()])

    def _tensorboard_dir(self, layout: HostLayout) -> Path:
        """Where a host's ``TensorBoardOutputConfig.LocalPath`` is on this machine: inside its output folder (the
        default, ``/opt/ml/output/tensorboard``), else a folder of its own mounted there."""
        local = self.request.tensorboard_local_path
        output = f"{contract.OPT_ML}/{contract.OUTPUT_DIR}/"
        if local.startswith(output):
            return layout.output_dir.joinpath(*local[len(output):].split("/"))
        return layout.root / "tensorboard"

    # -- safety ------------------------------------------------------------------------------------------------------

    def _checkpoint_locations(self, checkpoints: str | None) -> tuple[Path | S3Location | None, ...]:
        """Where checkpoints are read from at the start and synced to (see the ``checkpoints`` argument)."""
        if checkpoints is not None:
            if self.request.checkpoint_s3 is None:
                raise ConfigurationError(
                    "checkpoints", checkpoints, "is given but the request has no CheckpointConfig, so SageMaker "
                    "would sync no checkpoint folder", "add CheckpointConfig.S3Uri to the request, or leave it out",
                )
            location: Path | S3Location = (
                parse_s3_uri(checkpoints, "checkpoints") if is_s3_uri(checkpoints) else Path(checkpoints).resolve()
            )
            return location, location
        if self.request.checkpoint_s3 is None:
            return None, None
        return self.request.checkpoint_s3, self._job_folder("checkpoints")

    def _job_folder(self, name: str) -> Path | S3Location:
        """``<output>/<job_name>/<name>``, a folder or an S3 location."""
        destination = self.destination
        return destination.child(name) if isinstance(destination, S3Location) else destination / name

    def _start_reaper(self, root: Path) -> subprocess.Popen[bytes]:
        """Starts the watcher that cleans up after this process should it die outright."""
        argv = reaper_argv(
            pid=os.getpid(), started=psutil.Process().create_time(), docker=self.engine.docker, job_id=self.job_id,
            label=TWIN_LABEL, network=self.docker.network,
            # All the job made here (hosts' trees with their hyperparameters, channels, checkpoints), unless kept.
            remove=[str(root / "channels"), str(root / "checkpoints")] if self.keep else [str(root)],
        )
        return subprocess.Popen(  # noqa: S603 - argument list, no shell
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def _check_spot(request: TrainingJobRequest, setting: str, value: object) -> None:
    """Refuses a spot interruption of a job SageMaker would never interrupt (an on-demand one)."""
    if not request.spot:
        raise ConfigurationError(
            setting, value, "asks for a spot interruption, but the request is not a managed spot job (SageMaker "
            "interrupts only those)", "set EnableManagedSpotTraining and StoppingCondition.MaxWaitTimeInSeconds in "
            "the request, or leave the interruption out",
        )


def cut_toolkit_waits(choice: bool | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a twin job cuts the training toolkit's fixed sleeps: ``choice`` when given, else whether
    ``SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1`` is in ``environ`` (the same switch the kit's image reads in a container)."""
    return choice if choice is not None else environ.get(SHORT_TOOLKIT_WAITS) == "1"


def replay_job_name(name: str) -> str:
    """A replay's own job name: ``name`` (cut to fit SageMaker's 63 characters) + ``-replay-`` + 6 hex digits."""
    suffix = f"-replay-{uuid.uuid4().hex[:6]}"
    return name[: 63 - len(suffix)].rstrip("-") + suffix


def _shown(location: Path | S3Location | None) -> str:
    return location.uri if isinstance(location, S3Location) else str(location)


def replay(request: TrainingJobRequest, **options: Any) -> JobResult:
    """Runs ``request`` in the twin: ``SageMakerTwin(request, **options).run()``."""
    return SageMakerTwin(request, **options).run()


def _instance_gpus(instance_type: str) -> int:
    """The GPUs of one instance of ``instance_type`` on SageMaker (0 for a CPU type, or one the table does not know)."""
    spec = find_instance_type(instance_type)
    return spec.gpus if spec is not None else 0


def _cpu_image_on_gpu(engine: Engine, request: TrainingJobRequest) -> list[str]:
    """What SageMaker would do with a GPU instance type and an image without CUDA (the image's
    ``org.smddp-compat.cuda`` label, else its name; see :func:`smddp_compat.image.cuda.image_cuda`), as one warning."""
    if _instance_gpus(request.instance_type) == 0:
        return []
    code, text = capture([engine.docker, "image", "inspect", "--format", "{{json .Config.Labels}}", request.image],
                         timeout=60)
    try:
        labels = json.loads(text) if code == 0 else None
    except ValueError:
        labels = None
    problem = check_image_for_instance_type(request.image, request.instance_type, request.instance_count,
                                            labels=labels if isinstance(labels, dict) else None, warn=False)
    if problem is None:
        return []
    return [f"on SageMaker, {problem}; here every host runs on the CPU anyway, with stand-in GPUs"]


def shared_cores_environment(environment: dict[str, str]) -> dict[str, str]:
    """Open MPI's ``mpi_yield_when_idle`` and no rank binding for the containers, each unless the request's
    ``Environment`` sets it.

    Binding: the toolkit's ``mpirun`` gives no ``--bind-to``, so Open MPI binds a job of 1 or 2 ranks to each host's
    core 0, in the twin the same core for every container. Yield: a rank waiting in MPI spins on its core, which the
    twin's hosts share. Both are the twin's own settings, not SageMaker's, and cost or save as measured in
    ``docs/performance.md`` (issue 30).

    Args:
        environment: The containers' environment so far (the request's ``Environment`` included).
    """
    defaults = {YIELD_WHEN_IDLE: "1", BINDING_POLICY: "none"}
    return {name: value for name, value in defaults.items() if name not in environment}


def _granted_gpus(request: TrainingJobRequest, wanted: int | None) -> int:
    gpus = _instance_gpus(request.instance_type)
    if gpus == 0:
        return 0
    if wanted is None:
        return max(1, min(gpus, (os.cpu_count() or 1) // request.instance_count))
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
        raise ConfigurationError(
            "gpus_per_host", wanted, "must be >= 1 for a GPU instance type", f"use 1..{gpus} ({request.instance_type})"
        )
    return min(wanted, gpus)


def _nvidia_smi_stand_in(instance_type: str, count: int) -> str:
    lines = "\n".join(
        f"GPU {index}: CPU stand-in for {instance_type} (UUID: GPU-smddp-twin-{index})" for index in range(count)
    )
    return f"#!/bin/sh\n# smddp-compat twin: the GPUs this host shows the SageMaker toolkit.\ncat <<'EOF'\n{lines}\nEOF\n"


