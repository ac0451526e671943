"""``horovod.tensorflow.keras.elastic``, with ``KerasState`` working on Keras 3 models.

``KerasState`` is built on :class:`smddp_compat.horovod.tensorflow.elastic.TensorFlowKerasState`; the callbacks
(``CommitStateCallback``, ``UpdateBatchStateCallback``, ``UpdateEpochStateCallback``) and ``run`` are Horovod's.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from horovod.tensorflow.keras.elastic import CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback

from smddp_compat.horovod.tensorflow.elastic import TensorFlowKerasState, run

__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]


class KerasState(TensorFlowKerasState):
    """State of a ``tf.keras`` model and optimizer (Keras 3 or tf-keras), as in Horovod.

    Args:
        model: A built Keras model.
        optimizer: Its optimizer (default: the one compiled into the model).
        **kwargs: Further values to keep in sync, exposed as attributes.
    """

    def __init__(self, model: Any, optimizer: Any = None, **kwargs: Any) -> None:
        super().__init__(model, optimizer=optimizer, backend=tf.keras.backend, **kwargs)
