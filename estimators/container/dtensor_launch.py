"""DTensor launcher: runs in the training container, on every host, in place of the user's script.

    python smddp_compat_dtensor_launch.py --epochs 3 ...

Reads ``smddp_compat_dtensor.json`` beside itself (written by the estimator: the user's entry point and the DTensor
set-up), derives for each DTensor client of this host

- ``DTENSOR_JOBS``: every client's ``address:port``, hosts in SM_HOSTS order, ``processes_per_host`` per host
  (client ``i`` of a host listens on ``port + i``); host names go through ``SMDDP_HOST_ADDRESSES`` when set;
- ``DTENSOR_CLIENT_ID``: ``host_index * processes_per_host + i``;
- ``DTENSOR_JOB_NAME``; and, as local_mode sets them, ``SMDDP_DTENSOR_MESH`` (JSON object, e.g.
  ``{"batch":4}``) and ``SMDDP_DTENSOR_DEVICES_PER_CLIENT`` for scripts that build their mesh from them, plus
  ``SMDDP_DTENSOR_DEVICE_TYPE``; ``CUDA_VISIBLE_DEVICES`` splits a host's
  GPUs when it runs several clients;

and starts the user's script with the same arguments: by ``exec`` for one client per host, else as child processes
supervised by ``smddp_compat.launcher.run_process_group`` (shipped beside this script): when one fails, the
others are stopped and the launcher exits with its code.

Standard library only (plus smddp_compat for several clients per host). Also imported by ``dtensor_driver.py``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping, Sequence

CONFIG_FILE = "smddp_compat_dtensor.json"
HOST_ADDRESSES_VARIABLE = "SMDDP_HOST_ADDRESSES"


class LaunchConfigError(ValueError):
    """The container environment or the launch configuration is incomplete or inconsistent."""


def host_addresses(hosts: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """Network addresses of ``hosts``: mapped through SMDDP_HOST_ADDRESSES (JSON) when set, else the names."""
    mapping: dict[str, str] = {}
    raw = environ.get(HOST_ADDRESSES_VARIABLE)
    if raw:
        try:
            mapping = json.loads(raw)
        except ValueError:
            raise LaunchConfigError(f"{HOST_ADDRESSES_VARIABLE}={raw!r} is not a JSON object") from None
    return [str(mapping.get(host, host)) for host in hosts]


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
        LaunchConfigError: SM_HOSTS / SM_CURRENT_HOST missing or inconsistent.
    """
    try:
        hosts = json.loads(environ["SM_HOSTS"])
        current = environ["SM_CURRENT_HOST"]
    except KeyError as exc:
        raise LaunchConfigError(f"{exc.args[0]} is not set: this launcher runs inside a SageMaker job") from None
    except ValueError:
        raise LaunchConfigError(f"SM_HOSTS={environ['SM_HOSTS']!r} is not a JSON list") from None
    if not isinstance(hosts, list) or current not in hosts:
        raise LaunchConfigError(f"SM_CURRENT_HOST={current!r} is not in SM_HOSTS={hosts!r}")
    hosts = sorted(hosts, key=_host_order)
    per_host = int(config.get("processes_per_host") or 1)
    gpus = int(environ.get("SM_NUM_GPUS") or 0)
    device_type = str(config.get("device_type") or ("GPU" if gpus else "CPU"))
    default_devices = max(1, gpus // per_host) if device_type == "GPU" else 1
    devices = int(config.get("devices_per_process") or default_devices)
    port = int(config.get("port") or 9970)
    addresses = host_addresses(hosts, environ)
    jobs = ",".join(f"{address}:{port + i}" for address in addresses for i in range(per_host))
    index = hosts.index(current)
    envs = []
    for local in range(per_host):
        env = {
            "DTENSOR_JOBS": jobs,
            "DTENSOR_CLIENT_ID": str(index * per_host + local),
            "DTENSOR_JOB_NAME": str(config.get("job_name") or "worker"),
            "SMDDP_DTENSOR_DEVICE_TYPE": device_type,
            "SMDDP_DTENSOR_DEVICES_PER_CLIENT": str(devices),
            "SMDDP_DTENSOR_NUM_CLIENTS": str(len(hosts) * per_host),
        }
        if config.get("mesh"):
            env["SMDDP_DTENSOR_MESH"] = json.dumps(_mesh_object(config["mesh"]), separators=(",", ":"))
        if device_type == "GPU" and per_host > 1:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(local * devices + d) for d in range(devices))
        envs.append(env)
    return envs


def _mesh_object(mesh: Any) -> dict[str, int]:
    # The estimator writes [[name, size], ...] (ordered); v3 configs may hold a mapping.
    return dict(mesh.items()) if isinstance(mesh, Mapping) else {str(n): int(s) for n, s in mesh}


def _host_order(name: str) -> tuple[str, int]:
    # algo-10 after algo-9: SageMaker numbers hosts from 1.
    prefix, _, number = name.rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (name, 0)


def launch(config: Mapping[str, Any], script: str, args: Sequence[str], environ: Mapping[str, str]) -> int:
    """Starts the user's script as this host's DTensor client(s).

    Args:
        config: The DTensor set-up.
        script: Path of the user's script.
        args: Its arguments.
        environ: The environment to extend.

    Returns:
        The exit code (only with several clients; with one, the process is replaced by the script).
    """
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
    from smddp_compat.launcher import ProcessSpec, run_process_group  # shipped beside this script

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
    try:
        return launch(bundle["dtensor"], script, args, dict(os.environ))
    except LaunchConfigError as exc:
        print(f"[smddp-compat dtensor] error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
