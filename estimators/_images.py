"""Which training image a job uses.

Policy:

1. ``image_uri`` given -> that image, always.
2. ``instance_type="local_process"`` -> no image: the job runs in this machine's environment.
3. Otherwise the SDK's own lookup for AWS's TensorFlow training images (``sagemaker.image_uris``). AWS publishes
   them up to TensorFlow 2.19 (and SMDDP only up to 2.11); for newer versions such as 2.21 there is no AWS image,
   so the estimator refuses with an error that says to pass ``image_uri`` -- an image holding TensorFlow, Horovod
   and smddp-compat (e.g. the one the project's Docker recipe builds, pushed to your ECR) -- or to pick a version
   AWS has.

Whether an image has CUDA (:func:`image_cuda`, :func:`check_image_for_instance_type`): a GPU instance type given an
image without CUDA trains every rank on the CPU, silently; the kit warns (:class:`CpuImageWarning`) before any upload.
The rule, first that applies:

1. The image's label ``org.smddp-compat.cuda`` when the image can be inspected (the twin's local engine): ``none``
   (the kit's CPU image) -> no CUDA, anything else (``12``: ``smddp image --gpu``) -> CUDA.
2. Its name (an ECR URI cannot be inspected from here): the repository path and tag, split at every character that is
   not a letter or digit. A word ``gpu`` or ``cuda`` or ``cu<digits>`` (AWS's ``...-gpu-py312-cu125-...`` tags, the
   kit's ``smddp-compat-gpu``) -> CUDA; a word ``cpu`` (AWS's ``...-cpu-py312-...``) -> no CUDA; a repository named
   ``smddp-compat`` (the kit's CPU image, pushed under its own name) -> no CUDA.
3. Otherwise unknown: nothing is said (most custom images are GPU images).

So push the GPU image to a repository whose name says ``gpu`` (``smddp-compat-gpu``), the CPU one to ``smddp-compat``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from typing import Literal

from smddp_compat.estimators._instance_types import instance_spec
from smddp_compat.estimators.errors import ConfigurationError, NoPublishedImageError
from smddp_compat.image import CUDA_LABEL, IMAGE_REPOSITORY

__all__ = [
    "resolve_training_image",
    "CpuImageWarning",
    "CUDA_LABEL",
    "ImageCuda",
    "image_cuda",
    "check_image_for_instance_type",
]

# CUDA_LABEL: the label ``smddp image`` writes, the CUDA major version the image was built for (``12``) or ``none``.
# IMAGE_REPOSITORY: the kit's CPU image repository (``smddp image``); the GPU one is ``smddp-compat-gpu``.
_KIT_CPU_REPOSITORY = IMAGE_REPOSITORY
ImageCuda = Literal["cuda", "none", "unknown"]


class CpuImageWarning(UserWarning):
    """A GPU instance type was given an image without CUDA: every rank would train on the CPU.

    Turn it into an error with ``warnings.simplefilter("error", CpuImageWarning)``.
    """


def _name_words(image: str) -> tuple[str, list[str]]:
    """The repository's last path part and the words of the repository path and tag (digest and registry dropped)."""
    reference = image.strip().split("@", 1)[0]
    parts = reference.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # the registry host (e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com) says nothing
    path = "/".join(parts)
    repository, _, tag = path.rpartition(":") if ":" in parts[-1] else (path, "", "")
    words = [word for word in re.split(r"[^a-z0-9]+", f"{repository} {tag}".lower()) if word]
    return repository.rsplit("/", 1)[-1].lower(), words


def image_cuda(image: str, labels: Mapping[str, str] | None = None) -> ImageCuda:
    """Whether ``image`` has CUDA, by the module's rule: its labels when known, else its name.

    Args:
        image: The image URI or local tag, e.g. ``123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat-gpu:v1``.
        labels: The image's labels when it could be inspected (``docker image inspect``), or None.

    Returns:
        ``"cuda"``, ``"none"`` (CPU only) or ``"unknown"``.

        >>> image_cuda("123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:latest")
        'none'
        >>> image_cuda("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.19.0-gpu-py312-cu125-ubuntu22.04-sagemaker")
        'cuda'
    """
    if labels and labels.get(CUDA_LABEL):
        return "none" if labels[CUDA_LABEL].strip().lower() == "none" else "cuda"
    repository, words = _name_words(image)
    if any(word in ("gpu", "cuda") or re.fullmatch(r"cu\d{2,3}", word) for word in words):
        return "cuda"
    if "cpu" in words or repository == _KIT_CPU_REPOSITORY:
        return "none"
    return "unknown"


