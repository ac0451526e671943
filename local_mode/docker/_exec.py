"""Turning a process of the process backend into the same process inside its host's container.

The process backend prepares each process for this machine: host paths (the host's tree, the kit's checkout), this
machine's Python, and the full inherited environment. In a container the tree is ``/opt/ml`` and the kit is at
:data:`~local_mode.docker._compose.KIT_MOUNT`, so paths are rewritten; the image's own ``python`` replaces this
machine's; and only the job's variables go in (what the backend set or changed, plus the families a training job
reads), never the host's ``PATH``, ``HOME`` or virtualenv. The process is then run with ``docker exec`` under the
in-container wrapper (``_agent.py run``), the client itself under ``_exec_client.py``, which turns the supervisor's
SIGTERM into a SIGTERM of the process in the container. Variables reach the process by name (``--env NAME``, the
value in the docker client's environment), so no value, credentials included, ever appears on a command line.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from local_mode.docker._compose import AGENT_PATH
from smddp_compat.launcher import ProcessSpec

__all__ = ["PathMap", "job_environment", "exec_spec", "EXEC_CLIENT"]

EXEC_CLIENT = str(Path(__file__).with_name("_exec_client.py"))

# Never taken from the host: they describe this machine, not the job.
_HOST_ONLY = frozenset(
    {"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME", "VIRTUAL_ENV", "PYTHONHOME", "TMPDIR", "TERM",
     "SHELL", "USER", "LOGNAME", "MAIL", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"}
)  # fmt: skip
# Passed even when the host has the same value: the families a training job reads.
_JOB_PREFIXES = (
    "SM_", "SAGEMAKER_", "HOROVOD_", "DTENSOR_", "TF_", "SMDDP_", "AWS_", "OMP_", "KMP_", "NCCL_", "CUDA_",
    "TRAINING_JOB_NAME", "CURRENT_HOST", "PYTHONPATH", "PYTHONUNBUFFERED",
)  # fmt: skip
# Variables the docker client itself would obey: given with their value instead of by name.
_CLIENT_SENSITIVE = ("LD_", "DOCKER_", "GODEBUG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# What the docker client needs from this process's environment.
_CLIENT_ENV = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "LANG")


@dataclass(frozen=True)
class PathMap:
    """Host path prefixes and what they are in the container.

    Attributes:
        prefixes: (host prefix, container path) pairs.
        python: Host Python executables (rewritten to ``python``, the image's).
    """

    prefixes: tuple[tuple[str, str], ...]
    python: frozenset[str] = frozenset()

    @classmethod
    def for_host(cls, tree: Path, kit_root: Path, opt_ml: str, kit_mount: str) -> "PathMap":
        """The map of one host: its tree (as given and resolved) and the kit's checkout."""
        pairs = {str(tree): opt_ml, str(tree.resolve()): opt_ml, str(kit_root): kit_mount}
        pairs[str(kit_root.resolve())] = kit_mount
        # Longest first, so that a nested prefix wins.
        ordered = tuple(sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True))
        pythons = {sys.executable, os.path.realpath(sys.executable)}
        return cls(ordered, frozenset(pythons))

    def rewrite(self, text: str) -> str:
        """``text`` with every host prefix (as a whole path component) replaced by its container path."""
        for host, container in self.prefixes:
            if host and host in text:
                text = re.sub(re.escape(host) + r"(?=$|[/:;,\"' \]}])", container.replace("\\", r"\\"), text)
        return text

    def argument(self, arg: str) -> str:
        """One command-line argument rewritten (this machine's Python interpreters become ``python``)."""
        if arg in self.python:
            return "python"
        rewritten = self.rewrite(arg)
        if rewritten == arg and os.path.isabs(arg) and re.fullmatch(r"python[0-9.]*", os.path.basename(arg)):
            return "python"
        return rewritten


def job_environment(env: Mapping[str, str], parent: Mapping[str, str]) -> dict[str, str]:
    """The variables of a process that belong to its job, not to this machine.

    Args:
        env: The process's full environment, as the process backend built it.
        parent: The environment it inherited from (usually ``os.environ``).

    Returns:
        Variables set or changed by the backend, plus those of :data:`_JOB_PREFIXES`, minus :data:`_HOST_ONLY`.
    """
    return {
        name: value
        for name, value in env.items()
        if name not in _HOST_ONLY and (parent.get(name) != value or name.startswith(_JOB_PREFIXES))
    }


def exec_spec(
    spec: ProcessSpec,
    *,
    docker: str,
    container: str,
    paths: PathMap,
    parent: Mapping[str, str],
    grace: float,
    extra_env: Mapping[str, str] | None = None,
) -> ProcessSpec:
    """The ``docker exec`` process that runs ``spec`` in ``container``.

    Args:
        spec: The process as the process backend prepared it.
        docker: The docker CLI.
        container: The host's container.
        paths: The host's path map.
        parent: The environment ``spec.env`` was inherited from.
        grace: The supervisor's seconds between SIGTERM and SIGKILL (the wrapper SIGKILLs the process just before).
        extra_env: Variables to set in the container besides the job's (they win).

    Returns:
        A spec with the same label, log file and host, whose command runs ``docker exec`` under the wrapper.
    """
    variables = {name: paths.rewrite(value) for name, value in job_environment(spec.env, parent).items()}
    variables.update(extra_env or {})
    workdir = paths.rewrite(spec.cwd) if spec.cwd else None
    process = spec.label
    argv = [sys.executable, "-I", EXEC_CLIENT, docker, container, process, f"{grace:g}", AGENT_PATH, "--"]
    argv += [docker, "exec"]
    if workdir:
        argv += ["--workdir", workdir]
    client_env = {name: parent[name] for name in _CLIENT_ENV if name in parent}
    for name in sorted(variables):
        if name.startswith(_CLIENT_SENSITIVE) or name in _CLIENT_ENV:
            argv += ["--env", f"{name}={variables[name]}"]
        else:
            argv += ["--env", name]
            client_env[name] = variables[name]
    argv += [container, "python3", AGENT_PATH, "run", process, "--"]
    argv += [paths.argument(arg) for arg in spec.argv]
    return ProcessSpec(argv=argv, env=client_env, label=spec.label, cwd=None, log_path=spec.log_path, host=spec.host,
                       console_hides=spec.console_hides)

