"""SageMaker SDK v3 driver of ``smddp_compat.estimators.sdk3.MultiWorkerMirrored``: runs a
``MultiWorkerMirroredStrategy`` script as SageMaker's TensorFlow toolkit runs SDK v2's
``distribution={"multi_worker_mirrored_strategy": {"enabled": True}}`` (SDK v3's ModelTrainer starts no toolkit).

ModelTrainer copies this directory (with ``smddp_compat/`` beside it) to
``/opt/ml/input/data/sm_drivers/distributed_drivers/`` and runs this script on every host, with SM_ENTRY_SCRIPT the
user's script and SM_HPS its hyperparameters. As the toolkit does, on any number of hosts: one worker per host, whose
``TF_CONFIG`` lists every host's worker on port 8890 in SM_HOSTS order (host names through SMDDP_HOST_ADDRESSES when
set) and names this host's index as its task (worker 0, the first host, is the chief); the script then replaces this
driver.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hyperparameter_args  # noqa: E402  (a sibling script, found through the line above)
from smddp_compat.cluster import Cluster, endpoints, mwms_environments, uniform_placements  # noqa: E402

#: The port of every worker, as the toolkit gives it.
WORKER_PORT = 8890
_TAG = "[smddp-compat mwms driver]"


def worker_environment(environ: Mapping[str, str]) -> tuple[int, list[str], dict[str, str]]:
    """This host's worker index, every worker's ``address:port``, and the worker's ``TF_CONFIG``.

    Raises:
        ConfigurationError: SM_HOSTS / SM_CURRENT_HOST missing or inconsistent, SMDDP_HOST_ADDRESSES malformed.
    """
    cluster = Cluster.from_environ(environ, required=True)
    placements = uniform_placements(cluster.hosts, 1)
    workers = endpoints(placements, cluster.addresses, base_port=WORKER_PORT)
    return cluster.host_index, workers, mwms_environments(placements, workers)[cluster.host_index]


def main() -> int:
    """Reads the v3 environment and runs this host's worker."""
    environ = hyperparameter_args.script_environment()
    try:
        script, args, _ = hyperparameter_args.job_entry(environ)
        index, workers, worker_env = worker_environment(environ)
    except (KeyError, ValueError) as exc:  # ConfigurationError is a ValueError
        return hyperparameter_args.bad_environment(_TAG, exc)
    print(f"{_TAG} worker {index} of {len(workers)}: {','.join(workers)}", flush=True)
    os.execve(sys.executable, [sys.executable, script, *args], {**environ, **worker_env})

if __name__ == "__main__":
    sys.exit(main())
