"""The docker backend: a prepared local job run in containers, one per host, with docker compose.

The process backend prepares the job (each host's ``/opt/ml`` tree, each process's command, environment, label and
log file); this backend runs those same processes in containers instead of directly:

1. the image: the kit's own (built on first use, tagged by a digest of what went into it) or the user's (``image=``,
   with the kit's checkout mounted in and put on ``PYTHONPATH``);
2. ``docker compose up``: one container per host (``network_mode: host``, the host's tree at ``/opt/ml``, the kit at
   ``/opt/smddp-kit``, algo-N resolving to its loopback address), each running only the agent (``_agent.py``);
3. every process started with ``docker exec`` and supervised by :func:`smddp_compat.launcher.run_process_group`,
   exactly as in the process backend: ``[algo-N,rank]`` prefixed output, the same log files, the first failure (or
   the time limit, or Ctrl-C) stops the rest, the failure reason read from the failure file;
4. in every case (success, failure, time limit, Ctrl-C) the job's containers are removed (``docker rm --force`` by
   the job's label: every process has ended by then, see :func:`_tear_down`) and the compose folder deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from local_mode.docker._commands import capture, run_command
from local_mode.docker._compose import (
    JOB_LABEL,
    KIT_MOUNT,
    OPT_ML,
    ContainerHost,
    compose_content,
    write_compose_file,
)
from local_mode.docker._engine import Engine, find_engine
from local_mode.docker._exec import PathMap, exec_spec
from local_mode.docker._image import ensure_image, kit_root
from local_mode.docker._rootfs import host_base_recipe, image_exists
from local_mode.docker.errors import DockerError, ImageNotFoundError
from local_mode.errors import ConfigurationError
from smddp_compat.launcher import GroupResult, ProcessSpec, run_process_group

__all__ = [
    "ContainerHost",
    "ResolvedImage",
    "ContainerJobResult",
    "DockerBackend",
    "hosts_of",
    "resolve_image",
    "run_in_containers",
]

DEFAULT_GRACE = 5.0
_COMPOSE_SECONDS = 180.0


@dataclass(frozen=True)
class ResolvedImage:
    """The image a job runs in.

    Attributes:
        tag: Its name.
        kit_installed: True for the kit's own image; False for a user's (the kit is then put on ``PYTHONPATH``).
        built: True when it was built just now.
    """

    tag: str
    kit_installed: bool
    built: bool = False


@dataclass
class ContainerJobResult:
    """How a job run in containers ended.

    Attributes:
        group: The processes' outcome, as the process backend reports it.
        image: The image used.
        project: The compose project name (containers ``<project>-algo-N``).
        startup_seconds: From the call to the first process started (compose up included).
        teardown_seconds: compose down and cleanup.
    """

    group: GroupResult
    image: str
    project: str
    startup_seconds: float
    teardown_seconds: float


def resolve_image(
    engine: Engine, image: str | None = None, *, stream: IO[str] | None = None, log_path: str | None = None
) -> ResolvedImage:
    """The image to run: the user's (must be present locally) or the kit's (built when missing).

    Args:
        engine: The Docker engine.
        image: A user's image name, or None for the kit's.
        stream: Where build progress goes.
        log_path: File the build output is appended to.

    Returns:
        The image.

    Raises:
        ImageNotFoundError: ``image`` is not in the local engine.
        ImageBuildError: The kit's image had to be built and could not be.
    """
    if image is not None:
        if not image_exists(engine, image):
            raise ImageNotFoundError(image)
        return ResolvedImage(image, kit_installed=False)
    build = ensure_image(engine, base=host_base_recipe(), stream=stream, log_path=log_path)
    return ResolvedImage(build.tag, kit_installed=True, built=build.built)


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _signals(handler: Callable[[int, object], None] | int) -> Iterator[None]:
    """Installs ``handler`` for SIGINT and SIGTERM (main thread only), restoring the previous ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def _project_name(job_name: str) -> str:
    cleaned = "".join(ch for ch in job_name.lower() if ch.isalnum() or ch == "-").strip("-")[:40] or "job"
    return f"smddp-{cleaned}-{uuid.uuid4().hex[:8]}"


def _tear_down(engine: Engine, project: str, log_path: str) -> list[str]:
    """Removes the job's containers (and any network compose made for it). Returns the problems met.

    By now every process has ended or was killed by its wrapper (which SIGTERMs it and SIGKILLs it before the
    supervisor's grace runs out), so the containers hold only their idle agents: ``docker rm --force`` is
    enough, and takes a fraction of ``compose down``'s time. Host networking means compose makes no network;
    one labelled with the project would still be removed.
    """
    problems = []
    label = f"label={JOB_LABEL}={project}"
    code, left = capture([engine.docker, "ps", "--all", "--quiet", "--filter", label], timeout=60)
    if code != 0:
        problems.append(f"docker ps: {left}")
    elif left:
        removed = run_command([engine.docker, "rm", "--force", *left.split()], timeout=120, log_path=log_path)
        if not removed.ok:
            problems.append(removed.describe())
    networks_filter = f"label=com.docker.compose.project={project}"
    code, networks = capture([engine.docker, "network", "ls", "--quiet", "--filter", networks_filter], timeout=60)
    if code == 0 and networks:
        removed = run_command([engine.docker, "network", "rm", *networks.split()], timeout=120, log_path=log_path)
        if not removed.ok:
            problems.append(removed.describe())
    return problems


