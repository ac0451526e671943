"""local_mode: run a SageMaker training job on this machine, several hosts and several processes each.

Two backends (``smddp local --backend``): the process backend (this package's :func:`run`, no Docker) and the
SageMaker twin (:mod:`smddp_compat.local_mode.docker`: the job's request replayed in the kit's image, one container
per host). In the process backend, hosts ``algo-1`` .. ``algo-H`` each get their own ``/opt/ml`` tree, the ``SM_*``
environment of the SageMaker training toolkit and their own loopback address (127.0.0.2, 127.0.0.3, ...); the
distribution (``smddp``, ``mpi``, ``mwms``, ``dtensor`` or ``none``) decides how the processes find each other.

Example:
    >>> from smddp_compat.local_mode import JobSpec, run
    >>> result = run(JobSpec("train.py", source_dir="src", instance_count=2, distribution="smddp"))  # doctest: +SKIP
    >>> result.raise_for_status().artifacts.model  # doctest: +SKIP

Importing this package does not import TensorFlow, Horovod, boto3 or Docker's tools.
"""

from smddp_compat.local_mode.artifacts import ArtifactPaths
from smddp_compat.local_mode.errors import (
    ArtifactError,
    ChannelError,
    ConfigurationError,
    HyperparameterError,
    JobFailedError,
    LocalModeError,
)
from smddp_compat.local_mode.outcome import JobResult
from smddp_compat.local_mode.runner import run
from smddp_compat.local_mode.spec import Distribution, JobSpec

__all__ = [
    "JobSpec", "Distribution", "run", "JobResult", "ArtifactPaths", "LocalModeError", "ConfigurationError",
    "HyperparameterError", "ChannelError", "ArtifactError", "JobFailedError",
]
