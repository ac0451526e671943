"""Horovod's Gloo rendezvous, started by the launcher and bound to a loopback address.

Horovod ranks started with the Gloo controller find each other through an HTTP key-value store run by the
launcher (what ``horovodrun --gloo`` does). We reuse Horovod's own server and host-assignment code, but bind the
server to one address instead of every interface, and hand back each rank's environment.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Sequence

from smddp_compat.errors import UsageError

__all__ = ["HostSlots", "HorovodRendezvous", "DEFAULT_GLOO_TIMEOUT_SECONDS", "GLOO_RANK_VARIABLES"]

#: How long a rank waits for its peers during Gloo set-up and collectives before it gives up.
DEFAULT_GLOO_TIMEOUT_SECONDS = 60

#: Every variable :meth:`HorovodRendezvous.rank_envs` gives a rank (an MPI-launched rank must not inherit them:
#: they would make Horovod wait for a Gloo rendezvous, or report a rank that is not its MPI rank).
GLOO_RANK_VARIABLES = (
    "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "HOROVOD_CONTROLLER",
    "HOROVOD_CPU_OPERATIONS",
    "HOROVOD_GLOO_IFACE",
    "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_HOSTNAME",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
)


@dataclass(frozen=True)
class HostSlots:
    """A host and how many ranks it runs.

    Attributes:
        name: Host name, as ranks report it (``HOROVOD_HOSTNAME``).
        slots: Number of ranks on the host (>= 1).
        address: Address of the host (informational for Gloo, which uses the ``lo`` interface here).
    """

    name: str
    slots: int
    address: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ":, \t"):
            raise UsageError(f"host name {self.name!r} is invalid: give a plain name such as 'algo-1' or 'localhost'.")
        if not isinstance(self.slots, int) or self.slots < 1:
            raise UsageError(f"host {self.name!r} has {self.slots!r} slots: every host needs at least 1 slot.")


class HorovodRendezvous:
    """Context manager running Horovod's Gloo rendezvous server for one job.

    Example:
        >>> with HorovodRendezvous([HostSlots("localhost", 2)]) as rdzv:  # doctest: +SKIP
        ...     envs = rdzv.rank_envs()   # two dicts of HOROVOD_* variables
    """

    def __init__(
        self,
        hosts: Sequence[HostSlots],
        *,
        bind_address: str = "127.0.0.1",
        timeout: float = DEFAULT_GLOO_TIMEOUT_SECONDS,
        iface: str = "lo",
    ) -> None:
        """Validates the host list; the server starts on ``__enter__``.

        Args:
            hosts: Hosts in order; ranks are assigned host by host.
            bind_address: Address the rendezvous server listens on (a loopback address here).
            timeout: Seconds a rank waits for its peers (``HOROVOD_GLOO_TIMEOUT_SECONDS``).
            iface: Network interface Gloo uses between ranks.

        Raises:
            UsageError: Empty or duplicate host list, or a non-positive timeout.
        """
        if not hosts:
            raise UsageError("HorovodRendezvous needs at least one host, got an empty list.")
        names = [h.name for h in hosts]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"host names must be unique, got {duplicates} more than once; merge their slots.")
        if timeout <= 0:
            raise UsageError(f"rendezvous timeout must be positive, got {timeout!r}.")
        self.hosts = list(hosts)
        self.bind_address = bind_address
        self.timeout = timeout
        self.iface = iface
        self._httpd = None
        self._thread: threading.Thread | None = None
        self._plan: list | None = None

    @property
    def size(self) -> int:
        """Total number of ranks."""
        return sum(h.slots for h in self.hosts)

    @property
    def port(self) -> int:
        """Port the server listens on (only while entered)."""
        if self._httpd is None:
            raise RuntimeError("the rendezvous server is not running; use HorovodRendezvous as a context manager.")
        return int(self._httpd.server_address[1])

    def __enter__(self) -> "HorovodRendezvous":
        from horovod.runner.common.util.hosts import HostInfo, get_host_assignments
        from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

        self._plan = get_host_assignments([HostInfo(h.name, h.slots) for h in self.hosts], self.size)
        self._httpd = RendezvousHTTPServer((self.bind_address, 0), RendezvousHandler, 0)
        self._httpd.init(self._plan)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="horovod-rendezvous", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def rank_envs(self) -> list[dict[str, str]]:
        """The HOROVOD_* environment of every rank, in rank order.

        Returns:
            One dict per rank with rank, size, local and cross rank/size, host name, the rendezvous address and
            port, the Gloo controller and its timeout.
        """
        if self._plan is None or self._httpd is None:
            raise RuntimeError("rank_envs() needs a running server; call it inside the `with` block.")
        common = {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": self.bind_address,
            "HOROVOD_GLOO_RENDEZVOUS_PORT": str(self.port),
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": self.iface,
            "HOROVOD_GLOO_TIMEOUT_SECONDS": str(int(self.timeout)),
            "NCCL_SOCKET_IFNAME": self.iface,
        }
        envs = []
        for slot in self._plan:
            env = dict(common)
            env.update(
                {
                    "HOROVOD_HOSTNAME": str(slot.hostname),
                    "HOROVOD_RANK": str(slot.rank),
                    "HOROVOD_SIZE": str(slot.size),
                    "HOROVOD_LOCAL_RANK": str(slot.local_rank),
                    "HOROVOD_LOCAL_SIZE": str(slot.local_size),
                    "HOROVOD_CROSS_RANK": str(slot.cross_rank),
                    "HOROVOD_CROSS_SIZE": str(slot.cross_size),
                }
            )
            envs.append(env)
        return envs
