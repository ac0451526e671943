"""SageMaker SDK v3 driver of ``smddp_compat.estimators.sdk3.ParameterServer``: runs a parameter-server script as
SageMaker's TensorFlow toolkit runs ``distribution={"parameter_server": {"enabled": True}}`` (SDK v3's ModelTrainer
has no parameter-server launch of its own, and does not start the toolkit).

ModelTrainer copies this directory (with ``smddp_compat/`` beside it) to
``/opt/ml/input/data/sm_drivers/distributed_drivers/`` and runs this script on every host, with SM_ENTRY_SCRIPT the
user's script and SM_HPS its hyperparameters. As the toolkit does:

- one host: the script alone, without ``TF_CONFIG``;
- two or more hosts: a parameter server on every host (``python -m smddp_compat.parameter_server``, ``ps`` task
  ``i`` on host ``i``, port 2223) beside the script, whose ``TF_CONFIG`` names the first host's task ``master`` and
  the others' ``worker`` (port 2222), hosts in SM_HOSTS order. Both run supervised
  (``smddp_compat.launcher.run_process_group``): a failure of either stops the other and this host's job fails
  with its code; a worker's script ends once the master is done, and the parameter server is stopped once the
  script has ended (exit 0: the host's job is done, whether or not the script used the servers).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hyperparameter_args  # noqa: E402  (a sibling script, found through the line above)
from smddp_compat.cluster import Cluster, parameter_server_host_environments  # noqa: E402  (shipped beside this script)
from smddp_compat.errors import ConfigurationError  # noqa: E402
from smddp_compat.launcher import ProcessSpec, run_process_group  # noqa: E402

_TAG = "[smddp-compat parameter-server driver]"


def main() -> int:
    """Reads the v3 environment and runs this host's parameter server and script."""
    environ = hyperparameter_args.script_environment()
    try:
        script, args, _ = hyperparameter_args.job_entry(environ)
        cluster = Cluster.from_environ(environ, required=True)
    except (KeyError, ValueError) as exc:  # ConfigurationError is a ValueError
        return hyperparameter_args.bad_environment(_TAG, exc)
    argv = [sys.executable, script, *args]
    hosts, current = list(cluster.hosts), cluster.current_host
    if len(hosts) == 1:
        print(f"{_TAG} one host: the script runs alone, without parameter servers or TF_CONFIG", flush=True)
        os.execve(sys.executable, argv, environ)
    python_path = os.pathsep.join([HERE, *[p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
    shared = {**environ, "PYTHONPATH": python_path}
    try:
        role, ps_env, script_env = parameter_server_host_environments(hosts, current, addresses=cluster.addresses)
    except ConfigurationError as exc:
        print(f"{_TAG} error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{_TAG} {current}: parameter server {hosts.index(current)} and the {role}'s script", flush=True)
    specs = [
        ProcessSpec([sys.executable, "-m", "smddp_compat.parameter_server"], {**shared, **ps_env},
                    label=f"{current},ps", host=current, serves=True),
        ProcessSpec(argv, {**shared, **script_env}, label=f"{current},{role}", host=current),
    ]
    result = run_process_group(specs)
    if not result.ok:
        print(f"{_TAG} failed: {result.reason}", file=sys.stderr, flush=True)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
