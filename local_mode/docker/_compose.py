"""The compose file of a job: one service per host, host networking, each host's tree at ``/opt/ml``.

Each container runs the agent (``_agent.py``) as PID 1 and nothing else; the job's processes are started in it
with ``docker exec`` by the backend. Containers share the host's network namespace (``network_mode: host``): the
hosts talk over their own loopback addresses (algo-N -> 127.0.0.N+1, through ``extra_hosts``), never over a
bridge. The file is written as JSON, which every compose version reads as YAML.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ContainerHost", "Mount", "KIT_MOUNT", "AGENT_PATH", "OPT_ML", "JOB_LABEL", "external_mounts", "machine_name_entry", "compose_content",
           "write_compose_file"]

KIT_MOUNT = "/opt/smddp-kit"
"""Where the kit's checkout is mounted (read-only) in every container."""

AGENT_PATH = f"{KIT_MOUNT}/local_mode/docker/_agent.py"
"""The in-container agent (PID 1 of each container, wrapper of each process)."""

OPT_ML = "/opt/ml"
JOB_LABEL = "org.smddp-compat.job"
"""Label on every container of a job (value: the compose project name), used to find leftovers."""

_COMPOSE_FORMAT = "2.4"  # network_mode, extra_hosts, init, shm_size, stop_grace_period; read by v1 and v2
_SHM_SIZE = "512m"


@dataclass(frozen=True)
class ContainerHost:
    """One host of the job, as its container sees it.

    Attributes:
        name: ``algo-N``.
        address: Its loopback address (``127.0.0.N+1``).
        tree: The host folder holding its ``/opt/ml`` tree.
    """

    name: str
    address: str
    tree: Path


@dataclass(frozen=True)
class Mount:
    """A bind mount: host ``source`` at ``target`` in the container."""

    source: str
    target: str
    read_only: bool = False

    @property
    def spec(self) -> str:
        """The compose short syntax ``source:target[:ro]``."""
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


def external_mounts(tree: Path, *, depth: int = 3) -> list[Mount]:
    """Mounts for the symbolic links in ``tree`` that point outside it (channels, a shared checkpoint folder).

    Their targets are mounted at the same absolute path, so the links resolve in the container as on the host.

    Args:
        tree: A host's ``/opt/ml`` tree.
        depth: How deep to look (``input/data/<channel>`` is depth 3).

    Returns:
        One mount per distinct target, outermost first.
    """
    root = tree.resolve()
    targets: set[str] = set()
    frontier = [root]
    for _ in range(depth):
        following = []
        for folder in frontier:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                if entry.is_symlink():
                    target = path.resolve()
                    if target.exists() and not target.is_relative_to(root):
                        targets.add(str(target if target.is_dir() else target.parent))
                elif entry.is_dir():
                    following.append(path)
        frontier = following
    # A target inside another target is covered by the outer mount.
    outer = [t for t in sorted(targets) if not any(t != o and Path(t).is_relative_to(o) for o in targets)]
    return [Mount(t, t) for t in outer]


def machine_name_entry() -> str:
    """``extra_hosts`` entry for this machine's own name (a host-network container shares it).

    Docker writes a fresh ``/etc/hosts`` for host-network containers, without the machine's name; libraries that
    resolve it (Gloo does) would then fail. It maps to the loopback address it has on this machine, or 127.0.0.1
    when it resolves to anything else: containers talk over loopback only.
    """
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
        loopback = ipaddress.ip_address(address).is_loopback
    except (OSError, ValueError):
        address, loopback = "127.0.0.1", True
    return f"{name}:{address if loopback else '127.0.0.1'}"


def compose_content(
    hosts: Sequence[ContainerHost],
    *,
    project: str,
    image: str,
    kit_root: Path,
    grace: float,
    user: str | None,
    environment: Mapping[str, str],
) -> dict[str, Any]:
    """The compose document for a job.

    Args:
        hosts: The job's hosts.
        project: The compose project name (also the containers' name prefix and the job label).
        image: The image every container runs.
        kit_root: The kit's checkout, mounted read-only at :data:`KIT_MOUNT`.
        grace: Seconds the agent gives the processes between SIGTERM and SIGKILL.
        user: ``uid:gid`` the containers run as (so files in the trees belong to the caller), or None (image's).
        environment: Variables every container starts with (e.g. ``PYTHONPATH`` for a user's image).

    Returns:
        The document (``json.dumps`` it to a file).
    """
    extra_hosts = [f"{host.name}:{host.address}" for host in hosts]
    if not any(entry.startswith(f"{socket.gethostname()}:") for entry in extra_hosts):
        extra_hosts.append(machine_name_entry())
    services: dict[str, Any] = {}
    for host in hosts:
        mounts = [Mount(str(host.tree.resolve()), OPT_ML), Mount(str(kit_root), KIT_MOUNT, read_only=True)]
        mounts += external_mounts(host.tree)
        service: dict[str, Any] = {
            "image": image,
            "container_name": f"{project}-{host.name}",
            "network_mode": "host",
            "extra_hosts": extra_hosts,
            "volumes": [m.spec for m in mounts],
            "working_dir": f"{OPT_ML}/code",
            "command": ["python3", AGENT_PATH, "idle", f"{grace:g}"],
            "environment": {"CURRENT_HOST": host.name, **environment},
            "labels": {JOB_LABEL: project},
            "shm_size": _SHM_SIZE,
            "stop_grace_period": f"{int(grace) + 5}s",
        }
        if user is not None:
            service["user"] = user
        services[host.name] = service
    return {"version": _COMPOSE_FORMAT, "services": services}


def write_compose_file(content: Mapping[str, Any], path: Path) -> None:
    """Writes the document as JSON (valid YAML) to ``path``."""
    path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
