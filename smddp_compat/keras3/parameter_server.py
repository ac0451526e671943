"""Keras 3 ``fit`` and ``evaluate`` under ParameterServerStrategy, through a ``ClusterCoordinator`` (to be built)."""

from __future__ import annotations

from types import ModuleType

__all__ = ["adapt"]


def adapt(trainer_module: ModuleType) -> None:
    """Adapts Keras 3's `trainer_module` for ParameterServerStrategy (not yet: Keras's own behaviour)."""
