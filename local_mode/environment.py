"""The environment and arguments the SageMaker training toolkit gives a training script, computed for one host.

Names and value formats follow the toolkit (``sagemaker_training.environment.Environment.to_env_vars`` and
``mapping``): every variable is ``SM_`` + the upper-cased key; a string value is passed as is, ``None`` as an empty
string, anything else as compact JSON with sorted keys. Hyperparameters are stored JSON-encoded in
``hyperparameters.json`` and reach the script as ``--name value`` arguments, sorted by name, where ``value`` is
``str()`` of the decoded value (so strings are bare and ``True`` is ``True``) and a dict becomes ``k=v,k2=v2``.

Everything here is a pure function of its arguments: the unit tests assert the exact variables built.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smddp_compat.local_mode.layout import HostLayout
from smddp_compat import contract
from smddp_compat.cluster import EMITTED_VARIABLES, encode_host_addresses
from smddp_compat.contract import DISTRIBUTION_FLAGS, TOOLKIT_PARAMETERS, cmd_args, env_value
from smddp_compat.launcher import stall_watchdog_env

__all__ = [
    "host_addresses",
    "training_environment",
    "platform_environment",
    "inherited_environment",
    "default_region",
    "emitted_variables",
    "is_reserved",
]

# Families of variables whose every member belongs to a planner: the toolkit's ``SM_*`` (channels and
# hyperparameters add names per job) and TensorFlow's DTensor client settings (the DTensor plan fixes the clients).
_RESERVED_PREFIXES = (contract.SM_PREFIX, "DTENSOR_")
_FIRST_HOST_ADDRESS = ipaddress.IPv4Address("127.0.0.2")
# An enclosing launcher's per-process variables (mpirun, PMI): meaningless for the processes local_mode starts.
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_")

_DEFAULT_LOG_LEVEL = 20  # logging.INFO, without importing logging's level table for one number


def training_environment(
    layout: HostLayout,
    *,
    resource: Mapping[str, Any],
    data_config: Mapping[str, Any],
    hyperparameters: Mapping[str, Any],
    framework_parameters: Mapping[str, Any],
    num_cpus: int,
    num_gpus: int,
    job_name: str,
) -> dict[str, str]:
    """The ``SM_*`` variables the toolkit sets for the script on one host (``resource`` and ``data_config``: its
    ``resourceconfig.json`` and ``inputdataconfig.json``; ``hyperparameters`` the user's, decoded, no
    ``sagemaker_*`` names; ``framework_parameters`` the ``sagemaker_*`` ones, decoded, including
    :data:`TOOLKIT_PARAMETERS`)."""
    hosts = list(resource["hosts"])
    current_host = resource["current_host"]
    instance_type = resource.get("current_instance_type", "local")
    group = resource.get("current_group_name", "homogeneousCluster")
    groups_config = list(resource.get("instance_groups", []))
    additional = {k: v for k, v in framework_parameters.items() if k not in TOOLKIT_PARAMETERS}
    distributed = any(additional.get(flag) for flag in DISTRIBUTION_FLAGS)
    distribution_groups = list(additional.get(contract.DISTRIBUTION_INSTANCE_GROUPS, [group] if distributed else []))
    distribution_hosts = [
        h for g in groups_config if g["instance_group_name"] in distribution_groups for h in g["hosts"]
    ]
    group_hosts = next((list(g["hosts"]) for g in groups_config if g["instance_group_name"] == group), [])
    master = distribution_hosts[0] if distribution_hosts else hosts[0]
    channel_dirs = {name: str(layout.channel_dir(name)) for name in data_config}
    entry_point = framework_parameters[contract.PROGRAM]
    log_level = framework_parameters.get(contract.CONTAINER_LOG_LEVEL, _DEFAULT_LOG_LEVEL)
    module_dir = str(framework_parameters.get(contract.SUBMIT_DIRECTORY, layout.code_dir))
    args = cmd_args(hyperparameters)

    properties: dict[str, Any] = {
        "additional_framework_parameters": additional,
        "channel_input_dirs": channel_dirs,
        "current_host": current_host,
        "current_instance_group": group,
        "current_instance_group_hosts": group_hosts,
        "current_instance_type": instance_type,
        "distribution_hosts": distribution_hosts,
        "distribution_instance_groups": distribution_groups,
        "framework_module": contract.TENSORFLOW_TRAINING_MODULE,  # the module the kit's image runs
        "hosts": hosts,
        "hyperparameters": dict(hyperparameters),
        "input_config_dir": str(layout.input_config_dir),
        "input_data_config": dict(data_config),
        "input_dir": str(layout.input_dir),
        "instance_groups": [g["instance_group_name"] for g in groups_config],
        "instance_groups_dict": {g["instance_group_name"]: g for g in groups_config},
        "is_hetero": len(groups_config) > 1,
        "is_master": current_host == master,
        "is_modelparallel_enabled": False,
        "job_name": job_name,
        "log_level": log_level,
        "master_hostname": master,
        "model_dir": str(layout.model_dir),
        "module_dir": module_dir,
        "module_name": contract.module_name(entry_point),
        "network_interface_name": resource.get("network_interface_name", "eth0"),
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "num_neurons": 0,
        "output_data_dir": str(layout.output_data_dir),
        "output_dir": str(layout.output_dir),
        "output_intermediate_dir": str(layout.output_intermediate_dir),
        "resource_config": dict(resource),
        "user_entry_point": entry_point,
    }
    exported: dict[str, Any] = {
        "hosts": hosts,
        "network_interface_name": properties["network_interface_name"],
        "hps": dict(hyperparameters),
        "user_entry_point": entry_point,
        "framework_params": additional,
        "resource_config": dict(resource),
        "input_data_config": dict(data_config),
        "output_data_dir": properties["output_data_dir"],
        "channels": sorted(channel_dirs),
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_instance_group": group,
        "current_instance_group_hosts": group_hosts,
        "instance_groups": properties["instance_groups"],
        "instance_groups_dict": properties["instance_groups_dict"],
        "distribution_instance_groups": distribution_groups,
        "is_hetero": properties["is_hetero"],
        "module_name": properties["module_name"],
        "log_level": log_level,
        "framework_module": properties["framework_module"],
        "input_dir": properties["input_dir"],
        "input_config_dir": properties["input_config_dir"],
        "output_dir": properties["output_dir"],
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "num_neurons": properties["num_neurons"],  # the toolkit's SM_NUM_NEURONS (AWS Neuron devices): none here
        "model_dir": properties["model_dir"],
        "module_dir": module_dir,
        "training_env": properties,
        "user_args": args,
        "output_intermediate_dir": properties["output_intermediate_dir"],
    }
    for name, path in channel_dirs.items():
        exported[f"channel_{name}"] = path
    for name, value in hyperparameters.items():
        exported[f"hp_{name}"] = value
    return {contract.sm_variable(key): env_value(value) for key, value in exported.items()}


def platform_environment(layout: HostLayout, *, job_name: str, region: str) -> dict[str, str]:
    """The non-``SM_`` variables a SageMaker training container has besides the toolkit's.

    ``SAGEMAKER_BASE_DIR`` is the toolkit's own override of ``/opt/ml``: code that locates the tree through it (the
    toolkit itself, or ``$SAGEMAKER_BASE_DIR/checkpoints`` for checkpoints) finds this host's tree.
    ``TENSORBOARD_CONFIG_FILE_PATH`` is AWS SageMaker Debugger's override of
    ``/opt/ml/input/config/tensorboardoutputconfig.json`` (which it, and the kit's entry points, read
    ``TensorBoardOutputConfig.LocalPath`` from): it names this host's copy of that file.
    """
    return {
        contract.TRAINING_JOB_NAME: job_name,
        contract.SAGEMAKER_JOB_NAME: job_name,
        contract.CURRENT_HOST: layout.host,
        contract.SAGEMAKER_REGION: region,
        contract.SAGEMAKER_BASE_DIR: str(layout.root),
        contract.TENSORBOARD_CONFIG_FILE_PATH: str(layout.tensorboard_config_file),
    }


def host_addresses(count: int) -> dict[str, str]:
    """Host name -> its own loopback address, for ``count`` hosts in order: ``algo-1`` -> 127.0.0.2, ..."""
    return {f"algo-{n + 1}": str(_FIRST_HOST_ADDRESS + n) for n in range(count)}


@functools.cache
def emitted_variables() -> frozenset[str]:
    """Every variable local_mode's planners give a process, read off the planners themselves.

    The strategies' variables are :data:`smddp_compat.cluster.EMITTED_VARIABLES` (every strategy's plan derives
    them there), and the host's own come from :func:`platform_environment`,
    :func:`smddp_compat.cluster.encode_host_addresses` and the stall watchdog's folder. ``SM_*`` is a family
    (:data:`_RESERVED_PREFIXES`). ``PYTHONPATH`` is not here (the caller's is kept after the job's entries), nor
    ``PYTHONUNBUFFERED`` (the job's own value wins).
    """
    hosts = ["algo-1", "algo-2"]
    addresses = host_addresses(len(hosts))
    layout = HostLayout(hosts[0], Path(contract.OPT_ML))
    return frozenset(
        {
            *EMITTED_VARIABLES,
            *platform_environment(layout, job_name="", region=""),
            *encode_host_addresses(addresses),
            *stall_watchdog_env(None, None, ""),
        }
    )


def is_reserved(name: str) -> bool:
    """Whether local_mode sets the variable ``name`` for the processes itself (so a user may not)."""
    return name.startswith(_RESERVED_PREFIXES) or name in emitted_variables()


def inherited_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without the variables that would describe some other job (e.g. when ``smddp
    local`` itself runs inside a SageMaker job or under mpirun): local_mode's own and a launcher's per-process ones.
    """
    return {
        name: value
        for name, value in parent.items()
        if not is_reserved(name) and not name.startswith(_LAUNCHER_PREFIXES)
    }


def process_environment(
    *,
    inherited: Mapping[str, str],
    job: Mapping[str, str],
    training: Mapping[str, str],
    platform: Mapping[str, str],
    hosts: Mapping[str, str],
    distribution: Mapping[str, str],
    stall_watchdog: Mapping[str, str],
    python_path: list[str],
) -> dict[str, str]:
    """One process's environment in the process backend, composed from its layers in this order (a later layer's
    value wins over an earlier one's):

    1. ``inherited``: this machine's environment less what describes another job (:func:`inherited_environment`);
    2. ``PYTHONUNBUFFERED=1``, so lines reach the log as they are printed;
    3. ``job``: the job's own environment (``JobSpec.environment``, ``--env``), which may set ``PYTHONUNBUFFERED``;
    4. ``training``: the training toolkit's ``SM_*`` variables (:func:`training_environment`);
    5. ``platform``: what SageMaker's platform sets in the container (:func:`platform_environment`);
    6. ``hosts``: the hosts' loopback addresses (``smddp_compat.cluster.encode_host_addresses``);
    7. ``distribution``: the strategy's variables for this process (``ProcessPlan.env``: ranks, rendezvous);
    8. ``stall_watchdog``: where the ranks' stall watchdogs publish their state;
    9. ``PYTHONPATH``: ``python_path`` (the plan's entries, the code folder, the kit's start-up folder), then the
       ``PYTHONPATH`` the layers above left, if any.
    """
    env = {**inherited, "PYTHONUNBUFFERED": "1", **job, **training, **platform, **hosts, **distribution,
           **stall_watchdog}
    env["PYTHONPATH"] = os.pathsep.join([*python_path, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def default_region(parent: Mapping[str, str] = os.environ) -> str:
    """The AWS region from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``us-east-1`` when neither is set."""
    return parent.get("AWS_REGION") or parent.get("AWS_DEFAULT_REGION") or "us-east-1"
