"""The launch plans of a job on this machine, for tests: what each strategy's ``local_launch`` gives its processes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from smddp_compat.distribution_config import DistributionConfig, HostCapacity
from smddp_compat.local_mode.environment import host_addresses
from smddp_compat.strategies import LocalCluster, LocalLaunch, strategy_named


def local_launch(kind: str, hosts: int, per_host: int = 1, *, ports: Sequence[int] | None = None,
                 **settings: Any) -> LocalLaunch:
    """The launch of a ``kind`` job of ``hosts`` x ``per_host`` processes (a Horovod rendezvous is closed again on
    return: the plans are for reading)."""
    config = DistributionConfig.from_flat(kind, processes_per_host=per_host, **settings)
    config = config.resolve(HostCapacity.this_machine(64, hosts), hosts)
    names = tuple(f"algo-{n + 1}" for n in range(hosts))
    job = LocalCluster(names, per_host, host_addresses(hosts), config, tuple(ports) if ports is not None else None)
    with strategy_named(kind).local_launch(job) as launch:
        return launch
