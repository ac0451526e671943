"""Errors raised by the docker backend of local_mode.

They extend local_mode's own families: a missing or stopped Docker engine and a failed image build are
:class:`DockerError` (a :class:`~local_mode.errors.LocalModeError`); a bad ``--image`` is a
:class:`~local_mode.errors.ConfigurationError` that names the value and the fix.
"""

from __future__ import annotations

from smddp_compat.local_mode.errors import ConfigurationError, LocalModeError

__all__ = ["DockerError", "DockerUnavailableError", "ImageBuildError", "ImageNotFoundError"]


class DockerError(LocalModeError):
    """Base class of the docker backend's errors."""


class DockerUnavailableError(DockerError):
    """The docker CLI, docker compose or the Docker daemon cannot be used; the message says how to fix it."""


class ImageBuildError(DockerError):
    """A step of building the base or the training image failed.

    Attributes:
        step: What was being done (e.g. ``"debootstrap"``, ``"docker build"``).
        log_path: The file holding the step's full output, if one was kept.
    """

    def __init__(self, step: str, message: str, log_path: str | None = None) -> None:
        self.step = step
        self.log_path = log_path
        where = f" (full output: {log_path})" if log_path else ""
        super().__init__(f"{step} failed: {message}{where}")


class ImageNotFoundError(DockerError, ConfigurationError):
    """The image given with ``--image`` is not in the local Docker engine (and no registry can be reached).

    (The estimators' :class:`smddp_compat.estimators.NoPublishedImageError` is another matter: AWS publishes no image for a
    framework version.)
    """

    def __init__(self, image: str) -> None:
        super().__init__(
            "image",
            image,
            "is not present in the local Docker engine, and images cannot be pulled here",
            "load or build it first (`docker load -i FILE`, `docker build -t NAME ...`), or leave --image out to use "
            "the kit's own image (built on first use: `python -m smddp_compat.local_mode.docker build`)",
        )
        self.image = image
