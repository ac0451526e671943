"""The distribution strategies of the kit, one class each, and the registry that maps their names to them.

Everything that depends on a job's strategy asks its :class:`Strategy` (settings, defaults and checks, the SDK's
``distribution`` dictionary, the ``sagemaker_*`` hyperparameters, the launch on this machine); nothing else branches
on the strategy's name. Adding a strategy is one module here, registered in :data:`STRATEGIES`.

    >>> from smddp_compat.strategies import strategy_named
    >>> strategy_named("mpi").framework_parameters(config, "ml.c5.xlarge")  # doctest: +SKIP

No TensorFlow or Horovod at import: the strategies ship inside the uploaded code and the images.
"""

from __future__ import annotations

from smddp_compat.errors import ConfigurationError
from smddp_compat.strategies._base import (
    ALL_SETTINGS, JobDriver, LocalCluster, LocalLaunch, ProcessPlan, Strategy, count_setting)
from smddp_compat.strategies.dtensor import DTensor, Mesh, parse_mesh
from smddp_compat.strategies.mpi import MPI
from smddp_compat.strategies.mwms import MultiWorkerMirrored
from smddp_compat.strategies.none import NoDistribution
from smddp_compat.strategies.parameter_server import ParameterServer
from smddp_compat.strategies.smddp import SMDDP

__all__ = [
    "Strategy", "ProcessPlan", "LocalCluster", "LocalLaunch", "JobDriver", "ALL_SETTINGS", "Mesh", "count_setting",
    "parse_mesh", "STRATEGIES", "NAMES", "strategy_named", "strategy_for_sdk_key", "sdk_keys", "users_of",
]

#: Every strategy by name, in the order the CLIs list them.
STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (NoDistribution(), SMDDP(), MPI(), MultiWorkerMirrored(), DTensor(), ParameterServer())
}
#: The names, in that order.
NAMES: tuple[str, ...] = tuple(STRATEGIES)
_BY_SDK_KEY = {s.sdk_key: s for s in STRATEGIES.values() if s.sdk_key}


#: Names users try that are not a distribution of a job: why, and where what they want does run.
_NOT_A_DISTRIBUTION: dict[str, tuple[str, str]] = {
    "tpu": ("TPUStrategy needs Cloud TPUs, which neither SageMaker nor this machine has",
            "train on GPUs with smddp, mpi, mwms or dtensor"),
    "mirrored": ("MirroredStrategy runs inside one process (all of one host's devices), not as a distribution of "
                 "processes", "use distribution 'none' with a script that builds it (entry_points/keras_mwms.py "
                 "--strategy mirrored), or 'mwms' across hosts"),
    "central_storage": ("CentralStorageStrategy runs inside one process (one host), not as a distribution of "
                        "processes", "use distribution 'none' with a script that builds it "
                        "(entry_points/keras_mwms.py --strategy central_storage)"),
    "estimator": ("tf.estimator was removed in TensorFlow 2.16",
                  "port the model to Keras or a custom loop, then use one of the distributions"),
    "horovod": ("Horovod is distribution 'mpi' (or 'smddp' for the smdistributed API)", "use --distribution mpi"),
    "smdistributed": ("SMDDP is distribution 'smddp' here", "use --distribution smddp"),
    "multi_worker_mirrored_strategy": ("MultiWorkerMirroredStrategy is distribution 'mwms' here",
                                       "use --distribution mwms"),
}
_NOT_A_DISTRIBUTION["tpu_strategy"] = _NOT_A_DISTRIBUTION["tpu"]
_NOT_A_DISTRIBUTION["multi_worker_mirrored"] = _NOT_A_DISTRIBUTION["multi_worker_mirrored_strategy"]


def strategy_named(name: object, field: str = "distribution") -> Strategy:
    """The strategy called ``name`` (any case, surrounding blanks and ``-`` for ``_`` allowed).

    Raises:
        ConfigurationError: No strategy has that name (for a TensorFlow strategy that is not a distribution of a
            job, or another name of one, the message says why and what to use).
    """
    spelled = name.strip().lower().replace("-", "_") if isinstance(name, str) else name
    if spelled in _NOT_A_DISTRIBUTION:
        problem, fix = _NOT_A_DISTRIBUTION[spelled]  # type: ignore[index]
        raise ConfigurationError(field, name, f"not a distribution of this kit: {problem}", fix)
    if spelled not in STRATEGIES:
        raise ConfigurationError(field, name, "unknown distribution", f"use one of: {', '.join(NAMES)}")
    return STRATEGIES[spelled]  # type: ignore[index]


def strategy_for_sdk_key(key: str) -> Strategy | None:
    """The strategy the SDK's ``distribution`` dictionary names with ``key`` (None: no strategy does)."""
    return _BY_SDK_KEY.get(key)


def sdk_keys() -> list[str]:
    """The keys of the SDK's ``distribution`` dictionary the strategies read, sorted."""
    return sorted(_BY_SDK_KEY)


def users_of(setting: str) -> list[str]:
    """The strategies that accept ``setting`` (one of :data:`ALL_SETTINGS` but ``processes_per_host``)."""
    return [s.name for s in STRATEGIES.values() if setting in s.settings]
