"""What a local job's processes serve is reachable from the job only, never from another machine (issue 35, class 6).

TensorFlow's gRPC servers (MWMS, parameter servers, DTensor) and mpirun's out-of-band listeners bind every interface,
whatever they are asked. In local mode such jobs run in a network of the job's own (``smddp_compat.launcher``'s
``own_network``): each test starts a real job, finds every socket its processes listen on, and connects to each port
from this machine's LAN address, as another machine would: refused. The same job with ``SMDDP_JOB_NETWORK=host``
(this machine's network, what every job had before) accepts the connection, so the probe can tell. The job still
downloads from outside (the test's HTTP server on the LAN address) and reaches this machine's loopback services at
10.0.2.2. Horovod's Gloo jobs, which reach the launcher's rendezvous, keep this machine's network: every socket of
theirs is on loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from smddp_compat.launcher._own_network import own_network_unavailable_reason
from tests.reliability.conftest import PROGRAMS, alive, quiet_env, smddp, smddprun
from tests.reliability.test_launcher_faults import Running, assert_no_traceback

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]

SERVE = str(PROGRAMS / "serve_and_wait.py")
# From a launcher's death to its namespace's holder and slirp4netns ending (each reads a pipe the kernel closes).
DEATH_BOUND_SECONDS = 5.0


def _lan_address() -> str:
    """This machine's first IPv4 address that is not loopback: where another machine would connect."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not ipaddress.ip_address(address.address).is_loopback:
                return address.address
    pytest.skip("this machine has no IPv4 address besides loopback: no other machine could connect anyway")


