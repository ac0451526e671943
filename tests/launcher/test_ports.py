"""Ports for the servers a job's TF_CONFIG names: free, distinct, and outside the kernel's ephemeral range (where
any outgoing connection may take a port between its choice and the server's bind)."""

from __future__ import annotations

import socket

from smddp_compat.launcher import reserve_ports
from smddp_compat.launcher._ports import _ephemeral_start


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = reserve_ports(["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.3"])
    assert len(set(ports)) == 4
    assert all(10000 <= port < _ephemeral_start() for port in ports), ports
    for port in ports:  # each can be bound now, on every address, as TensorFlow's servers bind
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
            server.bind(("", port))


def test_a_port_in_use_is_never_chosen(monkeypatch) -> None:
    import smddp_compat.launcher._ports as ports_module

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        picks = iter([busy, busy, busy, 23456])
        monkeypatch.setattr(ports_module.random, "randint", lambda low, high: next(picks))
        monkeypatch.setattr(ports_module, "_ephemeral_start", lambda: max(busy, 23456) + 1)
        assert reserve_ports(["127.0.0.2"]) == [23456]  # busy on another address: the wildcard server would fail
