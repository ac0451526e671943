"""``horovod.tensorflow.keras.callbacks`` for Keras 3 and tf-keras.

Horovod's callback logic is used as it is (its ``*CallbackImpl`` classes); what changes:

- the Keras backend handed to it: Horovod passes ``keras.backend``, which in Keras 3 has no ``get_value``,
  ``set_value`` or ``constant`` (so raw Horovod's metric-average and learning-rate callbacks fail on Keras 3 and on
  tf-keras alike). Here it is this process's ``tf.keras.backend``, reading and setting Keras 3 variables through
  their ``tf.Variable``. Keras 3 keeps some optimizer hyperparameters (SGD's momentum) as Python constants compiled
  into the training step; momentum correction leaves those unchanged.
- ``BroadcastGlobalVariablesCallback`` broadcasts Keras 3 variables (Horovod's ``.ref()`` and broadcast fail on
  them), and its ``local_variables`` may be Keras 3 variables.

``BestModelCheckpoint`` is Horovod's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from horovod._keras import callbacks as _impl
from horovod.tensorflow.keras.callbacks import BestModelCheckpoint
from horovod.tensorflow.util import _executing_eagerly

from smddp_compat.horovod.variables import broadcast_variables
from smddp_compat.keras_compat import is_keras3_variable, optimizer_variables, unwrap_variable

__all__ = [
    "BroadcastGlobalVariablesCallback", "MetricAverageCallback", "LearningRateScheduleCallback",
    "LearningRateWarmupCallback", "BestModelCheckpoint",
]


class _KerasBackend:
    """The few Keras backend functions Horovod's callbacks call, for Keras 3 and tf-keras values alike."""

    def get_value(self, value: Any) -> Any:
        """The value of a variable or tensor as numpy; anything else as it is."""
        value = unwrap_variable(value)
        return value.numpy() if hasattr(value, "numpy") else value

    def set_value(self, target: Any, value: Any) -> None:
        """Assigns ``value`` to a variable; a Python constant hyperparameter is left unchanged (see module doc)."""
        target = unwrap_variable(target)
        if hasattr(target, "assign"):
            target.assign(np.asarray(value, dtype=target.dtype.as_numpy_dtype))

    def __getattr__(self, name: str) -> Any:
        return getattr(tf.keras.backend, name)


_BACKEND = _KerasBackend()


class BroadcastGlobalVariablesCallback(_impl.BroadcastGlobalVariablesCallbackImpl, tf.keras.callbacks.Callback):
    """After the first batch, sets every model and optimizer variable to its value on ``root_rank``.

    Args:
        root_rank: Rank whose values every process takes.
        device: Device of the broadcast.
        local_variables: Variables (tf.Variable or Keras 3) that keep each rank's own value.

    Raises:
        ValueError: ``local_variables`` holds something that is not a variable (Horovod's error).
    """

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        super().__init__(_BACKEND, root_rank, device)
        if local_variables is None:
            local_variables = []
        elif isinstance(local_variables, tf.Variable) or is_keras3_variable(local_variables):
            local_variables = [local_variables]
        elif not all(isinstance(v, tf.Variable) or is_keras3_variable(v) for v in local_variables):
            raise ValueError("All local variables must be of tf.Variable type.")
        for variable in local_variables:
            self.register_local_var(variable)

    def register_local_var(self, var: Any) -> None:
        """Keeps ``var`` out of the broadcast."""
        super().register_local_var(unwrap_variable(var))

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        """Broadcasts once, after the first batch (the optimizer's variables exist by then)."""
        if self.broadcast_done or not _executing_eagerly():
            super().on_batch_end(batch, logs)
            return
        with tf.device(self.device):
            shared = [v for v in self.model.variables if unwrap_variable(v).ref() not in self._local_vars]
            broadcast_variables(shared, root_rank=self.root_rank)
            if getattr(self.model, "optimizer", None) is not None:
                broadcast_variables(optimizer_variables(self.model.optimizer), root_rank=self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(_impl.MetricAverageCallbackImpl, tf.keras.callbacks.Callback):
    """At the end of each epoch, replaces each metric in ``logs`` by its average over all ranks.

    Args:
        device: Device of the all-reduce.
    """

    def __init__(self, device: str = "") -> None:
        super().__init__(_BACKEND, device)


class LearningRateScheduleCallback(_impl.LearningRateScheduleCallbackImpl, tf.keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier`` from ``start_epoch`` to ``end_epoch`` (Horovod's).

    Args:
        initial_lr: Learning rate at the start of training.
        multiplier: A constant (exponential decay) or a function of the epoch.
        start_epoch: First epoch adjusted.
        end_epoch: Epoch where adjusting stops (exclusive), or None.
        staircase: Adjust once per epoch (True) or at every batch (False).
        momentum_correction: Scale momentum with the learning rate change (where momentum is a variable).
        steps_per_epoch: Batches per epoch, when Keras cannot tell.
    """

    def __init__(self, initial_lr: float, multiplier: Any, start_epoch: int = 0, end_epoch: int | None = None,
                 staircase: bool = True, momentum_correction: bool = True, steps_per_epoch: int | None = None
                 ) -> None:
        super().__init__(_BACKEND, initial_lr, multiplier, start_epoch, end_epoch, staircase,
                         momentum_correction, steps_per_epoch)


class LearningRateWarmupCallback(_impl.LearningRateWarmupCallbackImpl, tf.keras.callbacks.Callback):
    """Raises the learning rate from ``initial_lr / size()`` to ``initial_lr`` over ``warmup_epochs`` (Horovod's).

    Args:
        initial_lr: Learning rate reached at the end of the warm-up.
        warmup_epochs: Length of the warm-up in epochs.
        momentum_correction: Scale momentum with the learning rate change (where momentum is a variable).
        steps_per_epoch: Batches per epoch, when Keras cannot tell.
        verbose: 1 prints the end of the warm-up on rank 0.
    """

    def __init__(self, initial_lr: float, warmup_epochs: int = 5, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None, verbose: int = 0) -> None:
        super().__init__(_BACKEND, initial_lr, warmup_epochs, momentum_correction, steps_per_epoch, verbose)
