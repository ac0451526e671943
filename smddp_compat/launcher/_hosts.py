"""Parsing and checking of ``-H host:slots,...`` host lists."""

from __future__ import annotations

import os
import socket

from smddp_compat.cluster import HOST_ADDRESSES_VARIABLE, parse_host_addresses
from smddp_compat.errors import UsageError
from smddp_compat.cluster import HostSlots

__all__ = ["parse_hosts", "assign_ranks", "is_this_machine", "usable_cores", "oversubscription_warning"]


def usable_cores() -> int | None:
    """The CPU cores this process may run on (its affinity mask), or None when unknown."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def oversubscription_warning(processes: int, cores: int | None) -> str | None:
    """The warning for a job that starts more processes than this machine has cores, or None.

    ``cores`` is :func:`usable_cores`.
    """
    if cores is None or processes <= cores:
        return None
    return (f"{processes} processes on {cores} CPU core(s): they share the cores and run slower than with a core "
            "each (start fewer to avoid it)")


def parse_hosts(text: str) -> list[HostSlots]:
    """Parses a host list as horovodrun's ``-H`` takes it, ``"host1:2,host2:2"`` (slots default to 1 when ``:n`` is
    left out), into the hosts in order.

    Raises:
        UsageError: Empty entries, a non-integer or non-positive slot count, or a duplicate host.
    """
    hosts: list[HostSlots] = []
    if not text or not text.strip():
        raise UsageError("the host list (-H) is empty: give it as host:slots[,host:slots...], e.g. localhost:2.")
    for entry in text.split(","):
        entry = entry.strip()
        name, sep, slots_text = entry.partition(":")
        if not name:
            raise UsageError(f"malformed host list {text!r}: entry {entry!r} has no host name (expected host:slots).")
        slots = 1
        if sep:
            try:
                slots = int(slots_text)
            except ValueError:
                raise UsageError(
                    f"malformed host list {text!r}: slots {slots_text!r} of host {name!r} is not an integer "
                    "(expected host:slots, e.g. localhost:2)."
                ) from None
        hosts.append(HostSlots(name=name, slots=slots))
    names = [h.name for h in hosts]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"host {name!r} appears more than once in {text!r}; list each host once with its slots.")
    return hosts


def assign_ranks(hosts: list[HostSlots], num_proc: int) -> list[HostSlots]:
    """Trims the host list to exactly ``num_proc`` ranks, filling hosts in order (as horovodrun does).

    Raises:
        UsageError: ``num_proc`` < 1 or more ranks than slots.
    """
    if num_proc < 1:
        raise UsageError(f"-np must be at least 1, got {num_proc}.")
    total = sum(h.slots for h in hosts)
    if num_proc > total:
        listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
        raise UsageError(
            f"-np {num_proc} asks for more ranks than the {total} slots of -H {listed}; add slots or lower -np.")
    out: list[HostSlots] = []
    left = num_proc
    for host in hosts:
        if left == 0:
            break
        take = min(left, host.slots)
        out.append(HostSlots(host.name, take, host.address))
        left -= take
    return out


def _known_local_names() -> dict[str, str]:
    names = {"localhost": "127.0.0.1", socket.gethostname(): "127.0.0.1"}
    names.update(parse_host_addresses(os.environ.get(HOST_ADDRESSES_VARIABLE)))
    return names


def is_this_machine(host: str) -> str | None:
    """The loopback address of ``host`` if it names this machine, else None."""
    if host.startswith("127.") or host == "::1":
        return host
    address = _known_local_names().get(host)
    if address is not None and (address.startswith("127.") or address == "::1"):
        return address
    try:
        resolved = socket.gethostbyname(host)
    except OSError:
        return None
    return resolved if resolved.startswith("127.") else None
