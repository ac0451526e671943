"""A local_mode job (:class:`~local_mode.spec.JobSpec`) as the CreateTrainingJob request SageMaker would receive.

``smddp local SCRIPT --backend docker`` runs a script through SageMaker's own path: the request the kit's estimator
(``image_uri`` = the kit's image) sends for the job, replayed by the twin in containers. :func:`replay_spec` chains
the steps: :func:`check_with_estimator` (the estimator's own checks, nothing sent), :class:`PrivateSageMaker` (a moto
server of this run's own, none of the user's AWS settings), :func:`build_request` (channels uploaded or copied to
its S3, ``fit(wait=False)``, the request captured on the client side, as moto keeps only part of it), the kit's image
(built on first use) and :class:`~local_mode.docker.twin.SageMakerTwin` (``s3://`` outputs staged in a local folder
and uploaded to the user's S3 at the end, as the process backend uploads them).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from smddp_compat import contract
from smddp_compat.estimators import check_channel_names, check_job_name, instance_spec
from smddp_compat.image import LATEST_TAG, ensure_image, find_engine, host_base_recipe
from smddp_compat.local_mode.artifacts import job_destination, upload_artifact
from smddp_compat.local_mode.channels import check_local_channel, copy_s3_prefix
from smddp_compat.local_mode.docker.request import TrainingJobRequest
from smddp_compat.local_mode.docker.twin import SageMakerTwin
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.s3 import S3Location, check_s3_destination, is_s3_uri, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.spec import JobSpec

__all__ = [
    "PRIVATE_BUCKET",
    "PRIVATE_REGION",
    "EstimatorJob",
    "PrivateSageMaker",
    "build_request",
    "check_with_estimator",
    "cpu_instance_type",
    "replay_spec",
]

PRIVATE_REGION = "us-east-1"
"""The region of the private SageMaker (it only names the request's ``sagemaker_region``)."""

PRIVATE_BUCKET = "smddp-local"
"""The private S3's default bucket: the uploaded code, local channels, ``model_dir`` and ``S3OutputPath``."""

#: The role the request names; nothing checks or assumes it.
_ROLE = "arn:aws:iam::000000000000:role/smddp-compat-local"
_CREDENTIALS = {"aws_access_key_id": "smddp-local", "aws_secret_access_key": "smddp-local"}
#: The private session's whole SageMaker SDK configuration: telemetry off (the user's SDK config files are not read).
_SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
#: Where the checking session's clients point: a request sent there would be a bug (and is refused before sending).
_NOWHERE = "http://127.0.0.1:9"
#: CPU instance types a job runs as, smallest first: the first with a vCPU per process is chosen.
_CPU_TYPES = ("ml.c5.xlarge", "ml.c5.2xlarge", "ml.c5.4xlarge", "ml.c5.9xlarge", "ml.c5.18xlarge")


def cpu_instance_type(processes_per_host: int) -> str:
    """The CPU instance type a job of ``processes_per_host`` runs as: the smallest ``ml.c5`` with as many vCPUs.

    The processes run on this machine's CPUs; the type only has to hold them, as the estimator checks (one process
    per vCPU). Past the largest, the largest is returned and the estimator's check names the limit.
    """
    return next((name for name in _CPU_TYPES if instance_spec(name).vcpus >= processes_per_host), _CPU_TYPES[-1])


@dataclass(frozen=True)
class EstimatorJob:
    """A job checked as the kit's estimator checks it, ready to be sent.

    Attributes:
        spec: The job, as local_mode checked it.
        arguments: The estimator's arguments, but ``image_uri`` and ``sagemaker_session``.
        channels: ``fit(inputs)``: channel name -> local path or ``s3://`` URI.
    """

    spec: JobSpec
    arguments: dict[str, Any] = field(repr=False)
    channels: dict[str, str]

    @property
    def job_name(self) -> str:
        """The job's name (the request's ``TrainingJobName``)."""
        assert self.spec.job_name is not None  # JobSpec always sets one
        return self.spec.job_name


def check_with_estimator(spec: JobSpec) -> EstimatorJob:
    """Checks ``spec`` as the kit's estimator checks what it sends, without sending anything.

    ``spec``'s own checks (the process backend's) come first. Returns the estimator's arguments for the job.

    Raises:
        smddp_compat.errors.ConfigurationError: The estimator refuses a setting (e.g. ``max_run`` that is not a whole
            number of seconds), or the distribution is one SageMaker's strategies cannot run (``mwms`` with several
            processes per host: SageMaker runs one per host).
        ChannelError: A local channel holds a FIFO, socket or device (the upload would hang on it or never end).
    """
    config = spec.distribution_config
    distribution = config.to_sdk_dict()  # refuses what SageMaker's own strategies cannot run (mwms: 1 per host)
    max_run: float | int = spec.max_run
    if isinstance(max_run, float) and math.isfinite(max_run) and max_run.is_integer():
        max_run = int(max_run)  # SageMaker counts whole seconds; a fraction is the estimator's to refuse
    arguments: dict[str, Any] = {
        "entry_point": spec.entry_point,
        "source_dir": spec.source_dir,
        "role": _ROLE,
        "instance_type": cpu_instance_type(config.processes_per_host or 1),
        "instance_count": spec.instance_count,
        "framework_version": "2.21",
        "py_version": "py311",
        # The job's model_dir (smddp local's --model-dir) is the estimator's, which sends it as SageMaker's SDK
        # does; a job without one sends none, as the process backend passes none.
        "hyperparameters": {name: value for name, value in spec.hyperparameters.items()
                            if name != contract.MODEL_DIR_HYPERPARAMETER},
        "model_dir": spec.hyperparameters.get(contract.MODEL_DIR_HYPERPARAMETER, False),
        "distribution": distribution,
        "max_run": max_run,
        "environment": dict(spec.environment) or None,
        "metric_definitions": [dict(definition) for definition in spec.metric_definitions] or None,
    }
    channels = dict(spec.channels)
    for name, source in channels.items():  # what the upload would hang on, refused as the process backend does
        if not is_s3_uri(source):
            check_local_channel(name, source)
    sealed = _boto_session(_NOWHERE, sealed=True)
    with _sdk_sandbox(sealed) as estimator:
        check_job_name(spec.job_name)  # fit()'s own checks, before the constructor's
        check_channel_names(channels)
        estimator(image_uri=LATEST_TAG, sagemaker_session=_sagemaker_session(sealed), **arguments)
    return EstimatorJob(spec, arguments, channels)


class PrivateSageMaker:
    """A moto server of one run's own on loopback: the S3 and SageMaker the request is built against.

    Use it as a context manager; on exit the server's state is dropped and the server stopped. Nothing of the user's
    AWS configuration is read: the session it gives uses throwaway credentials, this server for every service, and
    botocore's defaults for everything else. moto keeps its state per process: another moto server running in the
    same process shares it (and is reset with it), so run one of either per process.
    """

    def __init__(self) -> None:
        self._server: Any = None
        self.url: str | None = None

    def __enter__(self) -> PrivateSageMaker:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # port 0: the kernel picks one
        server.start()
        self._server = server
        host, port = server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's request log is not the job's output
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is None:
            return
        with contextlib.suppress(OSError):  # moto's state is the process's: drop it so nothing accumulates
            request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never the user's proxy
            no_proxy.open(request, timeout=30).read()
        self._server.stop()
        self._server = None

    def _endpoint(self) -> str:
        if self.url is None:
            raise RuntimeError("PrivateSageMaker is not running: use it as a context manager")
        return self.url

    def s3_client(self) -> Any:
        """A client of the private S3."""
        return _boto_session(self._endpoint()).client("s3")

    def boto_session(self) -> Any:
        """A boto3 session of the private server (throwaway credentials, none of the user's AWS settings)."""
        return _boto_session(self._endpoint())

    def sagemaker_session(self, boto_session: Any | None = None) -> Any:
        """A SageMaker SDK v2 session of the private server (telemetry off, default bucket :data:`PRIVATE_BUCKET`).

        Args:
            boto_session: One from :meth:`boto_session` (a new one when None).
        """
        return _sagemaker_session(boto_session if boto_session is not None else self.boto_session())


def _boto_session(endpoint: str, *, sealed: bool = False) -> Any:
    """A boto3 session of throwaway credentials whose every client goes to ``endpoint``.

    None of the user's AWS settings reach it: every botocore setting is cut from its environment variable and from
    the config files (which are not read), and proxies are off (the server is on loopback). The SDK gives its STS
    client an explicit regional endpoint of AWS's (``sts_regional_endpoint``): the session overrides any endpoint a
    caller passes. ``sealed``: every request is refused before it is sent (checks only).
    """
    import boto3
    import botocore.session
    from botocore.config import Config
    from botocore.configprovider import BOTOCORE_DEFAUT_SESSION_VARIABLES

    variables = {
        name: (None, None, default, conversion)
        for name, (_config_key, _env, default, conversion) in BOTOCORE_DEFAUT_SESSION_VARIABLES.items()
    }
    variables.update({name: (None, None, os.devnull, None) for name in ("config_file", "credentials_file")})
    core = botocore.session.Session(session_vars=variables)
    core.set_default_client_config(
        Config(proxies={}, connect_timeout=5, read_timeout=120, retries={"max_attempts": 2, "mode": "standard"})
    )
    if sealed:
        core.register("before-send", _refuse_to_send)

    class _PrivateSession(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["endpoint_url"] = endpoint
            return super().client(*args, **kwargs)

    return _PrivateSession(botocore_session=core, region_name=PRIVATE_REGION, **_CREDENTIALS)


def _refuse_to_send(request: Any, **_: Any) -> None:
    raise RuntimeError(f"smddp-compat: the estimator's checks sent a request ({request.method} {request.url})")


def _sagemaker_session(boto_session: Any) -> Any:
    import sagemaker

    return sagemaker.Session(boto_session=boto_session, sagemaker_config=_SDK_CONFIG, default_bucket=PRIVATE_BUCKET)


#: The AWS and SDK settings the SageMaker SDK reads by itself, and what they are while the kit uses it here.
_SDK_ENVIRONMENT: dict[str, str | None] = {
    "AWS_PROFILE": None,
    "AWS_DEFAULT_PROFILE": None,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    # Throwaway credentials end botocore's credential chain before it asks the instance metadata service.
    "AWS_ACCESS_KEY_ID": _CREDENTIALS["aws_access_key_id"],
    "AWS_SECRET_ACCESS_KEY": _CREDENTIALS["aws_secret_access_key"],
    "AWS_SESSION_TOKEN": None,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_DEFAULT_REGION": PRIVATE_REGION,
    "AWS_REGION": PRIVATE_REGION,
    "AWS_ENDPOINT_URL": _NOWHERE,
    "SAGEMAKER_USER_CONFIG_OVERRIDE": os.devnull,
    "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": os.devnull,
    "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
}


@contextlib.contextmanager
def _sdk_sandbox(boto_session: Any = None) -> Iterator[Any]:
    """The SageMaker SDK imported and used with none of the user's AWS or SDK settings; yields the kit's estimator.

    Besides the session it is given, the SDK makes boto3 sessions and clients of its own: at import
    (``sagemaker.jumpstart.constants``: a missing ``AWS_PROFILE`` fails the import; without credentials in the
    environment the instance metadata service is asked for some; the user's SDK config is loaded, from S3 when it
    names an ``s3://`` file) and in every estimator (``TensorBoardApp``: ``boto3.client()``, boto3's
    default session). It also prints a v2-deprecation notice about code the user did not write, and one of its
    modules configures the root logger when it is imported (``sagemaker.experiments._metrics``:
    ``logging.basicConfig(level=INFO)``, after which every library's INFO lines would be printed). Inside this
    context the environment names empty files and throwaway credentials instead of the user's, boto3's default
    session is ``boto_session`` (the private one; None: a throwaway one) and the root logger has a handler that
    drops everything (``basicConfig`` then does nothing); all three are restored on exit. Not thread-safe: the
    environment is the process's.
    """
    import boto3

    saved = {name: os.environ.get(name) for name in _SDK_ENVIRONMENT}
    root_handlers = logging.root.handlers[:]
    logging.root.handlers[:] = [logging.NullHandler()]
    saved_default = boto3.DEFAULT_SESSION
    config_logger = logging.getLogger("sagemaker.config")
    level = config_logger.level
    config_logger.setLevel(logging.WARNING)  # "Not applying SDK defaults from location: ..." (there are none)
    try:
        for name, value in _SDK_ENVIRONMENT.items():
            _set_environment(name, value)
        boto3.DEFAULT_SESSION = boto_session
        from smddp_compat.estimators import TensorFlow  # the SageMaker SDK: imported inside the sandbox only

        yield TensorFlow
    finally:
        boto3.DEFAULT_SESSION = saved_default
        logging.root.handlers[:] = root_handlers
        config_logger.setLevel(level)
        for name, value in saved.items():
            _set_environment(name, value)


def _set_environment(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def build_request(
    job: EstimatorJob,
    aws: PrivateSageMaker,
    *,
    image: str,
    checkpoint_s3: bool = False,
    stream: IO[str] | None = None,
    user_s3_factory: Callable[[], Any] = make_s3_client,
) -> TrainingJobRequest:
    """Sends the job's CreateTrainingJob to the private SageMaker, as the kit's estimator sends it; returns it.

    ``checkpoint_s3`` gives the request a ``CheckpointConfig`` (under the private bucket), as a job that keeps
    checkpoints sets ``checkpoint_s3_uri``; ``stream`` is told the uploads; ``user_s3_factory`` makes the client of
    the user's S3, called only if an ``s3://`` channel needs it.

    Raises:
        ChannelError: An ``s3://`` channel could not be read, or holds no object.
        ConfigurationError: The request is refused by the twin's checks.
    """
    private_s3 = aws.s3_client()
    inputs: dict[str, str] = {}
    user_s3 = None
    for name, source in job.channels.items():  # the user's S3 is read with the user's settings, outside the sandbox
        if is_s3_uri(source):
            user_s3 = user_s3 if user_s3 is not None else user_s3_factory()
            count = copy_s3_prefix(parse_s3_uri(source, f"channels[{name!r}]"), user_s3, private_s3, channel=name)
            inputs[name] = source
            _tell(stream, f"channel {name}: {count} object(s) of {source} copied to the private S3")
    boto_session = aws.boto_session()
    captured: list[dict[str, Any]] = []
    with _sdk_sandbox(boto_session) as estimator_class:
        session = aws.sagemaker_session(boto_session)
        session.sagemaker_client.meta.events.register(
            "provide-client-params.sagemaker.CreateTrainingJob",
            lambda params, **_: captured.append(json.loads(json.dumps(params, default=str))),
        )
        for name, source in job.channels.items():
            if not is_s3_uri(source):  # as smddp submit uploads them: <job>/input/<channel>
                inputs[name] = session.upload_data(source, key_prefix=f"{job.job_name}/input/{name}")
                _tell(stream, f"channel {name}: {source} uploaded to the private S3 as {inputs[name]}")
        extra = {"checkpoint_s3_uri": f"s3://{PRIVATE_BUCKET}/{job.job_name}/checkpoints"} if checkpoint_s3 else {}
        estimator = estimator_class(image_uri=image, sagemaker_session=session, **job.arguments, **extra)
        estimator.fit({name: inputs[name] for name in job.channels} or None, wait=False, job_name=job.job_name)
        return TrainingJobRequest.from_params(captured[-1])  # botocore's API model, read with no profile either


def _tell(stream: IO[str] | None, message: str) -> None:
    if stream is not None:
        stream.write(f"[smddp] {message}\n")
        stream.flush()


def replay_spec(
    spec: JobSpec,
    *,
    stream: IO[str] | None = sys.stderr,
    stop_grace: float | None = None,
    short_toolkit_waits: bool | None = None,
    control: JobControl | None = None,
) -> JobResult:
    """Runs ``spec`` as SageMaker would: its estimator request, built against a private server, replayed by the twin.

    Every check (the estimator's, the S3 output's, Docker's) comes before anything starts; then the kit's image is
    built if missing (its progress on ``stream``), the request built, and the twin run under the spec's job name,
    with its output (``<output>/<job>/``) and checkpoint folder.

    ``stream`` gets progress, the twin's and the containers' output; ``stop_grace``, ``short_toolkit_waits`` and
    ``control`` (a tuning job's stop and metric listener) are :class:`~local_mode.docker.twin.SageMakerTwin`'s
    (None: its defaults). Returns the twin's
    :class:`~local_mode.outcome.JobResult` (artifact URIs in the spec's output).

    Raises:
        ConfigurationError: A setting refused (by the estimator, the twin, or an S3 output that cannot be reached).
        DockerError: No usable Docker engine, or the image could not be built.
        ChannelError: A channel could not be read.
    """
    job = check_with_estimator(spec)
    destination = job_destination(spec.output_path, job.job_name)
    if isinstance(destination, S3Location):
        check_s3_destination(destination, "output_path", job.job_name)
    engine = find_engine()
    _tell(stream, "the kit's image: checking it (built on first use, which takes several minutes; progress follows)")
    build = ensure_image(engine, base=host_base_recipe(), stream=stream)
    _tell(stream, f"the kit's image: {build.tag} ({'built' if build.built else 'already present'}, "
                  f"{build.seconds:.1f} s)")
    staging = Path(tempfile.mkdtemp(prefix="smddp-output-")) if isinstance(destination, S3Location) else None
    try:
        with PrivateSageMaker() as aws:
            # Where the job's checkpoints are kept (a folder, or checkpoint_s3_uri): the twin fills every host's
            # folder from there and syncs them back, under the request's CheckpointConfig.
            checkpoints = spec.checkpoint_path or spec.checkpoint_s3_uri
            request = build_request(job, aws, image=build.tag, checkpoint_s3=checkpoints is not None, stream=stream)
            options = {} if stop_grace is None else {"stop_grace": stop_grace}
            result = SageMakerTwin(
                request, stream=stream, engine=engine, s3_client_factory=aws.s3_client, job_name=job.job_name,
                output=str(staging) if staging is not None else spec.output_path,
                checkpoints=checkpoints, short_toolkit_waits=short_toolkit_waits, control=control,
                tracking=spec.mlflow, **options,
            ).run()
        if staging is not None:
            assert isinstance(destination, S3Location)
            result = upload_results(staging / job.job_name, destination, result)
        return result
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def upload_results(folder: Path, destination: S3Location, result: Any, client: Any | None = None) -> Any:
    """Uploads a finished job's folder (``output/``, ``logs/``) to ``destination`` and points ``result`` there.

    ``folder`` is ``<staging>/<job>`` as the twin left it, ``result`` the twin's result with local paths under it,
    ``destination`` ``<output>/<job>`` in the user's S3 (``client`` None: :func:`~local_mode.s3.make_s3_client`).
    Returns ``result`` with its artifacts and logs as ``s3://`` URIs.

    Raises:
        ArtifactError: An upload failed (the message names the file and the fix).
    """
    client = client if client is not None else make_s3_client()
    uploaded: dict[str, str] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        location = destination.child(path.relative_to(folder).as_posix())
        upload_artifact(functools.partial(client.upload_file, str(path), location.bucket, location.prefix), location,
                        path.name)
        uploaded[str(path)] = location.uri

    def moved(path: str | None) -> str | None:
        """The URI of a file or folder under ``folder`` (CompressionType NONE gives the model as a folder)."""
        if path is None or not Path(path).is_relative_to(folder):
            return path
        return uploaded.get(path) or destination.child(Path(path).relative_to(folder).as_posix()).uri

    artifacts = result.artifacts
    return replace(result, artifacts=replace(
        artifacts, model=moved(artifacts.model), output=moved(artifacts.output),
        logs={host: moved(path) or path for host, path in artifacts.logs.items()},
    ))
