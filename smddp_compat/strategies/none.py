"""Distribution ``none``: one process per host and nothing to coordinate (SageMaker's default)."""

from __future__ import annotations

from typing import Any

from smddp_compat.strategies._base import Strategy

__all__ = ["NoDistribution"]


class NoDistribution(Strategy):
    """One process per host, started as SageMaker starts a script without a ``distribution``."""

    name = "none"
    title = "no distribution"
    one_process_per_host = True

    def to_sdk_dict(self, config: Any) -> None:
        """No dictionary: the SDK's default."""
        return None

    def estimator_distribution(self, config: Any) -> None:
        """No dictionary: the SDK's default."""
        return None
