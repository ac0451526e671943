"""Distribution ``parameter_server``: TensorFlow's parameter-server training, as SageMaker's TensorFlow toolkit runs
it: on two or more hosts every host runs a parameter server (``ps``) beside the script, whose ``TF_CONFIG`` names the
first host's task ``master`` and the others' ``worker`` (with one host the toolkit runs the script alone).

TensorFlow 2's ``ParameterServerStrategy`` calls the master a ``chief``, and its workers and parameter servers
serve until the chief is done: :mod:`smddp_compat.parameter_server` bridges both for a script, and runs a host's
parameter server here as the toolkit runs it in a container. As with the toolkit, the job ends when the scripts end,
whether or not they used the servers (which are then stopped)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from smddp_compat import cluster, contract
from smddp_compat.strategies._base import LocalCluster, LocalLaunch, ProcessPlan, Strategy

__all__ = ["ParameterServer", "PS_MODULE"]

#: The module a host's parameter-server process runs (``python -m``), reading its task from ``TF_CONFIG``.
PS_MODULE = "smddp_compat.parameter_server"


class ParameterServer(Strategy):
    """``{"parameter_server": {"enabled": True}}``: one script per host (the master and the workers) and one
    parameter server per host, on two or more hosts."""

    name = "parameter_server"
    sdk_key = "parameter_server"
    title = "ParameterServerStrategy"
    serves_every_interface = True
    one_process_per_host = True
    ships_compat = True

    def framework_parameters(self, config: Any, instance_type: str) -> dict[str, Any]:
        """As the SDK sends them for ``parameter_server``."""
        return {contract.PARAMETER_SERVER_ENABLED: True}

    @contextlib.contextmanager
    def local_launch(self, job: LocalCluster) -> Iterator[LocalLaunch]:
        """The toolkit's layout: per host a parameter server and the script, each with its ``TF_CONFIG``; every
        task on its host's loopback address and a port reserved for it. One host: the script alone."""
        hosts = list(job.hosts)
        if len(hosts) == 1:
            yield LocalLaunch(self.local_plans(job), own_network=self.serves_every_interface,
                              note="one host: SageMaker's toolkit runs the script alone, "
                              "without parameter servers or TF_CONFIG (give --instance-count 2 or more)")
            return
        reserved = job.free_ports([job.addresses[host] for host in hosts for _ in range(2)])
        ports = {host: (reserved[2 * i], reserved[2 * i + 1]) for i, host in enumerate(hosts)}
        plans = []
        for placement in cluster.uniform_placements(hosts, 1):
            role, ps_env, script_env = cluster.parameter_server_host_environments(
                hosts, placement.host, addresses=job.addresses, ports=ports)
            plans.append(ProcessPlan.at(placement, ps_env, role="ps", module=PS_MODULE, serves=True))
            plans.append(ProcessPlan.at(placement, script_env, role=role))
        yield LocalLaunch(plans, own_network=self.serves_every_interface,
                          note=f"parameter servers on {len(hosts)} hosts; the master is {hosts[0]}, its "
                          "script coordinates, the workers' scripts serve until it is done; the job ends when the scripts end")
