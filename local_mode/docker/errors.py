"""Errors raised by the docker backend of local_mode (the SageMaker twin).

Docker's own failures (no engine, a failed image build) are the image package's :class:`DockerError` family
(:mod:`smddp_compat.image.errors`), re-exported here. A container or network the engine refused is a
:class:`ContainerError` (a :class:`DockerError` and a :class:`~smddp_compat.local_mode.errors.LocalModeError`); a bad
``--image`` is an :class:`ImageNotFoundError`, a :class:`DockerError` and the user's mistake, a
:class:`~smddp_compat.errors.ConfigurationError` that names the value and the fix.
"""

from __future__ import annotations

from smddp_compat.errors import ConfigurationError
from smddp_compat.image.errors import DockerError, DockerUnavailableError, ImageBuildError
from smddp_compat.local_mode.errors import LocalModeError

__all__ = ["ContainerError", "DockerError", "DockerUnavailableError", "ImageBuildError", "ImageNotFoundError"]


class ContainerError(DockerError, LocalModeError):
    """The engine refused a container or a network of the twin, or a service container did not answer."""


class ImageNotFoundError(DockerError, ConfigurationError):
    """The image given with ``--image`` is not in the local Docker engine (and no registry can be reached).

    (The estimators' :class:`smddp_compat.estimators.NoPublishedImageError` is another matter: AWS publishes no image
    for a framework version.)
    """

    def __init__(self, image: str) -> None:
        super().__init__(
            "image",
            image,
            "is not present in the local Docker engine, and images cannot be pulled here",
            "load or build it first (`docker load -i FILE`, `docker build -t NAME ...`), or leave --image out to use "
            "the kit's own image (built on first use, or now with `smddp image`)",
        )
        self.image = image
