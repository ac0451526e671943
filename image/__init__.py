"""The kit's training image: a SageMaker training container for TensorFlow 2.21, in one place (the Dockerfiles, the
build, the base image, the Docker engine and its commands, the image's ``train``, ``smddp image``; image/README.md
says which module does what, and why).

    >>> from smddp_compat.image import ensure_image, find_engine, host_base_recipe   # doctest: +SKIP
    >>> ensure_image(find_engine(), base=host_base_recipe()).tag   # doctest: +SKIP
    'smddp-compat:7f1bb1d263adada8'

Importing this package imports only the standard library (and :mod:`smddp_compat.errors`); import
:mod:`~smddp_compat.image.cuda` (it reads the instance-type table) on its own.
"""

from smddp_compat.image.build import (
    CUDA_LABEL, GPU_IMAGE_REPOSITORY, GPU_LATEST_TAG, IMAGE_REPOSITORY, LATEST_TAG, ImageBuild, ensure_image, kit_root,
)
from smddp_compat.image.engine import Engine, find_engine
from smddp_compat.image.errors import DockerError, DockerUnavailableError, ImageBuildError
from smddp_compat.image.rootfs import BaseImageRecipe, host_base_recipe, image_exists

__all__ = [
    "CUDA_LABEL",
    "GPU_IMAGE_REPOSITORY",
    "GPU_LATEST_TAG",
    "IMAGE_REPOSITORY",
    "LATEST_TAG",
    "BaseImageRecipe",

    "DockerError",
    "DockerUnavailableError",
    "Engine",
    "ImageBuild",
    "ImageBuildError",
    "ensure_image",
    "find_engine",
    "host_base_recipe",
    "image_exists",
    "kit_root",
]
