"""Keras callbacks for Horovod-style scripts, on Keras 3 and on tf-keras.

``hvd.callbacks.BroadcastGlobalVariablesCallback(0)`` and ``hvd.callbacks.MetricAverageCallback()`` as in
``horovod.tensorflow.keras.callbacks``. The base class is whichever Keras ``tf.keras`` is in this process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from smddp_compat.keras_compat import optimizer_variables
from smddp_compat.tensorflow._ops import allreduce, broadcast_variables
from smddp_compat.tensorflow.state import require_init

__all__ = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback"]

_Callback = tf.keras.callbacks.Callback


class BroadcastGlobalVariablesCallback(_Callback):
    """After the first batch, sets the model's and the optimizer's variables to those of ``root_rank``.

    Args:
        root_rank: Rank whose variables every other rank takes.
        device: Ignored (kept for Horovod compatibility).
    """

    def __init__(self, root_rank: int, device: str = "") -> None:
        super().__init__()
        require_init("BroadcastGlobalVariablesCallback")
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        """Broadcasts once, after the optimizer has created its variables."""
        if self.broadcast_done:
            return
        broadcast_variables(self.model.variables, root_rank=self.root_rank)
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            broadcast_variables(optimizer_variables(optimizer), root_rank=self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(_Callback):
    """At the end of each epoch, replaces every metric in ``logs`` by its average over all ranks.

    Put it before callbacks that read metrics (checkpointing, early stopping, logging).
    """

    def __init__(self, device: str = "") -> None:
        super().__init__()
        require_init("MetricAverageCallback")
        self.device = device

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        """Averages the epoch's metrics in place, in the same (sorted) order on every rank."""
        if not logs:
            return
        for key in sorted(logs):
            value: Any = logs[key]
            if isinstance(value, (int, float, np.floating, np.integer)) or tf.is_tensor(value):
                reduced = allreduce(tf.constant(float(value), tf.float64), name=f"smddp.metric.{key}")
                logs[key] = float(reduced.numpy())
