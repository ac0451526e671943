"""SageMaker SDK v3 driver of ``smddp_compat.estimators.sdk3.SMDDPCompat`` (an unchanged SMDDP script) and, run by
``horovod_driver.py``, of ``Horovod`` (a Horovod script): H x P Horovod ranks on smddp-compat.

ModelTrainer copies the driver directory (this script, ``smddp_compat/`` and the ``smdistributed`` alias beside it)
to ``/opt/ml/input/data/sm_drivers/distributed_drivers/`` and runs this script on every host from the code
directory. SM_DISTRIBUTED_CONFIG holds ``processes_per_host`` (default: the strategy's, as for SDK v2: SMDDP one per
GPU, else per vCPU; Horovod one per GPU, else one) and ``custom_mpi_options``; SM_ENTRY_SCRIPT is the user's script,
SM_HPS its hyperparameters.

- One host: ``smddprun -np P python SCRIPT ARGS`` (Horovod over Gloo, the alias on PYTHONPATH).
- Several hosts: mpirun over SSH from the first host, as SageMaker ran SMDDP (hosts, and so ranks, in SM_HOSTS
  order, never re-sorted), using the SDK's own SSH bootstrap helpers shipped in the same directory; ``-np`` is
  hosts x P and ``custom_mpi_options`` are split into arguments (never given to a shell). PYTHONPATH reaches every
  rank with ``-x``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hyperparameter_args  # noqa: E402  (a sibling script, found through the line above)
from smddp_compat.cluster import Cluster, HostCapacity  # noqa: E402  (shipped beside this script)
from smddp_compat.launcher import main as smddprun  # noqa: E402
from smddp_compat.strategies import strategy_named  # noqa: E402


def _processes_per_host(kind: str, config: dict, environ: dict) -> int:
    """The configured count, else the strategy's default for this host (its GPUs and vCPUs)."""
    configured = config.get("processes_per_host")
    if configured:
        return int(configured)
    host = HostCapacity.instance(environ.get("SM_CURRENT_HOST", ""), int(environ.get("SM_NUM_CPUS") or 0),
                                 int(environ.get("SM_NUM_GPUS") or 0))
    return strategy_named(kind).default_processes_per_host(host)


def _python_path(environ: dict) -> str:
    shim = os.path.join(HERE, "smddp_compat", "_shim_root")
    existing = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([HERE, shim, *existing])


def _single_host(pph: int, script: str, args: list[str]) -> int:
    return smddprun(["-np", str(pph), sys.executable, script, *args])


def _check_interface(tag: str) -> None:
    """Points SM_NETWORK_INTERFACE_NAME (the interface mpirun's traffic is kept to) at one this host has: SDK v3's
    local mode names ``ethwe``, which its containers do not have (mpirun then finds no network); the first interface
    other than ``lo`` stands in, and the console says so."""
    named = os.environ.get("SM_NETWORK_INTERFACE_NAME", "eth0")
    present = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    if not present or named in present:
        return
    usable = [name for name in present if name != "lo"] or present
    print(f"{tag} this host has no network interface {named!r} (SM_NETWORK_INTERFACE_NAME): mpirun uses "
          f"{usable[0]!r}", flush=True)
    os.environ["SM_NETWORK_INTERFACE_NAME"] = usable[0]


def _multi_host(hosts: list[str], current: str, pph: int, options: list[str], script: str, args: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(HERE))  # the SDK's drivers: distributed_drivers.*, common.*
    from distributed_drivers.mpi_utils import (  # type: ignore[import-not-found]
        bootstrap_master_node,
        bootstrap_worker_node,
        get_mpirun_command,
        start_sshd_daemon,
        write_env_vars_to_file,
        write_status_file_to_workers,
    )

    master = hosts[0]
    write_env_vars_to_file()
    start_sshd_daemon()
    if current != master:
        bootstrap_worker_node(master)
        return 0
    workers = [h for h in hosts if h != master]
    bootstrap_master_node(workers)
    command = get_mpirun_command(
        host_count=len(hosts),
        host_list=[f"{h}:{pph}" for h in hosts],
        num_processes=len(hosts) * pph,
        additional_options=["-x", "PYTHONPATH", *options],
        entry_script_path=script,
    )
    returncode = subprocess.run([*command, *args], check=False).returncode
    write_status_file_to_workers(workers)
    return returncode


def main(kind: str = "smddp") -> int:
    """Reads the v3 environment and launches the ranks of distribution ``kind`` (``smddp`` or ``mpi``)."""
    environ, tag = hyperparameter_args.script_environment(), f"[smddp-compat {kind} driver]"
    try:
        script, args, config = hyperparameter_args.job_entry(environ)
        cluster = Cluster.from_environ(environ)  # hosts in SageMaker's order: mpirun numbers ranks in it
        hosts, current = list(cluster.hosts), cluster.current_host
        pph = _processes_per_host(kind, config, environ)
        options = shlex.split(config.get("custom_mpi_options") or "")
    except (KeyError, ValueError) as exc:
        return hyperparameter_args.bad_environment(tag, repr(exc))
    os.environ["PYTHONPATH"] = _python_path(environ)
    print(f"{tag} {len(hosts)} host(s) x {pph} process(es): {script}", flush=True)
    if len(hosts) == 1:
        if options:
            print(f"{tag} custom_mpi_options {options} apply to mpirun (multi-host) only", flush=True)
        return _single_host(pph, script, args)
    _check_interface(tag)
    return _multi_host(hosts, current, pph, options, script, args)


if __name__ == "__main__":
    sys.exit(main())
