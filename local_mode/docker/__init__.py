"""The docker backend of local_mode: the SageMaker twin.

What SageMaker does with a CreateTrainingJob request, done with this machine's Docker engine: every host a container
of the request's image on an internal network of the job's own, started with ``train`` and nothing else, S3 served
to the containers by the twin's own moto, artifacts, checkpoints, time limit, status and failure reason as SageMaker
reports them (:mod:`smddp_compat.local_mode.docker.twin`). The image it runs by default is the kit's (AWS's toolkits on
TensorFlow 2.21 with Horovod and the kit: :mod:`smddp_compat.image`, ``smddp image``), built on first use.

Importing this package imports neither TensorFlow nor Docker tooling; everything runs through the docker CLI.

    >>> from smddp_compat.local_mode.docker import TrainingJobRequest, SageMakerTwin   # doctest: +SKIP
    >>> result = SageMakerTwin(TrainingJobRequest.from_file("request.json")).run()   # doctest: +SKIP
    >>> result.describe()["TrainingJobStatus"]   # doctest: +SKIP
"""

from smddp_compat.local_mode.docker.errors import (
    ContainerError,
    DockerError,
    DockerUnavailableError,
    ImageBuildError,
    ImageNotFoundError,
)
from smddp_compat.local_mode.docker.request import Channel, TrainingJobRequest
from smddp_compat.local_mode.docker.twin import SageMakerTwin, replay

__all__ = [
    "Channel",
    "ContainerError",
    "DockerError",
    "DockerUnavailableError",
    "ImageBuildError",
    "ImageNotFoundError",
    "SageMakerTwin",
    "TrainingJobRequest",
    "replay",
]