@pytest.fixture(autouse=True)
def _tools() -> None:
    reason = own_network_unavailable_reason()
    if reason:
        pytest.fail(f"the job network's tools are missing: {reason} (setup.sh installs them)")


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"data")

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def _http_server(address: str) -> Iterator[int]:
    """An HTTP server on ``address`` answering 200 (what a job downloads its data from); yields its port."""
    server = ThreadingHTTPServer((address, 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def lan_url() -> Iterator[str]:
    """A server on this machine's LAN address, as a data source outside the job."""
    address = _lan_address()
    with _http_server(address) as port:
        yield f"http://{address}:{port}/"


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A server on this machine's loopback (127.0.0.1), as a local service a job may use."""
    with _http_server("127.0.0.1") as port:
        yield port


def _sockets_listening(pid: int) -> list[tuple[str, int]]:
    """The TCP sockets process ``pid`` listens on, read from its own network namespace's tables (psutil reads this
    process's namespace only): the rows of ``/proc/PID/net/tcp{,6}`` in state LISTEN whose inode is one of its fds."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found = []
    for table, width in (("tcp", 4), ("tcp6", 16)):
        with contextlib.suppress(OSError):
            for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = row.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: TCP_LISTEN
                    continue
                hex_address, hex_port = fields[1].split(":")
                packed = b"".join(int(hex_address[i:i + 8], 16).to_bytes(4, "little") for i in range(0, 2 * width, 8))
                found.append((str(ipaddress.ip_address(packed)), int(hex_port, 16)))
    return found


def _listening(root: int) -> dict[tuple[str, int], str]:
    """Every TCP socket the launcher ``root`` and its descendants listen on: (address, port) -> which process."""
    found: dict[tuple[str, int], str] = {}
    with contextlib.suppress(psutil.Error):
        launcher = psutil.Process(root)
        for process in [launcher, *launcher.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                for address in _sockets_listening(process.pid):
                    found[address] = f"{process.name()} (pid {process.pid})"
    return found


def _accepts(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(3)
        try:
            probe.connect((address, port))
        except OSError:
            return False
        return True


def _serving(job: Running, count: int) -> None:
    for index in range(count):
        job.wait_for_line(lambda line, index=index: sum("serving" in text for text in job.stdout) > index, 90)


def _from_another_machine(job: Running, network: str) -> dict[str, bool]:
    """Each listening socket of the job (described) -> whether a connection from the LAN address got in."""
    listening = _listening(job.proc.pid)
    assert listening, "the job's processes listen on nothing: the probe would prove nothing"
    lan = _lan_address()
    return {f"{address}:{port} of {who}": _accepts(lan, port) for (address, port), who in listening.items()}


def _check(job: Running, network: str, reached: dict[str, bool]) -> None:
    if network == "private":
        assert not any(reached.values()), f"reachable from another machine: {reached}"
    else:
        assert any(reached.values()), f"on this machine's network a server should be reachable: {reached}"


@pytest.mark.parametrize("network", ["private", "host"])
@pytest.mark.parametrize("serve, distribution", [("mwms", "mwms"), ("socket", "parameter_server"),
                                                 ("socket", "dtensor")])
def test_what_a_local_jobs_processes_serve_accepts_no_other_machine(
        tmp_path: Path, lan_url: str, loopback_port: int, network: str, serve: str, distribution: str) -> None:
    """MWMS's workers (TensorFlow's gRPC servers), the parameter servers and the scripts beside them, DTensor clients
    (each here also listening on every interface itself, as any server a script starts)."""
    release = tmp_path / "release"
    this_machine = f"http://{'10.0.2.2' if network == 'private' else '127.0.0.1'}:{loopback_port}/"
    job = Running(
        smddp("local", SERVE, "--distribution", distribution, "--instance-count", "2", "--output",
              str(tmp_path / "out"), "--job-name", "serves", "--max-run", "180", "--hyperparameters", f"serve={serve}",
              f"release={release}", f"fetch={lan_url},{this_machine}"),
        env=quiet_env(SMDDP_JOB_NETWORK=network))
    try:
        _serving(job, 2)
        reached = _from_another_machine(job, network)
    finally:
        release.touch()
    code, _ = job.wait()
    output = "\n".join(job.stdout)
    assert code == 0, job.text_stderr + output
    # The job still downloads from outside, and reaches this machine's own services.
    assert output.count(f"fetched {lan_url} 200") == 2, output
    assert output.count(f"fetched {this_machine} 200") == 2, output
    _check(job, network, reached)
    assert_no_traceback(job)
    assert "reachable from other machines" not in job.text_stderr


@pytest.mark.parametrize("network", ["private", "host"])
def test_smddprun_mpi_listeners_accept_no_other_machine(tmp_path: Path, network: str) -> None:
    release = tmp_path / "release"
    job = Running(smddprun("-np", "2", "--mpi", sys.executable, SERVE, "--serve", "horovod", "--release",
                           str(release)), env=quiet_env(SMDDP_JOB_NETWORK=network))
    try:
        _serving(job, 2)
        reached = _from_another_machine(job, network)
        assert any("mpirun" in where for where in reached), reached
    finally:
        release.touch()
    code, _ = job.wait()
    assert code == 0, job.text_stderr
    _check(job, network, reached)


def test_gloo_jobs_listen_on_loopback_only(tmp_path: Path) -> None:
    """Horovod's Gloo jobs reach the launcher's rendezvous, so they keep this machine's network: every socket they
    and the launcher listen on is bound to a loopback address. (A job without distribution starts no server.)"""
    release = tmp_path / "release"
    job = Running(smddp("local", SERVE, "--distribution", "smddp", "--instance-count", "2", "--output",
                        str(tmp_path / "out"), "--job-name", "gloo", "--max-run", "180", "--hyperparameters",
                        "serve=horovod", f"release={release}"), env=quiet_env(SMDDP_ENGINE="gloo"))
    try:
        _serving(job, 2)
        listening = _listening(job.proc.pid)
    finally:
        release.touch()
    code, _ = job.wait()
    assert code == 0, job.text_stderr
    assert listening, "the launcher's rendezvous should be listening"
    exposed = {where: who for where, who in listening.items() if not ipaddress.ip_address(where[0]).is_loopback}
    assert exposed == {}, f"listening beyond loopback: {exposed}"


def test_a_launcher_killed_outright_leaves_no_namespace_behind(tmp_path: Path) -> None:
    release = tmp_path / "release"
    job = Running(smddp("local", SERVE, "--distribution", "dtensor", "--output", str(tmp_path / "out"), "--job-name",
                        "killed", "--max-run", "180", "--hyperparameters", "serve=socket", f"release={release}"))
    try:
        _serving(job, 1)
        below = psutil.Process(job.proc.pid).children(recursive=True)
        names = {process.name() for process in below}
        assert "slirp4netns" in names, names
        job.proc.send_signal(signal.SIGKILL)
        job.wait()
        deadline = time.monotonic() + DEATH_BOUND_SECONDS
        while alive({process.pid for process in below}) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive({process.pid for process in below}) == [], "processes of the job outlived its launcher"
    finally:
        release.touch()
