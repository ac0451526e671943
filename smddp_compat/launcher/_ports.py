"""Free TCP ports on given addresses, for the servers TF_CONFIG and DTENSOR_JOBS point at (local mode, bench)."""

from __future__ import annotations

import random
import socket
from collections.abc import Sequence

__all__ = ["reserve_ports"]

#: The lowest port chosen (below it: well-known and registered services' habits).
_LOWEST = 10000
#: Where Linux keeps the range its ephemeral ports (every outgoing connection's own port) come from.
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_ATTEMPTS = 200


def _ephemeral_start() -> int:
    try:
        with open(_EPHEMERAL_RANGE, encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(address: str, port: int) -> socket.socket | None:
    """A socket bound to ``address:port`` when the port is free there and on every address (the servers TensorFlow
    starts listen on all of them), else None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("", port))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.bind((address, port))
    except OSError:
        sock.close()
        return None
    return sock


def reserve_ports(addresses: Sequence[str]) -> list[int]:
    """One free port on each address (an address may repeat: its ports differ).

    The ports are chosen below the kernel's ephemeral range: a port the kernel hands out itself (``bind(0)``) comes
    from that range, where any outgoing connection of this machine may take it as its own port between now and the
    moment the training process binds it (under a loaded test run, TensorFlow's gRPC server then "Could not start").
    All sockets stay bound until every port is chosen, so no two entries get the same port. A port can still be
    taken by another server between now and then; the job then fails with the process's own "address in use" error
    rather than hanging. Returns the ports in the order of the (IPv4) ``addresses``.
    """
    highest = _ephemeral_start() - 1
    sockets: list[socket.socket] = []
    try:
        ports = []
        for address in addresses:
            sock = None
            for _ in range(_ATTEMPTS if highest > _LOWEST else 0):
                sock = _bindable(address, random.randint(_LOWEST, highest))
                if sock is not None:
                    break
            if sock is None:  # no free port below the ephemeral range: the kernel's choice
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.bind((address, 0))
            sockets.append(sock)
            ports.append(sock.getsockname()[1])
        return ports
    finally:
        for sock in sockets:
            sock.close()
