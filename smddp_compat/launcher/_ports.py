"""Free TCP ports on given addresses, for the servers TF_CONFIG and DTENSOR_JOBS point at (local mode, bench)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

__all__ = ["reserve_ports"]


def reserve_ports(addresses: Sequence[str]) -> list[int]:
    """One free port on each address (an address may repeat: its ports differ).

    All sockets stay bound until every port is chosen, so no two entries get the same port. A port can still be
    taken by another program between now and the moment the training process binds it; the job then fails with
    the process's own "address in use" error rather than hanging.

    Args:
        addresses: IPv4 addresses to bind.

    Returns:
        The ports, in the order of ``addresses``.
    """
    sockets: list[socket.socket] = []
    try:
        ports = []
        for address in addresses:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((address, 0))
            ports.append(sock.getsockname()[1])
        return ports
    finally:
        for sock in sockets:
            sock.close()