def run_in_containers(
    hosts: Sequence[ContainerHost],
    specs: Sequence[ProcessSpec],
    *,
    image: ResolvedImage,
    engine: Engine | None = None,
    timeout: float | None = None,
    grace: float = DEFAULT_GRACE,
    stream: IO[str] | None = None,
    failure_reason: Callable[[ProcessSpec], str | None] | None = None,
    parent_env: Mapping[str, str] | None = None,
    job_name: str = "job",
    work_dir: str | None = None,
) -> ContainerJobResult:
    """Runs the processes of a prepared job in one container per host.

    Args:
        hosts: The job's hosts (name, loopback address, ``/opt/ml`` tree on this machine).
        specs: The processes, as for :func:`~smddp_compat.launcher.run_process_group`; ``spec.host`` names the host
            (container) each runs in; paths in their commands and environments are this machine's.
        image: From :func:`resolve_image`.
        engine: The Docker engine (default: :func:`find_engine`).
        timeout: Seconds after which the job is stopped (None: no limit).
        grace: Seconds between SIGTERM and SIGKILL when processes are stopped.
        stream: Where the prefixed output goes (default ``sys.stdout``).
        failure_reason: Reads the failure file of the first failed process (its spec is the original one).
        parent_env: The environment the specs' environments were inherited from (default ``os.environ``).
        job_name: Used in the compose project's name.
        work_dir: Where the compose folder is made (default: the system's temp folder).

    Returns:
        The outcome; ``result.group`` is what the process backend would have returned.

    Raises:
        ConfigurationError: A spec names a host that is not in ``hosts``.
        DockerUnavailableError: Docker cannot be used.
        DockerError: The containers could not be created or started.
    """
    start = time.monotonic()
    names = {host.name for host in hosts}
    for spec in specs:
        if spec.host not in names:
            raise ConfigurationError(
                "ProcessSpec.host", spec.host, f"is not one of the job's hosts {sorted(names)}", "set host to algo-N"
            )
    engine = engine or find_engine()
    parent = dict(os.environ if parent_env is None else parent_env)
    kit = kit_root_for_mount()
    project = _project_name(job_name)
    folder = Path(tempfile.mkdtemp(prefix=f"{project}-", dir=work_dir))
    compose_file = folder / "docker-compose.json"
    log_path = str(folder / "compose.log")
    compose = [*engine.compose, "--project-name", project, "--file", str(compose_file)]
    user = None if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"
    container_env = {} if image.kit_installed else {"PYTHONPATH": KIT_MOUNT}
    if user is not None:
        container_env["HOME"] = "/tmp"
    write_compose_file(
        compose_content(
            hosts, project=project, image=image.tag, kit_root=kit, grace=grace, user=user, environment=container_env
        ),
        compose_file,
    )
    by_name = {host.name: host for host in hosts}
    originals: dict[str, ProcessSpec] = {}
    exec_specs = []
    for spec in specs:
        host = by_name[spec.host]
        paths = PathMap.for_host(host.tree, kit, OPT_ML, KIT_MOUNT)
        extra = {}
        if not image.kit_installed:
            own = paths.rewrite(spec.env.get("PYTHONPATH", "")) if "PYTHONPATH" in spec.env else ""
            extra["PYTHONPATH"] = ":".join(p for p in (own, KIT_MOUNT) if p)
        if user is not None:
            extra["HOME"] = "/tmp"
        converted = exec_spec(
            spec,
            docker=engine.docker,
            container=f"{project}-{host.name}",
            paths=paths,
            parent=parent,
            grace=grace,
            extra_env=extra,
        )
        originals[converted.label] = spec
        exec_specs.append(converted)

    def reason_of(converted: ProcessSpec) -> str | None:
        return failure_reason(originals.get(converted.label, converted)) if failure_reason else None

    group: GroupResult | None = None
    started = start
    try:
        with _signals(_raise_stopped):
            try:
                up = run_command([*compose, "up", "--detach", "--no-build"], timeout=_COMPOSE_SECONDS, log_path=log_path)
                if not up.ok:
                    raise DockerError(f"could not start the job's containers: {up.describe()}")
                started = time.monotonic()
                remaining = None if timeout is None else max(timeout - (started - start), 0.001)
                group = run_process_group(
                    exec_specs, timeout=remaining, grace=grace, stream=stream, failure_reason=reason_of
                )
            except _Stopped as stopped:
                group = GroupResult(
                    results=[],
                    ok=False,
                    reason=f"the job was interrupted by {signal.Signals(stopped.signum).name} while its containers "
                    "were starting, and stopped",
                    failed=None,
                    duration=time.monotonic() - start,
                    interrupted=stopped.signum,
                )
    finally:
        teardown_start = time.monotonic()
        with _signals(signal.SIG_IGN):
            problems = _tear_down(engine, project, log_path)
        if problems:
            out = stream or sys.stdout
            out.write(f"warning: cleanup of containers {project}-*: {'; '.join(problems)}\n")
        shutil.rmtree(folder, ignore_errors=True)
        teardown = time.monotonic() - teardown_start
    assert group is not None
    return ContainerJobResult(group, image.tag, project, started - start, teardown)


