"""Keras 3 ``fit``, ``evaluate`` and ``predict`` under MultiWorkerMirroredStrategy with several workers.

Keras 3.15's TensorFlow trainer fails there in two places (keras-team/keras#20585); both are changed here, for a
strategy in multi-worker mode only:

1. **The symbolic build** (``TensorFlowTrainer._maybe_symbolic_build``) reduces the first distributed batch with
   ``strategy.reduce("MEAN", batch, axis=None)`` in eager mode, only to learn its shapes and dtypes; a multi-worker
   strategy cannot reduce a ``PerReplica`` batch eagerly ("Attempt to convert a value (PerReplica...) with an
   unsupported type"). The build now reads the first local replica's batch: the same shapes and dtypes, no
   communication.
2. **The logs** (``reduce_per_replica``, reduction ``"auto"``/``"mean"``) are reduced with
   ``strategy.reduce("MEAN", value, axis=0)``, which fails on a scalar ("Invalid reduction dimension 0 for input
   with 0 dimensions"), and every log is a scalar. A scalar is now reduced with ``axis=None``: the mean over every
   replica of every worker (Keras 3's metric variables are already summed across replicas at each update, so the
   logged metrics are the global ones and equal on every worker). Other values keep Keras's reduction.

And the callbacks that write files, on every worker but the chief (``strategy.extended.should_checkpoint``), write
them in a private temporary folder that is removed afterwards, as tf-keras does: every worker must take part in a
save (reading a variable can be a collective), but only the chief's copy is kept, so two workers never write one
file. ``ModelCheckpoint`` and ``BackupAndRestore`` save there; ``BackupAndRestore`` restores from the chief's
folder on every worker and only the chief deletes it at the end; ``TensorBoard`` logs there. ``EarlyStopping`` and
learning-rate schedules need nothing: they read the global logs, so every worker decides alike.

Datasets are auto-sharded as tf-keras shards them: Keras 3's array adapter already sets ``AutoShardPolicy.DATA``
for arrays; a ``tf.data.Dataset`` keeps its own options (``AUTO`` by default).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from types import ModuleType
from typing import Any, Callable

import tensorflow as tf

from smddp_compat.keras3.releases import untested_keras_refusal

__all__ = ["adapt", "is_multi_worker", "is_chief"]

_STRATEGY_NAME = "MultiWorkerMirroredStrategy"


def is_multi_worker(strategy: Any) -> bool:
    """Whether `strategy` is a MultiWorkerMirroredStrategy in multi-worker mode (two or more workers)."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._in_multi_worker_mode())  # noqa: SLF001 - Keras's own test of it


def is_chief(strategy: Any) -> bool:
    """Whether this process keeps the files of `strategy`'s job (the chief, or worker 0 without one)."""
    return bool(strategy.extended.should_checkpoint)


def adapt(trainer_module: ModuleType) -> None:
    """Changes Keras 3's `trainer_module` and file-writing callbacks as the module docstring says (once)."""
    _adapt_symbolic_build(trainer_module)
    _adapt_log_reduction(trainer_module)
    _adapt_callbacks()


def _refuse_untested_keras() -> None:
    refusal = untested_keras_refusal(_STRATEGY_NAME)
    if refusal is not None:
        raise refusal


def _first_local_replica(strategy: Any, value: Any) -> Any:
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _adapt_symbolic_build(trainer_module: ModuleType) -> None:
    from keras.src import tree

    trainer = trainer_module.TensorFlowTrainer
    keras_build = trainer._maybe_symbolic_build

    @functools.wraps(keras_build)
    def maybe_symbolic_build(self: Any, iterator: Any = None, data_batch: Any = None) -> Any:
        strategy = self._distribute_strategy
        if iterator is None or strategy is None or not is_multi_worker(strategy):
            return keras_build(self, iterator=iterator, data_batch=data_batch)
        _refuse_untested_keras()
        for _, _, batches in iterator:
            data_batch = tree.map_structure(functools.partial(_first_local_replica, strategy), next(batches))
            break
        return keras_build(self, data_batch=data_batch)

    trainer._maybe_symbolic_build = maybe_symbolic_build


def _adapt_log_reduction(trainer_module: ModuleType) -> None:
    from keras.src import tree

    keras_reduce = trainer_module.reduce_per_replica

    @functools.wraps(keras_reduce)
    def reduce_per_replica(values: Any, strategy: Any, reduction: str) -> Any:
        if reduction not in ("auto", "mean") or not is_multi_worker(strategy):
            return keras_reduce(values, strategy, reduction)

        def reduce_one(value: Any) -> Any:
            if getattr(_first_local_replica(strategy, value), "shape", None) == ():
                return strategy.reduce("MEAN", value, axis=None)
            return keras_reduce(value, strategy, reduction)

        return tree.map_structure(reduce_one, values)

    # The trainer's step functions look the name up in their module when they are traced.
    trainer_module.reduce_per_replica = reduce_per_replica


