"""Whether an image has CUDA (:func:`image_cuda`, :func:`check_image_for_instance_type`): a GPU instance type given an
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

from smddp_compat.image.build import CUDA_LABEL, IMAGE_REPOSITORY
from smddp_compat.instance_types import find_instance_type

__all__ = ["CpuImageWarning", "ImageCuda", "image_cuda", "check_image_for_instance_type"]

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
    """Whether `image` (a URI or local tag) has CUDA, by the module's rule: its `labels` when it could be inspected
    (``docker image inspect``), else its name. Returns ``"cuda"``, ``"none"`` (CPU only) or ``"unknown"``.

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
    if "cpu" in words or repository == IMAGE_REPOSITORY:
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
    """Warns (:class:`CpuImageWarning`, unless not `warn`; `stacklevel` as for :func:`warnings.warn`) when a GPU
    instance type is given an image without CUDA, before any upload: call it first. Returns the message, else None.
    Nothing to check without an image (e.g. ``local_process``) or for a type the table does not know (the estimators
    refuse it first). `instance_count`: the job's hosts, for the ranks the message names; `labels`: the image's when
    it could be inspected, else None (the name decides).
    """
    if image is None or not isinstance(image, str):
        return None
    spec = find_instance_type(instance_type)
    if spec is None or not spec.is_gpu or image_cuda(image, labels) != "none":
        return None
    message = (
        f"image {image!r} has no CUDA: {_ranks(instance_count * spec.gpus)} ({instance_count} x {instance_type}, "
        f"{spec.gpus} GPU(s) each) would train on the CPU; build the GPU image with `smddp image --gpu` and push it "
        "to a repository whose name says gpu (e.g. smddp-compat-gpu), or pass image_uri of an image with CUDA"
    )
    if warn:
        warnings.warn(message, CpuImageWarning, stacklevel=stacklevel + 1)
    return message
