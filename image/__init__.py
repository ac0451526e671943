"""The kit's training image: a SageMaker training container for TensorFlow 2.21, in one place.

- ``Dockerfile`` (CPU), ``Dockerfile.gpu`` (GPU: ``smddp image --gpu``) and ``README.md`` (what is in the images,
  and why);
- :mod:`~smddp_compat.image.build`: the build context (the stack, the kit), its digest tag, ``docker build``;
- :mod:`~smddp_compat.image.rootfs`: the base image, a Debian root filesystem made with ``debootstrap`` (no registry
  can be reached here);
- :mod:`~smddp_compat.image.engine` and :mod:`~smddp_compat.image.commands`: the Docker engine and the commands run on
  it (the SageMaker twin, :mod:`smddp_compat.local_mode.docker`, runs its containers through them too);
- :mod:`~smddp_compat.image.cuda`: whether an image has CUDA, and the warning for a GPU type given one without;
- :mod:`~smddp_compat.image.train`: the image's ``train`` (AWS's toolkit, no shell, SIGTERM passed on);
- ``smddp image`` (:mod:`~smddp_compat.image.__main__`): build the image, or reuse it, and print its tag.

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