def _non_chief_strategy(callback: Any) -> Any:
    """The multi-worker strategy of `callback`'s model when this process is not its chief, else None."""
    model = getattr(callback, "model", None)
    strategy = getattr(model, "distribute_strategy", None) if model is not None else None
    if strategy is None or not is_multi_worker(strategy) or is_chief(strategy):
        return None
    return strategy


class _Redirected:
    """Sets attributes of an object to paths inside a fresh temporary folder for the duration of a block."""

    def __init__(self, target: Any, paths: Callable[[str], dict[str, str]]) -> None:
        self.target, self.paths = target, paths

    def __enter__(self) -> str:
        self.folder = tempfile.mkdtemp(prefix="smddp-keras3-worker-")
        new = self.paths(self.folder)
        self.saved = {name: getattr(self.target, name) for name in new}
        for name, value in new.items():
            setattr(self.target, name, value)
        return self.folder

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            setattr(self.target, name, value)
        shutil.rmtree(self.folder, ignore_errors=True)


def _checkpoint_paths(callback: Any) -> Callable[[str], dict[str, str]]:
    return lambda folder: {"filepath": os.path.join(folder, os.path.basename(callback.filepath) or "checkpoint")}


def _backup_paths(callback: Any) -> Callable[[str], dict[str, str]]:
    def paths(folder: str) -> dict[str, str]:
        names = ("_weights_path", "_training_metadata_path", "_prev_weights_path", "_prev_training_metadata_path")
        return {"backup_dir": folder,
                **{name: os.path.join(folder, os.path.basename(getattr(callback, name))) for name in names}}

    return paths


def _wrap_method(klass: type, name: str, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = klass.__dict__[name]
    if getattr(original, "_smddp_multi_worker", False):
        return
    replacement = functools.wraps(original)(wrapper(original))
    replacement._smddp_multi_worker = True  # type: ignore[attr-defined]
    setattr(klass, name, replacement)


def _save_in_private_folder(paths: Callable[[Any], Callable[[str], dict[str, str]]]) -> Callable[..., Any]:
    def wrapper(save: Callable[..., Any]) -> Callable[..., Any]:
        def save_on_this_worker(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _non_chief_strategy(self) is None:
                return save(self, *args, **kwargs)
            with _Redirected(self, paths(self)):
                return save(self, *args, **kwargs)

        return save_on_this_worker

    return wrapper


def _keep_chief_backup(end: Callable[..., Any]) -> Callable[..., Any]:
    def on_train_end(self: Any, logs: Any = None) -> Any:
        if _non_chief_strategy(self) is None:
            return end(self, logs)
        return None  # the chief deletes the backup folder it wrote

    return on_train_end


def _log_in_private_folder(set_model: Callable[..., Any]) -> Callable[..., Any]:
    def set_model_of_worker(self: Any, model: Any) -> Any:
        strategy = getattr(model, "distribute_strategy", None)
        if strategy is None or not is_multi_worker(strategy) or is_chief(strategy):
            return set_model(self, model)
        folder = tempfile.mkdtemp(prefix="smddp-keras3-worker-tensorboard-")
        self._smddp_private_log_dir = folder
        user_log_dir, self.log_dir = self.log_dir, folder
        try:
            return set_model(self, model)
        finally:
            self.log_dir = user_log_dir

    return set_model_of_worker


def _remove_private_logs(end: Callable[..., Any]) -> Callable[..., Any]:
    def on_train_end(self: Any, logs: Any = None) -> Any:
        try:
            return end(self, logs)
        finally:
            folder = self.__dict__.pop("_smddp_private_log_dir", None)
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    return on_train_end


def _adapt_callbacks() -> None:
    from keras.src.callbacks.backup_and_restore import BackupAndRestore
    from keras.src.callbacks.model_checkpoint import ModelCheckpoint
    from keras.src.callbacks.tensorboard import TensorBoard

    _wrap_method(ModelCheckpoint, "_save_model", _save_in_private_folder(_checkpoint_paths))
    _wrap_method(BackupAndRestore, "_save_model", _save_in_private_folder(_backup_paths))
    _wrap_method(BackupAndRestore, "on_train_end", _keep_chief_backup)
    _wrap_method(TensorBoard, "set_model", _log_in_private_folder)
    _wrap_method(TensorBoard, "on_train_end", _remove_private_logs)
