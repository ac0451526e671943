"""Horovod's Gloo rendezvous, started by the launcher and bound to a loopback address.

Horovod ranks started with the Gloo controller find each other through an HTTP key-value store run by the
launcher (what ``horovodrun --gloo`` does). We reuse Horovod's own server and host-assignment code, but bind the
server to one address instead of every interface, and hand back each rank's environment.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Sequence

from smddp_compat.cluster import HostSlots, assign, horovod_gloo_environments
from smddp_compat.errors import UsageError
from smddp_compat.launcher._option_types import is_positive_seconds

__all__ = ["HorovodRendezvous", "DEFAULT_GLOO_TIMEOUT_SECONDS"]

#: How long a rank waits for its peers during Gloo set-up and collectives before it gives up.
DEFAULT_GLOO_TIMEOUT_SECONDS = 60

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

        Ranks are assigned host by host; ``timeout`` is ``HOROVOD_GLOO_TIMEOUT_SECONDS``, ``iface`` the network
        interface Gloo uses between ranks.

        Raises:
            UsageError: Empty or duplicate host list, or a timeout that is not a finite number > 0.
        """
        if not hosts:
            raise UsageError("HorovodRendezvous needs at least one host, got an empty list.")
        names = [h.name for h in hosts]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"host names must be unique, got {duplicates} more than once; merge their slots.")
        if not is_positive_seconds(timeout):  # NaN would reach Horovod as a timeout it cannot read
            raise UsageError(f"rendezvous timeout must be a finite number of seconds > 0, got {timeout!r}; e.g. 60.")
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
            :func:`smddp_compat.cluster.horovod_gloo_environments` for these hosts and this server (the same
            numbering as the server's Horovod plan).
        """
        if self._plan is None or self._httpd is None:
            raise RuntimeError("rank_envs() needs a running server; call it inside the `with` block.")
        return horovod_gloo_environments(
            assign(self.hosts),
            rendezvous_address=self.bind_address,
            rendezvous_port=self.port,
            timeout_seconds=self.timeout,
            iface=self.iface,
        )
