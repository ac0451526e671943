"""The differences between Keras 3 (``tf.keras`` by default in TF 2.21) and tf-keras (``TF_USE_LEGACY_KERAS=1``)
that the training scripts have to bridge. Everything else they write once against ``tf.keras``. Which Keras this is
comes from :mod:`smddp_compat.keras_flavor`; what the kit itself bridges is :mod:`smddp_compat.keras_compat`
(``optimizer_variables`` is its).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from smddp_compat.keras_compat import optimizer_variables  # the kit's one rule: a property in Keras 3, a method in 2
from smddp_compat.keras_flavor import is_keras3, keras_name

__all__ = ["is_keras3", "keras_name", "optimizer_variables", "build_optimizer"]


def build_optimizer(optimizer: Any, trainable_variables: Sequence[tf.Variable]) -> None:
    """Creates the optimizer's slot variables now (so a checkpoint restores into them instead of deferring)."""
    if not getattr(optimizer, "built", False):
        optimizer.build(list(trainable_variables))
