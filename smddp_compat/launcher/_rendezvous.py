"""Horovod's Gloo rendezvous, started by the launcher and bound to a loopback address.

Horovod ranks started with the Gloo controller find each other through an HTTP key-value store run by the
launcher (what ``horovodrun --gloo`` does). We reuse Horovod's own server and host-assignment code, but bind the
server to one address instead of every interface, and hand back each rank's environment.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace, TracebackType
from typing import Any, Sequence

from smddp_compat.errors import UsageError

__all__ = [
    "HostSlots", "HorovodRendezvous", "DEFAULT_GLOO_TIMEOUT_SECONDS", "GLOO_RANK_VARIABLES", "RANK_ENV_VARIABLES"
]

#: How long a rank waits for its peers during Gloo set-up and collectives before it gives up.
DEFAULT_GLOO_TIMEOUT_SECONDS = 60



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
        common = _shared_rank_env(self.bind_address, self.port, self.iface, self.timeout)
        return [{**common, **_slot_rank_env(slot)} for slot in self._plan]


def _shared_rank_env(address: str, port: int, iface: str, timeout: float) -> dict[str, str]:
    """The variables every Gloo rank of a job gets alike: the rendezvous, the controller, interface and timeout."""
    return {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": address,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(int(timeout)),
        "NCCL_SOCKET_IFNAME": iface,
    }


def _slot_rank_env(slot: Any) -> dict[str, str]:
    """The variables of one rank's place (``horovod.runner.common.util.hosts.SlotInfo`` or alike)."""
    return {
        "HOROVOD_HOSTNAME": str(slot.hostname),
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
    }


_ANY_SLOT = SimpleNamespace(hostname="", rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)

#: Every variable :meth:`HorovodRendezvous.rank_envs` gives a rank, read off the same two functions that build them.
RANK_ENV_VARIABLES = tuple(sorted({**_shared_rank_env("", 0, "", 1), **_slot_rank_env(_ANY_SLOT)}))

#: The variables :meth:`HorovodRendezvous.rank_envs` gives a rank that an MPI-launched rank must not inherit (they
#: would make Horovod wait for a Gloo rendezvous, or report a rank that is not its MPI rank). ``HOROVOD_HOSTNAME``
#: and ``NCCL_SOCKET_IFNAME`` are not among them: they mean the same under MPI.
GLOO_RANK_VARIABLES = tuple(
    name for name in RANK_ENV_VARIABLES if name not in ("HOROVOD_HOSTNAME", "NCCL_SOCKET_IFNAME")
)
