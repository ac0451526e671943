"""The Docker engine calls the twin makes: one internal network per job, one container per host, their logs.

Everything goes through the docker CLI with argument lists (never a shell), each call bounded by a timeout. Every
network and container carries the label ``org.smddp-compat.twin-job=<id>``, so that :func:`remove_job` (and
``smddp image --clean``) find whatever a job left, whatever happened to the process that started it.
"""

from __future__ import annotations

import csv
import io
import itertools
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import Engine
from smddp_compat.local_mode.docker.errors import ContainerError
from smddp_compat.launcher import TaggedLines

__all__ = ["TWIN_LABEL", "HOST_LABEL", "Mount", "ContainerState", "TwinEngine"]

TWIN_LABEL = "org.smddp-compat.twin-job"
HOST_LABEL = "org.smddp-compat.host"
_CALL_SECONDS = 60.0


@dataclass(frozen=True)
class Mount:
    """A bind mount: a folder (or file) of this machine at a path in the container."""

    source: Path
    target: str
    read_only: bool = False

    def argument(self) -> str:
        """The ``--mount`` value: comma-separated ``key=value`` fields, each quoted as CSV.

        Docker reads the value with a CSV reader, so a path holding a comma or a quote, quoted, stays one field: it
        can never add a field (a second ``source=``, which Docker would take instead of the first).
        """
        fields = ["type=bind", f"source={self.source}", f"target={self.target}"]
        if self.read_only:
            fields.append("readonly")
        buffer = io.StringIO()
        csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="").writerow(fields)
        return buffer.getvalue()


@dataclass(frozen=True)
class ContainerState:
    """What ``docker inspect`` says of a container: running, or exited with a code (``oom`` when killed for memory)."""

    running: bool
    exit_code: int
    oom_killed: bool = False


