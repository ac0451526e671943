"""Which training image a job uses.

Policy:

1. ``image_uri`` given -> that image, always.
2. ``instance_type="local_process"`` -> no image: the job runs in this machine's environment.
3. Otherwise the SDK's own lookup for AWS's TensorFlow training images (``sagemaker.image_uris``). AWS publishes
   them up to TensorFlow 2.19 (and SMDDP only up to 2.11); for newer versions such as 2.21 there is no AWS image,
   so the estimator refuses with an error that says to pass ``image_uri`` -- an image holding TensorFlow, Horovod
   and smddp-compat (e.g. the one the project's Docker recipe builds, pushed to your ECR) -- or to pick a version
   AWS has.

Whether the image fits the instance type (CUDA on a GPU type) is :mod:`smddp_compat.image.cuda`'s rule.
"""

from __future__ import annotations

from smddp_compat.estimators.errors import ConfigurationError, NoPublishedImageError

__all__ = ["resolve_training_image"]


def resolve_training_image(
    *,
    image_uri: str | None,
    framework_version: str | None,
    py_version: str | None,
    instance_type: str,
    region: str | None,
) -> str | None:
    """The training image for a job, or None when no image is used (``local_process``).

    ``framework_version`` is e.g. ``"2.16"``, ``py_version`` e.g. ``"py310"``; ``instance_type`` decides CPU or
    GPU image.

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
