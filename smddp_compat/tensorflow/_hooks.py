"""BroadcastGlobalVariablesHook for tf.compat.v1 sessions (MonitoredTrainingSession)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from smddp_compat.tensorflow._ops import broadcast_global_variables

__all__ = ["BroadcastGlobalVariablesHook"]


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts all global variables from ``root_rank`` once the session is created.

    Args:
        root_rank: Rank whose values every other rank takes.
        device: Ignored (kept for Horovod compatibility).
    """

    def __init__(self, root_rank: int, device: str = "") -> None:
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op: Any = None

    def begin(self) -> None:
        """Builds the broadcast op in the session's graph."""
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Runs the broadcast once, right after variables are initialized or restored."""
        session.run(self.bcast_op)
