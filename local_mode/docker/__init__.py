"""The docker backend of local_mode: the same local jobs, one container per host, in an image the kit builds offline.

Importing this package imports neither TensorFlow nor Docker tooling; everything runs through the docker CLI.

* :func:`find_engine`: the docker CLI, compose and a daemon that answers (else a clear error).
* :func:`resolve_image` / :func:`ensure_image`: the kit's image (``smddp-compat:<digest>``), built when missing.
* :func:`run_in_containers`: run a prepared job's processes in containers.

``python -m local_mode.docker build|check|clean`` builds the image, checks the engine, removes leftover containers.
"""

from local_mode.docker._compose import ContainerHost
from local_mode.docker._engine import Engine, find_engine
from local_mode.docker._image import IMAGE_REPOSITORY, ImageBuild, ensure_image
from local_mode.docker.backend import (
    ContainerJobResult,
    DockerBackend,
    ResolvedImage,
    hosts_of,
    resolve_image,
    run_in_containers,
)
from local_mode.docker.errors import DockerError, DockerUnavailableError, ImageBuildError, ImageNotFoundError

__all__ = [
    "IMAGE_REPOSITORY",
    "ContainerHost",
    "ContainerJobResult",
    "DockerBackend",
    "DockerError",
    "DockerUnavailableError",
    "Engine",
    "ImageBuild",
    "ImageBuildError",
    "ImageNotFoundError",
    "ResolvedImage",
    "ensure_image",
    "find_engine",
    "hosts_of",
    "resolve_image",
    "run_in_containers",
]
