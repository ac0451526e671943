"""``horovod.tensorflow.elastic``, with ``TensorFlowKerasState`` working on Keras 3 models.

Horovod's state broadcasts ``model.variables`` with its own ``broadcast_variables``, which fails on Keras 3
variables; here the broadcast goes through :func:`smddp_compat.horovod.variables.broadcast_variables`. Everything
else (``run``, ``TensorFlowState``, commit/restore/sync) is Horovod's.
"""

from __future__ import annotations

from typing import Any

from horovod.tensorflow import elastic as _elastic
from horovod.tensorflow.elastic import TensorFlowState, run
from horovod.tensorflow.util import _executing_eagerly

from smddp_compat.horovod.variables import broadcast_variables
from smddp_compat.keras_compat import optimizer_variables

__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]


class TensorFlowKerasState(_elastic.TensorFlowKerasState):
    """Horovod's state of a Keras model and optimizer (Keras 3 or tf-keras), synced from rank 0.

    Args:
        model: A built Keras model.
        optimizer: Its optimizer (default: ``model.optimizer``).
        backend: For graph mode (TensorFlow 1 style) only, as in Horovod.
        **kwargs: Further values to keep in sync, exposed as attributes.
    """

    def __init__(self, model: Any, optimizer: Any = None, backend: Any = None, **kwargs: Any) -> None:
        super().__init__(model, optimizer=optimizer, backend=backend, **kwargs)
        if not backend or _executing_eagerly():
            self._bcast_model = self._broadcast_model_and_optimizer

    def _broadcast_model_and_optimizer(self) -> None:
        broadcast_variables(self.model.variables, root_rank=0)
        broadcast_variables(optimizer_variables(self.optimizer), root_rank=0)