def kit_root_for_mount() -> Path:
    """The kit's folder to mount at ``/opt/smddp-kit``: its checkout, or the folder its packages are installed in."""
    try:
        return kit_root()
    except DockerError:
        return Path(__file__).resolve().parents[2]


def hosts_of(specs: Sequence[ProcessSpec]) -> list[ContainerHost]:
    """The hosts of a prepared job, read from its processes' environments (in order of first appearance).

    local_mode gives every process ``SAGEMAKER_BASE_DIR`` (its host's tree) and ``SMDDP_HOST_ADDRESSES`` (host name ->
    loopback address); a host missing from the latter gets ``127.0.0.1``.

    Args:
        specs: The job's processes.

    Returns:
        One entry per host.

    Raises:
        ConfigurationError: A process has no ``SAGEMAKER_BASE_DIR``.
    """
    hosts: dict[str, ContainerHost] = {}
    for spec in specs:
        if spec.host in hosts:
            continue
        tree = spec.env.get("SAGEMAKER_BASE_DIR")
        if not tree:
            raise ConfigurationError(
                "ProcessSpec.env", f"[{spec.label}] without SAGEMAKER_BASE_DIR", "the host's tree is unknown",
                "prepare the processes with local_mode (it sets SAGEMAKER_BASE_DIR to each host's /opt/ml tree)",
            )  # fmt: skip
        try:
            addresses = json.loads(spec.env.get("SMDDP_HOST_ADDRESSES", "{}"))
        except ValueError:
            addresses = {}
        hosts[spec.host] = ContainerHost(spec.host, str(addresses.get(spec.host, "127.0.0.1")), Path(tree))
    return list(hosts.values())


class DockerBackend:
    """The docker backend, with :func:`~smddp_compat.launcher.run_process_group`'s call signature.

    Building it checks Docker and resolves (or builds) the image, so that those errors come before anything of the
    job is started; then :meth:`run_process_group` is a drop-in for the process backend's.

    Example:
        >>> backend = DockerBackend(image=None)                 # the kit's image, built if missing
        >>> group = backend.run_process_group(specs, timeout=3600, grace=5, stream=out, failure_reason=read)

    Attributes:
        engine: The Docker engine.
        image: The image the jobs run in.
        last: The full result of the last job run (image, compose project, startup and teardown times).
    """

    def __init__(
        self,
        image: str | None = None,
        *,
        engine: Engine | None = None,
        stream: IO[str] | None = None,
        build_log: str | None = None,
        job_name: str = "job",
    ) -> None:
        """Checks Docker and gets the image ready.

        Args:
            image: A user's image (must be present locally; the kit is mounted in), or None for the kit's.
            engine: The Docker engine (default: :func:`find_engine`).
            stream: Where image build progress goes (None: only to ``build_log``).
            build_log: File the image build output is appended to.
            job_name: Used in the containers' names.

        Raises:
            DockerUnavailableError: Docker or compose missing, or the daemon down (the message says how to fix it).
            ImageNotFoundError: ``image`` is not in the local engine.
            ImageBuildError: The kit's image could not be built.
        """
        self.engine = engine or find_engine()
        self.image = resolve_image(self.engine, image, stream=stream, log_path=build_log)
        self.job_name = job_name
        self.last: ContainerJobResult | None = None

    def run_process_group(
        self,
        specs: Sequence[ProcessSpec],
        *,
        timeout: float | None = None,
        grace: float = DEFAULT_GRACE,
        stream: IO[str] | None = None,
        failure_reason: Callable[[ProcessSpec], str | None] | None = None,
    ) -> GroupResult:
        """Runs the processes in one container per host; same arguments and result as the process backend's.

        Args:
            specs: The processes, prepared by local_mode for this machine.
            timeout: Seconds after which the job is stopped.
            grace: Seconds between SIGTERM and SIGKILL.
            stream: Where the prefixed output goes.
            failure_reason: Reads the failure file of the first failed process.

        Returns:
            How the processes ended.
        """
        self.last = run_in_containers(
            hosts_of(specs),
            specs,
            image=self.image,
            engine=self.engine,
            timeout=timeout,
            grace=grace,
            stream=stream,
            failure_reason=failure_reason,
            job_name=self.job_name,
        )
        return self.last.group
