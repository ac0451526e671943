"""A network of the job's own: its processes' servers are reachable from this machine's job only.

TensorFlow's gRPC servers (MultiWorkerMirroredStrategy, parameter servers, DTensor clients) listen on every
interface (``GrpcServer::Init`` binds ``0.0.0.0``/``[::]``; nothing in TensorFlow binds them to loopback), and so do
mpirun's out-of-band listeners (Open MPI binds ``INADDR_ANY`` whatever ``oob_tcp_if_include`` says). They accept
anything sent to them, and TensorFlow's security guidance says never to expose them. On one machine they need not
be exposed: the job's processes run in a network namespace of their own, the rootless-container way:

* a holder process is started in a new network namespace (and a user namespace of its own when the launcher is
  not root), brings ``lo`` up (127.0.0.0/8: every simulated host's address) and waits on a pipe from the launcher;
* ``slirp4netns`` (what rootless Docker and Podman use) gives the namespace outbound access, NAT only: a script can
  still download its data (and reach this machine's loopback services at 10.0.2.2, slirp4netns's address for the
  host), and nothing outside can connect in;
* each process starts as ``nsenter --target HOLDER --net ... -- argv``, which joins the namespace and becomes the
  command: its PID, its signals and its output are the launcher's, as without the namespace.

The holder reads the launcher's pipe and slirp4netns watches an exit pipe, so both end when the launcher does,
however it dies. Where a namespace cannot be made (no slirp4netns, user namespaces off, a container without the
right), the job runs on this machine's network as before and the launcher says so once, naming the fix;
``SMDDP_JOB_NETWORK=host`` chooses that on purpose.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO

from smddp_compat.launcher._option_types import environment_choice

__all__ = ["JOB_NETWORK_VARIABLE", "OwnNetwork", "job_network_choice", "own_network", "own_network_unavailable_reason"]

#: ``private`` (the default: the job's own network namespace where one can be made) or ``host`` (this machine's
#: network, its servers reachable from other machines).
JOB_NETWORK_VARIABLE = "SMDDP_JOB_NETWORK"
_CHOICES = ("private", "host")

#: How long the namespace may take to be ready (the holder's start, slirp4netns's set-up).
_READY_SECONDS = 15.0
_STOP_SECONDS = 5.0

# The holder: brings the namespace's loopback up (SIOCGIFFLAGS / SIOCSIFFLAGS on "lo", IFF_UP), says so, and waits
# until the launcher's end of its standard input closes. Only the standard library, without site: it starts fast.
_HOLDER = """
import fcntl, socket, struct, sys
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0))[:18])[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))
print("ready", flush=True)
sys.stdin.read()
"""


def job_network_choice(environ: Mapping[str, str] | None = None) -> str:
    """The job network the launcher's environment asks for: ``private`` (unset) or ``host``.

    Raises:
        ConfigurationError: ``SMDDP_JOB_NETWORK`` is set to anything else.
    """
    return environment_choice(
        JOB_NETWORK_VARIABLE, _CHOICES, "a job network",
        "unset it or give 'private' (the job's servers reachable from this machine's job only, the default), or "
        "'host' (this machine's network: other machines can reach them)", environ)


def own_network_unavailable_reason(*, make: bool = False) -> str | None:
    """Why no network of the job's own can be made here (a missing tool; with ``make``, also what failed when one
    is really made and removed again), or None when it can."""
    missing = [tool for tool in ("unshare", "nsenter", "slirp4netns") if shutil.which(tool) is None]
    if missing:
        return (f"{', '.join(missing)} not found (install Debian's util-linux and slirp4netns: "
                "apt-get install util-linux slirp4netns)")
    if make:
        try:
            _start(sys.executable).close()
        except OSError as exc:
            return str(exc)
    return None


@dataclasses.dataclass
class OwnNetwork:
    """A network namespace held open for one job's processes.

    Attributes:
        holder: The holder process (its PID names the namespace).
        slirp: The slirp4netns process that gives the namespace outbound access.
        user_namespace: The namespace is owned by a user namespace of its own (a launcher that is not root); each
            process joins both.
    """

    holder: subprocess.Popen
    slirp: subprocess.Popen
    user_namespace: bool
    _slirp_exit: int = -1

    def enter(self, argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
        """``argv`` run inside the namespace (``nsenter`` joins it, then becomes the command). A program that cannot
        be found on the ``PATH`` of ``environ`` is left as it is, so starting it fails as it would without the
        namespace (naming the program, not nsenter)."""
        if shutil.which(argv[0], path=environ.get("PATH", os.defpath)) is None:
            return list(argv)
        joins = ["--user", "--preserve-credentials", "--net"] if self.user_namespace else ["--net"]
        return ["nsenter", f"--target={self.holder.pid}", *joins, "--", *argv]

    def close(self) -> None:
        """Ends the holder and slirp4netns (the namespace goes with its last process)."""
        with contextlib.suppress(OSError):
            self.holder.stdin.close()  # type: ignore[union-attr]
        if self._slirp_exit >= 0:
            with contextlib.suppress(OSError):
                os.close(self._slirp_exit)
            self._slirp_exit = -1
        for process in (self.slirp, self.holder):
            try:
                process.wait(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.holder.stdout is not None:
            self.holder.stdout.close()


def _wait_readable(fd: int, deadline: float) -> bool:
    remaining = deadline - time.monotonic()
    return remaining > 0 and bool(select.select([fd], [], [], remaining)[0])


def _last_line(said: IO[bytes]) -> str:
    """The last line a helper wrote to its error file (read only when it failed), or ``no answer``."""
    said.seek(0)
    lines = said.read(1 << 16).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no answer"


def _start(python: str) -> OwnNetwork:
    """Starts the holder and slirp4netns; raises OSError (with what failed) when the namespace cannot be made.

    Their standard error goes to a file, never a pipe: a helper that writes after its start must not meet a closed
    pipe (and die of it) while the job runs.
    """
    user_namespace = os.geteuid() != 0
    unshare = ["unshare", "--net", *(["--user", "--map-root-user"] if user_namespace else []), "--"]
    with tempfile.TemporaryFile() as holder_said, tempfile.TemporaryFile() as slirp_said:
        holder = subprocess.Popen(  # noqa: S603 - argv is a list
            [*unshare, python, "-S", "-I", "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=holder_said, start_new_session=True)
        deadline = time.monotonic() + _READY_SECONDS
        assert holder.stdout is not None
        if not _wait_readable(holder.stdout.fileno(), deadline) or holder.stdout.readline().strip() != b"ready":
            holder.kill()
            holder.communicate(timeout=_STOP_SECONDS)
            raise OSError(f"the namespace could not be made: {_last_line(holder_said)}")
        ready_read, ready_write = os.pipe()
        exit_read, exit_write = os.pipe()
        try:
            slirp = subprocess.Popen(  # noqa: S603 - argv is a list
                ["slirp4netns", "--configure", "--mtu=65520", f"--ready-fd={ready_write}", f"--exit-fd={exit_read}",
                 *([f"--userns-path=/proc/{holder.pid}/ns/user"] if user_namespace else []), str(holder.pid), "tap0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slirp_said,
                pass_fds=(ready_write, exit_read), start_new_session=True)
        except OSError:
            holder.kill()
            holder.communicate(timeout=_STOP_SECONDS)
            for fd in (ready_read, ready_write, exit_read, exit_write):
                os.close(fd)
            raise
        os.close(ready_write)
        os.close(exit_read)
        network = OwnNetwork(holder, slirp, user_namespace, exit_write)
        try:
            ready = _wait_readable(ready_read, deadline) and os.read(ready_read, 1) == b"1"
        finally:
            os.close(ready_read)
        if not ready:
            slirp.kill()
            network.close()
            raise OSError(f"slirp4netns did not set the namespace up: {_last_line(slirp_said)}")
    return network


@contextlib.contextmanager
def own_network(say: Callable[[str], None] | None = None) -> Iterator[OwnNetwork | None]:
    """A network of the job's own while the block runs, or None (this machine's network) when the launcher's
    environment does not want one (``SMDDP_JOB_NETWORK=host``) or none can be made; ``say`` is then told why, in one
    line.

    Raises:
        ConfigurationError: ``SMDDP_JOB_NETWORK`` is neither ``private`` nor ``host``.
    """
    if job_network_choice() == "host":
        yield None
        return
    reason = own_network_unavailable_reason()
    network: OwnNetwork | None = None
    if reason is None:
        try:
            network = _start(sys.executable)
        except OSError as exc:
            reason = str(exc)
    if network is None:
        if say is not None:
            say(f"the job's servers listen on this machine's network, reachable from other machines: {reason}; "
                f"{JOB_NETWORK_VARIABLE}=host runs so without this warning")
        yield None
        return
    try:
        yield network
    finally:
        network.close()
