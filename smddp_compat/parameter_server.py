"""SageMaker's ``parameter_server`` distribution on TensorFlow 2.21's ``ParameterServerStrategy``.

SageMaker's TensorFlow toolkit starts a parameter server (job ``ps``, GPUs hidden) in its own process on every host
of two or more, then runs the script with a ``TF_CONFIG`` such as::

    {"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], "worker": ["algo-2:2222"]},
     "environment": "cloud", "task": {"type": "master", "index": 0}}

TensorFlow 2.21's strategy (with ``ClusterCoordinator``) is driven by one coordinator it calls ``chief`` and refuses
a job named ``master``; its workers and parameter servers only serve, never returning by themselves. Here:
:func:`read_tf_config` reads this process's :class:`Role`; :func:`cluster_resolver` renames ``master`` to ``chief``
(a parameter server started with the ``master`` cluster accepts it: the coordinator sends its cluster when it
connects); :func:`serve` runs a worker or parameter server until the coordinator is done; :func:`wait_for_tasks` and
:class:`ClusterWatch` bound the coordinator's waits, naming the task at fault (the strategy waits for ever for a task
down at the start, and retries a lost worker for ever); ``python -m smddp_compat.parameter_server`` runs
``TF_CONFIG``'s ``ps`` task as the toolkit's ``_run_ps`` does: it serves until the coordinator came and went, or until
it is stopped, as the toolkit's server ends with its host once the host's script has ended (a script that trains
without the servers never contacts them, which is no failure).

Standard library only at import time (TensorFlow is imported inside the functions that need it): the module ships
inside ``sourcedir.tar.gz``.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from smddp_compat.cluster import CURRENT_HOST_VARIABLE, HOSTS_VARIABLE, parse_host_addresses
from smddp_compat.errors import ConfigurationError, SmddpError

if TYPE_CHECKING:  # pragma: no cover - types only
    import tensorflow as tf

__all__ = [
    "TF_CONFIG_VARIABLE", "START_TIMEOUT_VARIABLE", "DEFAULT_START_TIMEOUT_SECONDS", "Role", "Task",
    "ParameterServerConfig", "ParameterServerError", "CoordinatorUnreachableError", "TaskUnreachableError",
    "TaskLostError", "read_tf_config", "cluster_resolver", "start_server", "accepts_connections", "probe", "ANSWERS",
    "SILENT", "REFUSED", "unreachable_tasks", "wait_for_tasks", "wait_for_coordinator", "serve",
    "start_timeout_from_environ", "ClusterWatch", "main",
]

TF_CONFIG_VARIABLE = "TF_CONFIG"
START_TIMEOUT_VARIABLE = "SMDDP_PS_START_TIMEOUT_SECONDS"
#: How long a parameter server (``python -m smddp_compat.parameter_server``) waits for the coordinator to accept
#: connections before it says so in its log (naming the coordinator) and serves on: SageMaker starts hosts minutes
#: apart at worst, and the coordinator imports TensorFlow and loads its data before it listens.
DEFAULT_START_TIMEOUT_SECONDS = 900.0

#: TF_CONFIG's names for the coordinator: SageMaker's toolkit calls it ``master``, TensorFlow 2.21 ``chief``.
_COORDINATOR_JOBS = ("master", "chief")
_KNOWN_JOBS = frozenset((*_COORDINATOR_JOBS, "worker", "ps", "evaluator"))
#: Consecutive refused probes after which a coordinator that was reachable counts as gone (one probe per poll).
_GONE_AFTER_MISSES = 3
_PROBE_SECONDS = 2.0

_EXAMPLE = ('{"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], '
            '"worker": ["algo-2:2222"]}, "task": {"type": "worker", "index": 0}}')


class Role(str, enum.Enum):
    """What this process does in a parameter-server job."""

    COORDINATOR = "coordinator"
    """The ``master`` (SageMaker) or ``chief`` task: runs the training program and drives the cluster."""
    WORKER = "worker"
    """Runs the functions the coordinator schedules; serves until the coordinator is done."""
    PS = "ps"
    """Holds variables; serves until the coordinator is done."""
    SINGLE = "single"
    """No parameter servers (no ``TF_CONFIG``, or none with ``ps`` tasks): the script trains alone."""


@dataclass(frozen=True)
class Task:
    """One task of the cluster: ``index`` in ``job`` of the strategy's cluster (``chief``, the coordinator,
    ``worker``, ``ps`` or ``evaluator``), listening on ``address`` (``host:port``), on SageMaker ``host`` (``algo-2``)
    when known; ``source_job`` is the job's name in ``TF_CONFIG`` (``master`` for SageMaker's coordinator).
    """

    job: str
    index: int
    address: str
    host: str | None = None
    source_job: str | None = None

    @property
    def role(self) -> Role:
        return Role.COORDINATOR if self.job == "chief" else Role(self.job)

    @property
    def label(self) -> str:
        """``coordinator (master 0)``, ``worker 0``, ``ps 1``: how messages name the task."""
        if self.job == "chief":
            return f"coordinator ({self.source_job or 'chief'} {self.index})"
        return f"{self.job} {self.index}"

    def describe(self) -> str:
        """The label, address and host: ``worker 0 at 127.0.0.3:2222 (host algo-2)``."""
        where = f" (host {self.host})" if self.host else ""
        return f"{self.label} at {self.address}{where}"


@dataclass(frozen=True)
class ParameterServerConfig:
    """This process's place in a parameter-server job, read from ``TF_CONFIG`` by :func:`read_tf_config`.

    ``task`` is None when ``role`` is ``single``; ``tasks`` holds every task of the cluster, coordinator first, then
    workers, then parameter servers (and evaluators); ``tf_config`` the ``TF_CONFIG`` text read (None when unset).
    """

    role: Role
    task: Task | None = None
    tasks: tuple[Task, ...] = ()
    tf_config: str | None = field(default=None, repr=False)

    @property
    def coordinator(self) -> Task | None:
        return next((t for t in self.tasks if t.job == "chief"), None)

    @property
    def workers(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.job == "worker")

    @property
    def parameter_servers(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.job == "ps")

    def cluster_spec(self, *, as_written: bool = False) -> dict[str, list[str]]:
        """The cluster, job -> addresses, with ``master`` renamed ``chief`` unless `as_written` (``TF_CONFIG``'s
        names)."""
        spec: dict[str, list[str]] = {}
        for task in self.tasks:
            spec.setdefault((task.source_job or task.job) if as_written else task.job, []).append(task.address)
        return spec


class ParameterServerError(SmddpError, RuntimeError):
    """A task of a parameter-server job could not be reached, or was lost. ``rank`` holds the task's label
    (``worker 0``), ``host`` its host when known."""

    def __init__(self, message: str, *, task: Task | None = None) -> None:
        super().__init__(message, rank=task.label if task else None, host=task.host if task else None)
        self.task = task


class CoordinatorUnreachableError(ParameterServerError):
    """A worker or parameter server never reached the coordinator within its start timeout."""


class TaskUnreachableError(ParameterServerError):
    """The coordinator could not reach every worker and parameter server within its start timeout."""


class TaskLostError(ParameterServerError):
    """During training a task stopped accepting connections, or stopped making progress, for longer than allowed."""


# ----------------------------------------------------------------------------------------------------- TF_CONFIG


def _config_error(raw: str, problem: str, fix: str | None = None) -> ConfigurationError:
    return ConfigurationError(TF_CONFIG_VARIABLE, raw, problem,
                              fix or f"give a TF_CONFIG such as SageMaker's parameter_server one, e.g. {_EXAMPLE}")


def _host_names(environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """SageMaker's host names and the address -> host map (``SMDDP_HOST_ADDRESSES`` reversed); only for naming hosts
    in messages, so a malformed value (reported by the launchers that use it) just names no host."""
    hosts: list[str] = []
    try:
        value = json.loads(environ.get(HOSTS_VARIABLE) or "[]")
        if isinstance(value, list):
            hosts = [h for h in value if isinstance(h, str)]
    except ValueError:
        pass
    if not hosts and environ.get(CURRENT_HOST_VARIABLE):
        hosts = [environ[CURRENT_HOST_VARIABLE]]
    try:
        addresses = parse_host_addresses(environ.get("SMDDP_HOST_ADDRESSES"))
    except ConfigurationError:
        addresses = {}
    return hosts, {address: host for host, address in addresses.items()}


def _split_address(raw: str, job: str, index: int, address: Any) -> tuple[str, int]:
    if not isinstance(address, str) or ":" not in address:
        raise _config_error(raw, f"task {job} {index} has the address {address!r}, not 'host:port'")
    name, _, port = address.rpartition(":")
    if not name or not port.isdigit() or not 0 < int(port) < 65536:
        raise _config_error(raw, f"task {job} {index} has the address {address!r}: the port must be 1..65535")
    return name.strip("[]"), int(port)


def read_tf_config(environ: Mapping[str, str] | None = None) -> ParameterServerConfig:
    """Reads ``TF_CONFIG`` into this process's role in a parameter-server job.

    Accepted: SageMaker's (``master``, ``worker``, ``ps``; the ``master`` is the coordinator) and TensorFlow's
    (``chief``, ``worker``, ``ps``, optionally ``evaluator``) layouts. ``TF_CONFIG`` unset or empty, or a cluster
    without ``ps`` tasks (e.g. MultiWorkerMirroredStrategy's), is ``single``. Host names come from ``SM_HOSTS``
    (addresses that are host names, as on SageMaker) and ``SMDDP_HOST_ADDRESSES`` (local mode's loopback addresses).

    Raises:
        smddp_compat.errors.ConfigurationError: ``TF_CONFIG`` is not JSON, lacks ``cluster`` or ``task``, names an
            unknown job, has no coordinator or no worker beside its parameter servers, has two coordinators, a
            malformed or repeated address, or a task that is not in its cluster; or this task is an evaluator.
    """
    env = os.environ if environ is None else environ
    raw = env.get(TF_CONFIG_VARIABLE)
    if raw is None or not raw.strip():
        return ParameterServerConfig(Role.SINGLE)
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise _config_error(raw, f"is not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise _config_error(raw, "is not a JSON object")
    cluster = config.get("cluster")
    if not isinstance(cluster, dict) or not all(
        isinstance(job, str) and isinstance(addresses, list) for job, addresses in cluster.items()
    ):
        raise _config_error(raw, "has no 'cluster' object of job name -> list of 'host:port' addresses")
    if not cluster.get("ps"):
        return ParameterServerConfig(Role.SINGLE, tf_config=raw)
    unknown = sorted(set(cluster) - _KNOWN_JOBS)
    if unknown:
        raise _config_error(raw, f"names the job(s) {unknown}; a parameter-server cluster has master (or chief), "
                                 "worker, ps and optionally evaluator", None)
    coordinators = [job for job in _COORDINATOR_JOBS if cluster.get(job)]
    if len(coordinators) != 1:
        problem = ("has both a master and a chief job" if coordinators else
                   "has parameter servers but no master (or chief) task to coordinate them")
        raise _config_error(raw, problem, f"name exactly one coordinator task, e.g. {_EXAMPLE}")
    coordinator_job = coordinators[0]
    if len(cluster[coordinator_job]) != 1:
        raise _config_error(raw, f"lists {len(cluster[coordinator_job])} {coordinator_job} tasks; "
                                 "ParameterServerStrategy has exactly one coordinator", None)
    if not cluster.get("worker"):
        raise _config_error(raw, "has parameter servers but no worker task to run the training steps",
                            "list at least one worker (SageMaker's parameter_server distribution needs 2+ hosts)")

    hosts, host_of_address = _host_names(env)
    tasks: list[Task] = []
    seen: dict[tuple[str, int], str] = {}
    for source_job in (coordinator_job, "worker", "ps", "evaluator"):
        for index, address in enumerate(cluster.get(source_job, [])):
            name, port = _split_address(raw, source_job, index, address)
            if (name, port) in seen:
                raise _config_error(raw, f"gives {source_job} {index} the address {address!r} of {seen[name, port]}",
                                    "give every task its own host:port")
            seen[name, port] = f"{source_job} {index}"
            host = name if name in hosts else host_of_address.get(name)
            job = "chief" if source_job == coordinator_job else source_job
            tasks.append(Task(job, index, address, host, source_job))

    task_spec = config.get("task")
    if not isinstance(task_spec, dict) or "type" not in task_spec:
        raise _config_error(raw, "has no 'task' object with 'type' and 'index'")
    task_type, task_index = task_spec.get("type"), task_spec.get("index", 0)
    if isinstance(task_index, str) and task_index.isdigit():
        task_index = int(task_index)
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise _config_error(raw, f"has the task index {task_index!r}, not an integer")
    if task_type == "evaluator":
        raise _config_error(raw, "makes this process an evaluator, which this kit does not run",
                            "evaluate on the coordinator (the master task) and drop the evaluator job")
    if task_type in _COORDINATOR_JOBS and task_type != coordinator_job:
        raise _config_error(raw, f"makes this process a {task_type}, but the cluster's coordinator job is "
                                 f"{coordinator_job}", f"use the task type {coordinator_job!r}")
    job = "chief" if task_type == coordinator_job else task_type
    mine = next((t for t in tasks if t.job == job and t.index == task_index), None)
    if mine is None:
        raise _config_error(raw, f"makes this process task {task_type!r} {task_index!r}, which its cluster does not "
                                 "list", "use a task type and index the cluster lists")
    return ParameterServerConfig(mine.role, mine, tuple(tasks), raw)


def _require_cluster(config: ParameterServerConfig, what: str) -> Task:
    if config.task is None or config.role is Role.SINGLE:
        raise ConfigurationError(TF_CONFIG_VARIABLE, config.tf_config, f"describes no parameter-server cluster, "
                                 f"which {what} needs", f"set TF_CONFIG with ps tasks, e.g. {_EXAMPLE}")
    return config.task


def cluster_resolver(config: ParameterServerConfig) -> tf.distribute.cluster_resolver.ClusterResolver:
    """The cluster resolver to build ``tf.distribute.experimental.ParameterServerStrategy`` from (on the
    coordinator) or to start a task's server with: a gRPC ``SimpleClusterResolver``, ``master`` renamed ``chief``.

    Raises:
        smddp_compat.errors.ConfigurationError: `config` is ``single``.
    """
    task = _require_cluster(config, "cluster_resolver()")
    import tensorflow as tf

    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(config.cluster_spec()), task_type=task.job, task_id=task.index, rpc_layer="grpc")


def start_server(config: ParameterServerConfig) -> tf.distribute.Server:
    """Starts this worker's or parameter server's ``tf.distribute.Server``.

    A parameter server is started as the toolkit's ``_run_ps`` starts it: with ``TF_CONFIG``'s cluster as written
    (SageMaker's ``master`` job included) and the GPUs hidden (``device_count={"GPU": 0}``: several TensorFlow
    processes sharing a GPU is unsafe, and variables live on the CPU anyway). The coordinator, whose cluster names
    the same task ``chief``, sends its own cluster definition when it connects, which the server then uses. A worker
    gets the strategy's cluster (``chief``).

    Args:
        config: A ``worker`` or ``ps`` role (:func:`read_tf_config`).

    Returns:
        The running server (it serves from its own threads until the process ends).

    Raises:
        smddp_compat.errors.ConfigurationError: The role is not ``worker`` or ``ps``.
        ParameterServerError: The server cannot listen on its address (the port is taken).
    """
    task = _require_cluster(config, "start_server()")
    if config.role not in (Role.WORKER, Role.PS):
        raise ConfigurationError(TF_CONFIG_VARIABLE, config.tf_config,
                                 f"makes this process the {task.label}, which runs the training program rather than "
                                 "a server", "start servers only for worker and ps tasks")
    import tensorflow as tf

    session_config = tf.compat.v1.ConfigProto(device_count={"GPU": 0}) if config.role is Role.PS else None
    try:
        cluster = config.cluster_spec(as_written=config.role is Role.PS)
        return tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=task.job,
                                    task_index=task.index, protocol="grpc", config=session_config, start=True)
    except (tf.errors.OpError, ValueError) as exc:
        raise ParameterServerError(
            f"could not start the server of {task.describe()}: {exc}. Fix: free port {task.address.rsplit(':', 1)[1]} "
            "or give the task another address in TF_CONFIG.", task=task) from exc


# ----------------------------------------------------------------------------------------------------- reachability


def accepts_connections(address: str, timeout: float = _PROBE_SECONDS) -> bool:
    """Whether ``host:port`` accepts a TCP connection within `timeout` seconds (the connection is closed at once)."""
    name, _, port = address.rpartition(":")
    try:
        with socket.create_connection((name.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def unreachable_tasks(tasks: Sequence[Task], timeout: float = _PROBE_SECONDS) -> list[Task]:
    """The tasks among `tasks` (e.g. ``config.workers + config.parameter_servers``) whose address does not accept a
    TCP connection within `timeout` seconds each."""
    return [task for task in tasks if not accepts_connections(task.address, timeout)]


#: What a client sends first on an HTTP/2 connection (RFC 9113, 3.4): the preface and an empty SETTINGS frame.
_HTTP2_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
ANSWERS, SILENT, REFUSED = "answers", "silent", "refused"


def probe(address: str, timeout: float = _PROBE_SECONDS) -> str:
    """How the gRPC server at ``host:port`` responds: :data:`ANSWERS` (it sends its HTTP/2 SETTINGS frame in reply to
    a client preface), :data:`SILENT` (the connection is accepted, by the kernel, but nothing answers within
    `timeout` seconds: the process is stopped, hung or starved) or :data:`REFUSED` (nothing listens: it has ended).

    `timeout` bounds the wait for the connection, then for the answer.
    """
    name, _, port = address.rpartition(":")
    try:
        with socket.create_connection((name.strip("[]"), int(port)), timeout=timeout) as connection:
            try:
                connection.sendall(_HTTP2_CLIENT_PREFACE)
                connection.settimeout(timeout)
                return ANSWERS if connection.recv(9) else REFUSED  # b"": closed at once
            except OSError:  # socket.timeout included
                return SILENT
    except (OSError, ValueError):
        return REFUSED


def _remote_tasks(config: ParameterServerConfig) -> list[Task]:
    return [t for t in config.tasks if t.job in ("worker", "ps")]


def wait_for_tasks(config: ParameterServerConfig, *, timeout: float, timeout_field: str,
                   poll_seconds: float = 1.0) -> None:
    """On the coordinator: waits until every worker and parameter server accepts connections.

    ``ParameterServerStrategy`` would wait for ever for a task that never comes up; call this first.

    Args:
        timeout_field: The setting `timeout` came from, named in the error (``--start-timeout``).

    Raises:
        TaskUnreachableError: A task still refused connections after `timeout` seconds (the message names each).
    """
    deadline = time.monotonic() + timeout
    missing = _remote_tasks(config)
    while True:
        missing = unreachable_tasks(missing, timeout=min(_PROBE_SECONDS, poll_seconds))
        if not missing:
            return
        if time.monotonic() >= deadline:
            names = "; ".join(task.describe() for task in missing)
            raise TaskUnreachableError(
                f"{names} did not accept connections within {timeout:g} s ({timeout_field}), so the coordinator "
                "cannot start training. Fix: check that the training script (and, with SageMaker's toolkit, its "
                "parameter server) started on that host and that its log shows no error, or raise "
                f"{timeout_field}.", task=missing[0])
        time.sleep(poll_seconds)


def wait_for_coordinator(config: ParameterServerConfig, *, start_timeout: float, timeout_field: str,
                         poll_seconds: float = 1.0, should_stop: Callable[[], bool] | None = None,
                         silent_limit: float | None = None, silent_field: str = "the time limit",
                         on_start_timeout: Callable[[CoordinatorUnreachableError], None] | None = None) -> str:
    """On a worker or parameter server: waits until the coordinator has accepted connections and then stopped.

    The coordinator listens from the moment it connects to the cluster until its process ends; so the first
    accepted connection means the job has started, and :data:`_GONE_AFTER_MISSES` refused probes in a row after
    that mean it has finished (its exit code tells how). How long the job lasts is the coordinator's business (its
    own waits are bounded by :class:`ClusterWatch`); a coordinator whose process is stopped or hung (it accepts
    connections without answering, :func:`probe`) is given up after `silent_limit` seconds when one is set.

    Args:
        start_timeout: Seconds to wait for the first accepted connection.
        timeout_field: The setting `start_timeout` came from, named in the error.
        should_stop: Checked between probes; True ends the wait at once (e.g. SIGTERM received).
        silent_limit: Seconds the coordinator may go without answering once it has started (None: no limit).
        silent_field: The setting `silent_limit` came from, named in the error.
        on_start_timeout: Called once with the start timeout's error instead of raising it; the wait then goes on
            until the coordinator came and went or `should_stop` (a server its job may never use).

    Returns:
        ``"finished"`` (the coordinator came and went) or ``"stopped"`` (`should_stop` said so).

    Raises:
        CoordinatorUnreachableError: The coordinator did not accept a connection within `start_timeout` seconds
            (without `on_start_timeout`).
        TaskLostError: The coordinator accepted connections without answering for `silent_limit` seconds.
    """
    _require_cluster(config, "wait_for_coordinator()")
    coordinator = config.coordinator
    assert coordinator is not None  # read_tf_config guarantees one
    stop = should_stop or (lambda: False)
    deadline: float | None = time.monotonic() + start_timeout
    while not accepts_connections(coordinator.address, timeout=min(_PROBE_SECONDS, poll_seconds)):
        if stop():
            return "stopped"
        if deadline is not None and time.monotonic() >= deadline:
            me = config.task.describe() if config.task else "this task"
            error = CoordinatorUnreachableError(
                f"{me}: the {coordinator.describe()} did not accept connections within {start_timeout:g} s "
                f"({timeout_field}). Fix: check that the training script runs on that host and look at its log for "
                f"an error, or raise {timeout_field}.", task=coordinator)
            if on_start_timeout is None:
                raise error
            on_start_timeout(error)
            deadline = None
        time.sleep(poll_seconds)
    misses = 0
    silent_since: float | None = None
    while misses < _GONE_AFTER_MISSES:
        if stop():
            return "stopped"
        time.sleep(poll_seconds)
        state = probe(coordinator.address, timeout=min(_PROBE_SECONDS, poll_seconds))
        misses = misses + 1 if state == REFUSED else 0
        if state != SILENT:
            silent_since = None
            continue
        now = time.monotonic()
        silent_since = now if silent_since is None else silent_since
        if silent_limit is not None and now - silent_since >= silent_limit:
            me = config.task.describe() if config.task else "this task"
            raise TaskLostError(
                f"{me}: the {coordinator.describe()} has accepted connections without answering for "
                f"{silent_limit:g} s (stopped or hung); this task stops waiting for it. Fix: look at that host's log; "
                f"if it is merely overloaded, raise {silent_field}.", task=coordinator)
    return "finished"


def serve(config: ParameterServerConfig, *, start_timeout: float, timeout_field: str, poll_seconds: float = 1.0,
          should_stop: Callable[[], bool] | None = None, log: Callable[[str], None] | None = None,
          silent_limit: float | None = None, silent_field: str = "the time limit",
          on_start_timeout: Callable[[CoordinatorUnreachableError], None] | None = None) -> str:
    """Runs this worker or parameter server until the coordinator is done (:func:`start_server`, then
    :func:`wait_for_coordinator`).

    `log` receives the two progress lines (default: standard output); the other arguments, the result
    (return or exit then: the server's threads end with the process) and the errors are :func:`start_server`'s and
    :func:`wait_for_coordinator`'s.
    """
    say = log or (lambda line: print(line, flush=True))
    start_server(config)
    task, coordinator = config.task, config.coordinator
    assert task is not None and coordinator is not None
    limit = (f"named if it has not started in {start_timeout:g} s" if on_start_timeout else
             f"at most {start_timeout:g} s for it to start")
    say(f"{task.describe()}: serving; waiting for the {coordinator.describe()} ({limit})")
    outcome = wait_for_coordinator(config, start_timeout=start_timeout, timeout_field=timeout_field,
                                   poll_seconds=poll_seconds, should_stop=should_stop, silent_limit=silent_limit,
                                   silent_field=silent_field, on_start_timeout=on_start_timeout)
    say(f"{task.describe()}: " + ("the coordinator has finished; exiting" if outcome == "finished"
                                  else "asked to stop; exiting"))
    return outcome


def start_timeout_from_environ(environ: Mapping[str, str] | None = None) -> float:
    """``SMDDP_PS_START_TIMEOUT_SECONDS`` (default :data:`DEFAULT_START_TIMEOUT_SECONDS`).

    Raises:
        smddp_compat.errors.ConfigurationError: The value is not a number > 0.
    """
    env = os.environ if environ is None else environ
    raw = env.get(START_TIMEOUT_VARIABLE)
    if raw is None or not raw.strip():
        return DEFAULT_START_TIMEOUT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(START_TIMEOUT_VARIABLE, raw, "is not a number of seconds > 0",
                                 f"give e.g. {DEFAULT_START_TIMEOUT_SECONDS:g}, or unset it for that default")
    return value


# ----------------------------------------------------------------------------------------------------- the watch


class ClusterWatch:
    """Bounds every wait of the coordinator: a thread that fails the job when a task is lost or a phase stalls.

    ``ParameterServerStrategy`` blocks in TensorFlow while a worker is lost (it waits for the worker to come back,
    an hour per attempt, without end), so a bounded wait cannot be written around its calls; this watch runs beside
    them. Every ``probe_seconds`` it probes the workers and parameter servers (:func:`probe`: does the gRPC server
    answer?) and checks the current phase:

    - a task that has not answered for `lost_after` seconds in a row (it refuses connections: its process ended; or
      it accepts them without answering: stopped or hung) fails the job (:class:`TaskLostError` naming it), even
      while the strategy is still waiting for it to recover;
    - a phase (:meth:`phase`: "training steps 100-150", "checkpoint", ...) that lasts longer than its limit fails
      the job, naming the tasks that do not answer, if any.

    `on_failure` is called once, from the watch's thread, with the error; it should report it and end the process
    (``os._exit``): the main thread may be blocked inside TensorFlow for ever.

    Args:
        lost_after: Seconds a task may go without answering (a restarting worker is waited for this long).
        probe_seconds: Seconds between rounds (default: a quarter of `lost_after`, between 0.5 and 5).
        limit_field: The setting the phase limits come from, named in the error's fix (``--task-timeout``).
    """

    def __init__(self, config: ParameterServerConfig, *, lost_after: float,
                 on_failure: Callable[[TaskLostError], None], probe_seconds: float | None = None,
                 limit_field: str = "the time limit") -> None:
        self._tasks = _remote_tasks(config)
        self._limit_field = limit_field
        self._lost_after = float(lost_after)
        self._on_failure = on_failure
        self._probe_seconds = probe_seconds if probe_seconds is not None else min(5.0, max(0.5, lost_after / 4))
        self._lock = threading.Lock()
        self._phase: tuple[str, float, float] | None = None  # (what, limit, started)
        self._failing_since: dict[Task, tuple[float, str]] = {}  # task -> (since, SILENT or REFUSED)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: TaskLostError | None = None

    def start(self) -> ClusterWatch:
        """Starts the watch's thread (a daemon) and returns the watch."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ClusterWatch", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stops watching (the thread ends within one probe round)."""
        self._stopped.set()

    def __enter__(self) -> ClusterWatch:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def phase(self, what: str, limit: float) -> None:
        """Starts a phase that must end (the next :meth:`phase` or :meth:`idle` call) within `limit` seconds;
        `what` is what the coordinator waits for, as the error will say it (``training steps 100-150``)."""
        with self._lock:
            self._phase = (what, float(limit), time.monotonic())

    def idle(self) -> None:
        """Ends the current phase without starting another (nothing is awaited from the cluster)."""
        with self._lock:
            self._phase = None

    def check(self, now: float | None = None) -> TaskLostError | None:
        """One round at monotonic time `now`: probes the tasks and returns the failure it finds, if any."""
        states = {task: probe(task.address, timeout=min(_PROBE_SECONDS, self._probe_seconds)) for task in self._tasks}
        now = time.monotonic() if now is None else now
        for task, state in states.items():
            if state == ANSWERS:
                self._failing_since.pop(task, None)
            elif task not in self._failing_since or self._failing_since[task][1] != state:
                self._failing_since[task] = (self._failing_since.get(task, (now, state))[0], state)
        lost = [task for task, (since, _) in self._failing_since.items() if now - since >= self._lost_after]
        if lost:
            return TaskLostError(
                f"{self._describe(lost, self._lost_after)}: the task is lost (ParameterServerStrategy would "
                "wait for it for ever), so the coordinator stops the job. Fix: look at that host's log for why the "
                "task ended or hung, then run the job again; training resumes from its last checkpoint.",
                task=lost[0])
        with self._lock:
            phase = self._phase
        if phase is not None and now - phase[2] >= phase[1]:
            what, limit, _ = phase
            failing = [task for task in self._tasks if task in self._failing_since]
            detail = (self._describe(failing) if failing else
                      f"every task ({', '.join(task.label for task in self._tasks)}) answers")
            return TaskLostError(
                f"{what} did not finish within {limit:g} s; {detail}. The coordinator stops the job. Fix: look at "
                f"the hosts' logs; if the cluster is merely slow, raise {self._limit_field}.",
                task=failing[0] if failing else None)
        return None

    def _describe(self, tasks: Sequence[Task], seconds: float | None = None) -> str:
        span = f" for {seconds:g} s" if seconds is not None else ""
        parts = []
        for task in tasks:
            if self._failing_since[task][1] == REFUSED:
                parts.append(f"{task.describe()} has refused connections{span} (its process has ended)")
            else:
                parts.append(f"{task.describe()} has accepted connections without answering{span} (stopped or hung)")
        return "; ".join(parts)

    def _run(self) -> None:
        while not self._stopped.wait(self._probe_seconds):
            failure = self.check()
            if failure is not None and not self._stopped.is_set():
                self.failure = failure
                self._stopped.set()
                self._on_failure(failure)
                return


# ----------------------------------------------------------------------------------------------------- command


def _serve_on(error: CoordinatorUnreachableError) -> None:
    """The parameter server's start timeout: the coordinator is named, and the server serves on."""
    print(f"parameter server: {error} It serves on until stopped: a script that trains without the parameter "
          "servers never connects, which is no failure.", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``python -m smddp_compat.parameter_server``: the parameter server of ``TF_CONFIG``'s ``ps`` task.

    Starts the server as the toolkit's ``_run_ps`` does (GPUs hidden) and serves until the coordinator has accepted
    connections and stopped again (exit code 0), or until SIGTERM or SIGINT (exit code 143 / 130: how local mode and
    the SDK v3 driver stop it once the scripts have ended, as the toolkit's server ends with its host). A coordinator
    that has not connected within ``SMDDP_PS_START_TIMEOUT_SECONDS`` is named in one line, and the server serves on:
    a script that trains without the parameter servers never connects.

    Args:
        argv: Command-line arguments (none are accepted; ``-h``/``--help`` prints this text).
        environ: The environment (default: ``os.environ``).

    Returns:
        0 when the coordinator came and went; 1 on a configuration error (the reason on standard error); 128 + the
        signal when stopped.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(main.__doc__)
        return 0
    if args:
        print(f"python -m smddp_compat.parameter_server takes no arguments, got {args!r}: its task comes from "
              "TF_CONFIG, its start timeout from SMDDP_PS_START_TIMEOUT_SECONDS.", file=sys.stderr, flush=True)
        return 2
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
    try:
        config = read_tf_config(environ)
        if config.role is not Role.PS:
            what = config.task.label if config.task else "no parameter-server task"
            raise ConfigurationError(
                TF_CONFIG_VARIABLE, config.tf_config, f"describes {what}; this command runs a parameter server",
                "give it the TF_CONFIG of the host's ps task ('task': {'type': 'ps', 'index': <host index>}); run "
                "the training script itself for the master and worker tasks")
        timeout = start_timeout_from_environ(environ)
        serve(config, start_timeout=timeout, timeout_field=START_TIMEOUT_VARIABLE, should_stop=lambda: bool(received),
              on_start_timeout=_serve_on)
    except SmddpError as exc:
        print(f"parameter server: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 128 + received[0] if received else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
