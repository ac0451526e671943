"""Finding the Docker engine: the docker CLI and a daemon that answers.

The image is built with it (:mod:`smddp_compat.image.build`) and the SageMaker twin runs its containers on it
(:mod:`smddp_compat.local_mode.docker`).

Every failure says what is missing and how to fix it, including the way out: ``--backend process`` needs no Docker.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from smddp_compat.image.commands import capture
from smddp_compat.image.errors import DockerUnavailableError

__all__ = ["Engine", "find_engine"]

_CHECK_SECONDS = 20.0
_USE_PROCESS_BACKEND = "or run the job without containers: `smddp local --backend process ...`"


@dataclass(frozen=True)
class Engine:
    """A reachable Docker engine.

    Attributes:
        docker: Path of the docker CLI.
        docker_host: ``DOCKER_HOST`` as the CLI uses it (empty: the default socket).
    """

    docker: str
    server_version: str
    docker_host: str


def _start_hint(docker_host: str) -> str:
    where = f"DOCKER_HOST={docker_host}" if docker_host else "the default socket /var/run/docker.sock"
    return (
        f"the Docker daemon does not answer at {where}. Start it: `sudo systemctl start docker`, or as root "
        "`source .ci/docker.sh && smddp_docker_start` (from the kit's checkout: starts dockerd with its own socket and "
        f"exports DOCKER_HOST), or point DOCKER_HOST at a running daemon; {_USE_PROCESS_BACKEND}"
    )


def find_engine() -> Engine:
    """Checks that Docker can be used now.

    Raises:
        DockerUnavailableError: The docker CLI is missing, or the daemon does not answer; the message says
            how to install or start it, or to use the process backend.
    """
    docker = shutil.which("docker")
    if docker is None:
        raise DockerUnavailableError(
            "the docker CLI is not installed (no `docker` on PATH). Install Docker: "
            f"`sudo apt-get install docker.io` (Debian/Ubuntu); {_USE_PROCESS_BACKEND}"
        )
    docker_host = os.environ.get("DOCKER_HOST", "")
    code, output = capture([docker, "version", "--format", "{{.Server.Version}}"], timeout=_CHECK_SECONDS)
    if code != 0 or not output or "\n" in output:
        detail = f" (docker said: {output.splitlines()[-1]})" if output else ""
        raise DockerUnavailableError(_start_hint(docker_host) + detail)
    return Engine(docker=docker, server_version=output, docker_host=docker_host)