def _ranks(count: int) -> str:
    return "rank 0" if count == 1 else f"ranks 0-{count - 1}"


def check_image_for_instance_type(
    image: str | None,
    instance_type: str,
    instance_count: int = 1,
    *,
    labels: Mapping[str, str] | None = None,
    warn: bool = True,
    stacklevel: int = 2,
) -> str | None:
    """Warns when a GPU instance type is given an image without CUDA (before any upload: call it first).

    Args:
        image: The training image (None: no image, e.g. ``local_process``; nothing to check).
        instance_type: The instance type (an unknown one is refused as :func:`instance_spec` refuses it).
        instance_count: Hosts of the job (for the ranks the message names).
        labels: The image's labels when it could be inspected, else None (the name decides).
        warn: Issue the :class:`CpuImageWarning` (False: only return the message).
        stacklevel: As for :func:`warnings.warn`.

    Returns:
        The message when the image has no CUDA and the type has GPUs, else None.
    """
    if image is None or not isinstance(image, str):
        return None
    spec = instance_spec(instance_type)
    if not spec.is_gpu or image_cuda(image, labels) != "none":
        return None
    message = (
        f"image {image!r} has no CUDA: {_ranks(instance_count * spec.gpus)} ({instance_count} x {instance_type}, "
        f"{spec.gpus} GPU(s) each) would train on the CPU; build the GPU image with `smddp image --gpu` and push it "
        "to a repository whose name says gpu (e.g. smddp-compat-gpu), or pass image_uri of an image with CUDA"
    )
    if warn:
        warnings.warn(message, CpuImageWarning, stacklevel=stacklevel + 1)
    return message


def resolve_training_image(
    *,
    image_uri: str | None,
    framework_version: str | None,
    py_version: str | None,
    instance_type: str,
    region: str | None,
) -> str | None:
    """The training image for a job, or None when no image is used (``local_process``).

    Args:
        image_uri: The image the user gave, if any.
        framework_version: TensorFlow version, e.g. ``"2.16"``.
        py_version: Python version tag, e.g. ``"py310"``.
        instance_type: The instance type (decides CPU or GPU image).
        region: AWS region of the session.

    Returns:
        The image URI, or None for ``local_process``.

    Raises:
        NoPublishedImageError: No image given and AWS has none for this version / Python / region.
        ConfigurationError: framework_version or py_version missing when no image_uri is given.
    """
    if image_uri:
        if not isinstance(image_uri, str):
            raise ConfigurationError("image_uri", image_uri, "must be a string", "pass a full image URI")
        return image_uri
    if instance_type == "local_process":
        return None
    fix = (
        "pass image_uri='<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>' -- an image with TensorFlow, "
        "Horovod and smddp-compat (build it with the project's Docker recipe and push it to ECR) -- or use a "
        "framework_version that AWS publishes an image for (<= 2.19)"
    )
    if not framework_version:
        raise ConfigurationError(
            "framework_version", framework_version, "is required when image_uri is not given",
            "pass framework_version='2.16' and py_version='py310', or image_uri=...",
        )
    if not py_version:
        raise ConfigurationError(
            "py_version", py_version, "is required with framework_version when image_uri is not given",
            "pass the Python tag of the AWS image, e.g. py_version='py310' for TensorFlow 2.16",
        )
    if not region:
        raise ConfigurationError(
            "region", region, "no AWS region is configured, so no image can be looked up",
            "set AWS_DEFAULT_REGION (or pass sagemaker_session=Session(boto3.Session(region_name=...)))",
        )
    from sagemaker import image_uris  # the SDK is imported only when an image is looked up

    try:
        return image_uris.retrieve(
            "tensorflow",
            region,
            version=framework_version,
            py_version=py_version,
            instance_type=instance_type,
            image_scope="training",
        )
    except ValueError as exc:
        reason = str(exc).split(" You may need")[0]
        raise NoPublishedImageError(
            "framework_version", framework_version,
            f"SageMaker has no TensorFlow training image for it ({reason})", fix,
        ) from None
