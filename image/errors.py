"""Errors of the image package: Docker cannot be used, or a step of building the image failed.

They are :class:`smddp_compat.errors.SmddpError` s (the kit's one base, which ``smddp`` prints as a message). The
SageMaker twin (:mod:`smddp_compat.local_mode.docker`) raises these too, and adds its own in
:mod:`smddp_compat.local_mode.docker.errors`.
"""

from __future__ import annotations

from smddp_compat.errors import SmddpError

__all__ = ["DockerError", "DockerUnavailableError", "ImageBuildError"]


class DockerError(SmddpError):
    """Base class of the errors about Docker: the engine, the image's build, the twin's containers."""


class DockerUnavailableError(DockerError):
    """The docker CLI or the Docker daemon cannot be used; the message says how to fix it."""


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