class TwinEngine:
    """The docker calls of one twin job.

    Args:
        engine: The Docker engine.
        job_id: The job's unique id (labels and names).
        log_path: File every docker call's output is appended to, or None.
    """

    def __init__(self, engine: Engine, job_id: str, log_path: str | None = None) -> None:
        self.engine = engine
        self.job_id = job_id
        self.log_path = log_path
        self.network = f"smddp-twin-{job_id}"
        self._log_threads: list[threading.Thread] = []

    def _run(self, *argv: str, timeout: float = _CALL_SECONDS) -> str:
        code, output = capture([self.engine.docker, *argv], timeout=timeout)
        if code != 0:
            raise ContainerError(f"`docker {' '.join(argv[:3])} ...` failed (exit code {code}): {output[-2000:]}")
        return output

    def container_name(self, host: str) -> str:
        """The container of ``host`` (``smddp-twin-<id>-algo-1``)."""
        return f"{self.network}-{host}"

    def create_network(self, *, isolated: bool = False) -> None:
        """Creates the job's internal network: no route out, each container its own namespace and hostname.

        Args:
            isolated: Leave this machine out of the network too (``EnableNetworkIsolation``): its bridge gets no
                address, so the containers' default route leads nowhere and only their peers answer. An internal
                network alone still lets them reach this machine's own services at the bridge's address (seen on
                an engine started with ``--iptables=false``: a connection there is refused by this machine, where
                with this option nothing answers). The machine then cannot reach them either, which only the twin's
                S3 needs, and an isolated job has none.
        """
        options = ["--opt", "com.docker.network.bridge.inhibit_ipv4=true"] if isolated else []
        self._run(
            "network", "create", "--internal", *options, "--label", f"{TWIN_LABEL}={self.job_id}", self.network
        )

    def start(
        self,
        host: str,
        image: str,
        command: Sequence[str],
        *,
        environment: Mapping[str, str],
        mounts: Sequence[Mount],
        aliases: Sequence[str] = (),
        shm_size: str = "1g",
        entrypoint: str | None = None,
    ) -> str:
        """Starts one host's container, detached, on the job's network.

        Returns its name. ``host``: ``algo-N``, or ``s3`` for the twin's S3 service; ``command`` comes after the
        image (arguments, never read as docker options); ``environment`` names as SageMaker allows them (letters,
        digits, '_'), values on one line; ``shm_size``: SageMaker's instances give MPI's shared-memory transport
        plenty; ``entrypoint`` replaces the image's (``ContainerEntrypoint``'s first item).
        """
        name = self.container_name(host)
        argv = [
            "run", "--detach", "--name", name, "--hostname", host,
            "--network", self.network, "--network-alias", host,
            "--label", f"{TWIN_LABEL}={self.job_id}", "--label", f"{HOST_LABEL}={host}",
            "--shm-size", shm_size,
        ]  # fmt: skip
        for alias in aliases:
            argv += ["--network-alias", alias]
        for mount in mounts:
            argv += ["--mount", mount.argument()]
        if entrypoint is not None:
            argv.append(f"--entrypoint={entrypoint}")
        # The variables go through a private env-file: no value on a command line, and none in the environment of
        # the docker client itself (a request's DOCKER_HOST or LD_PRELOAD must not steer this machine's client).
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", prefix="smddp-twin-env-", suffix=".list") as env_file:
            for variable in sorted(environment):
                env_file.write(f"{variable}={environment[variable]}\n")
            env_file.flush()
            argv += ["--env-file", env_file.name, image, *command]
            code, output = capture([self.engine.docker, *argv], timeout=_CALL_SECONDS)
        if code != 0:
            raise ContainerError(f"could not start the container of {host} (exit code {code}): {output[-2000:]}")
        return name

    def address(self, host: str) -> str:
        """The container's address on the job's network."""
        template = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        return self._run("inspect", "--format", template, self.container_name(host))

    def states(self, hosts: Sequence[str]) -> dict[str, ContainerState]:
        """Whether each host's container runs, and its exit code once it has stopped (one ``docker inspect``).

        A container that cannot be inspected (removed behind the twin's back) counts as stopped with code 255.
        """
        code, out = capture(
            [self.engine.docker, "inspect", "--format",
             "{{.Config.Hostname}} {{.State.Running}} {{.State.ExitCode}} {{.State.OOMKilled}}",
             *[self.container_name(host) for host in hosts]],
            timeout=_CALL_SECONDS,
        )
        found: dict[str, ContainerState] = {}
        for line in out.splitlines() if code is not None else []:
            parts = line.split()
            if len(parts) == 4 and parts[0] in hosts:
                found[parts[0]] = ContainerState(parts[1] == "true", int(parts[2]), parts[3] == "true")
        return {host: found.get(host, ContainerState(False, 255)) for host in hosts}

    def signal(self, host: str, signal_name: str) -> None:
        """Sends a signal to the container's first process (``docker kill --signal``); a stopped one is skipped."""
        capture([self.engine.docker, "kill", "--signal", signal_name, self.container_name(host)], timeout=_CALL_SECONDS)

    def follow_logs(
        self, host: str, stream: IO[str] | None, log_file: Path, on_line: Callable[[str], None] | None = None
    ) -> None:
        """Copies the container's output, as it comes, into ``log_file`` and to ``stream`` with ``[host]`` prefixes.

        Every rank's line reaches both whole, under its own mpirun tag (``[1,mpirank:3,algo-2]<stdout>:...``): the
        training toolkit prints an unbuffered rank's text and the tag that carries its newline as they come, so one
        printed line may end with another tag, or hold several ranks' chunks (:class:`TaggedLines` joins them).
        Neither sink can stop the other or the copy: a console that fails (its pipe closed) is dropped and the log
        file goes on; a log file that fails (a full disk) is dropped and the console goes on; the container's output
        is drained to its end either way.

        ``log_file`` is appended to; ``on_line`` is called with every whole line (the twin's metric watch), and not
        again once it raises.
        """

        def pump() -> None:
            console, observer = stream, on_line
            joined = TaggedLines()
            with subprocess.Popen(
                [self.engine.docker, "logs", "--follow", self.container_name(host)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ) as logs:
                assert logs.stdout is not None
                try:
                    sink: IO[bytes] | None = log_file.open("ab")
                except OSError:
                    sink = None
                for raw in itertools.chain(logs.stdout, [None]):  # None: the end, when unfinished lines are given
                    text = None if raw is None else raw.decode("utf-8", "replace").rstrip("\r\n")
                    for tag, part in joined.feed(text):
                        line = f"{tag.group(0) if tag is not None else ''}{part}"
                        if sink is not None:
                            try:
                                sink.write(line.encode("utf-8") + b"\n")
                                sink.flush()
                            except OSError:
                                sink = _closed_quietly(sink)
                        if console is not None:
                            try:
                                console.write(f"[{host}] {line.rstrip()}\n")
                                console.flush()
                            except (OSError, ValueError):
                                console = None
                        if observer is not None:
                            try:
                                observer(line)
                            except Exception:  # noqa: BLE001 - a failing observer (a bug) must not stop the draining
                                observer = None
                if sink is not None:
                    _closed_quietly(sink)

        thread = threading.Thread(target=pump, name=f"logs-{host}", daemon=True)
        thread.start()
        self._log_threads.append(thread)

    def wait_for_logs(self, timeout: float = 10.0) -> None:
        """Waits (bounded) until every followed log has reached its container's end."""
        for thread in self._log_threads:
            thread.join(timeout)

    def remove_job(self) -> None:
        """Removes every container and the network of this job (by label); failures are only logged."""
        code, ids = capture(
            [self.engine.docker, "ps", "--all", "--quiet", "--filter", f"label={TWIN_LABEL}={self.job_id}"],
            timeout=_CALL_SECONDS,
        )
        if code == 0 and ids:
            run_command([self.engine.docker, "rm", "--force", *ids.split()], timeout=120, log_path=self.log_path)
        run_command([self.engine.docker, "network", "rm", self.network], timeout=_CALL_SECONDS, log_path=self.log_path)


def _closed_quietly(handle: IO[bytes]) -> None:
    """Closes a file whose writes failed (its close may fail the same way); returns None, the sink's new value."""
    try:
        handle.close()
    except OSError:
        pass
