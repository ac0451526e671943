"""DTensor launcher: runs in the training container, on every host, in place of the user's script.

    python smddp_compat_dtensor_launch.py --epochs 3 ...

Reads ``smddp_compat_dtensor.json`` beside itself (written by the estimator: the user's entry point and the DTensor
set-up), derives the variables of each DTensor client of this host (:func:`client_environments`: ``DTENSOR_JOBS``
in SM_HOSTS order, client ``i`` of a host on ``port + i``, host names through ``SMDDP_HOST_ADDRESSES`` when set;
``DTENSOR_CLIENT_ID``, ``DTENSOR_JOB_NAME``, the ``SMDDP_DTENSOR_*`` local_mode sets, ``CUDA_VISIBLE_DEVICES``
split between several clients) and starts the user's script with the same arguments (the toolkit's variables that
name the script it started, ``SM_USER_ENTRY_POINT`` and ``SM_MODULE_NAME``, name the user's, as when the toolkit
starts it): by ``exec`` for one client per host, else as child processes supervised by
``smddp_compat.launcher.run_process_group``: when one fails, the others are stopped and the launcher exits with its
code.

Standard library only, plus ``smddp_compat`` shipped beside it. Also imported by ``dtensor_driver.py``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping, Sequence

from smddp_compat.cluster import Cluster, dtensor_environments, endpoints, uniform_placements
from smddp_compat.contract import naming_the_entry_point
from smddp_compat.distribution_config import (
    DEFAULT_DTENSOR_JOB_NAME, DEFAULT_DTENSOR_PORT, DistributionConfig, HostCapacity,
)
from smddp_compat.errors import ConfigurationError
from smddp_compat.launcher import ProcessSpec, run_process_group
from smddp_compat.strategies.dtensor import LAUNCHER_CONFIG

CONFIG_FILE = LAUNCHER_CONFIG


def client_environments(config: Mapping[str, Any], environ: Mapping[str, str]) -> list[dict[str, str]]:
    """The DTENSOR_* variables of every client of this host, in local order.

    Args:
        config: ``processes_per_host``, ``devices_per_process``, ``device_type``, ``mesh``, ``port``, ``job_name``
            (missing ones default from the host: GPU when SM_NUM_GPUS > 0, its GPUs split over the clients).
        environ: The container environment (SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS, optional
            SMDDP_HOST_ADDRESSES).

    Returns:
        One dict per local client holding only the variables to add.

    Raises:
        ConfigurationError: SM_HOSTS / SM_CURRENT_HOST missing or inconsistent, SMDDP_HOST_ADDRESSES malformed
            (a ``ClusterConfigError``), or a DTensor set-up the hosts cannot hold.
    """
    cluster = Cluster.from_environ(environ, required=True)
    gpus = int(environ.get("SM_NUM_GPUS") or 0)
    host = HostCapacity.instance(cluster.current_host, int(environ.get("SM_NUM_CPUS") or 0) or None, gpus)
    # The same rules as every entry of the kit: GPUs split over the clients, on CPU mesh size / clients devices.
    settings = DistributionConfig(
        "dtensor",
        processes_per_host=int(config.get("processes_per_host") or 1),
        mesh=config.get("mesh") or None,
        devices_per_process=config.get("devices_per_process") or None,
        device_type=config.get("device_type") or None,
        port=int(config.get("port") or DEFAULT_DTENSOR_PORT),
        job_name=str(config.get("job_name") or DEFAULT_DTENSOR_JOB_NAME),
    ).resolve(host, len(cluster.hosts))
    placements = uniform_placements(cluster.hosts, settings.processes_per_host)
    clients = endpoints(placements, cluster.addresses, base_port=settings.port, port_field="port")
    envs = dtensor_environments(
        placements,
        clients,
        job_name=settings.job_name,
        mesh=dict(settings.mesh) if settings.mesh else None,
        devices_per_client=settings.devices_per_process or 1,
        device_type=settings.device_type,
    )
    return [env for p, env in zip(placements, envs) if p.host == cluster.current_host]


def launch(config: Mapping[str, Any], script: str, args: Sequence[str], environ: Mapping[str, str]) -> int:
    """Starts ``script`` with ``args`` as this host's DTensor client(s), ``environ`` extended; returns the exit
    code (only with several clients; with one, the process is replaced by the script)."""
    envs = client_environments(config, environ)
    argv = [sys.executable, script, *args]
    for env in envs:
        print(
            f"[smddp-compat dtensor] client {env['DTENSOR_CLIENT_ID']} of {env['SMDDP_DTENSOR_NUM_CLIENTS']}: "
            f"DTENSOR_JOBS={env['DTENSOR_JOBS']}",
            flush=True,
        )
    if len(envs) == 1:
        os.execve(sys.executable, argv, {**environ, **envs[0]})
    specs = [
        ProcessSpec(argv=argv, env={**environ, **env}, label=f"client{env['DTENSOR_CLIENT_ID']}",
                    host=environ.get("SM_CURRENT_HOST", "localhost"))
        for env in envs
    ]
    result = run_process_group(specs)
    if not result.ok:
        print(f"[smddp-compat dtensor] failed: {result.reason}", file=sys.stderr, flush=True)
    return int(getattr(result, "exit_code", 0 if result.ok else 1))


def main(argv: Sequence[str] | None = None) -> int:
    """Reads the configuration beside this file and launches the user's script with ``argv``."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, CONFIG_FILE), encoding="utf-8") as handle:
        bundle = json.load(handle)
    script = os.path.join(here, bundle["entry_point"])
    args = list(sys.argv[1:] if argv is None else argv)
    environ = {**os.environ, **naming_the_entry_point(os.environ, bundle["entry_point"])}
    try:
        return launch(bundle["dtensor"], script, args, environ)
    except ConfigurationError as exc:  # the cluster's variables, or the DTensor set-up
        print(f"[smddp-compat dtensor] error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
