"""The differences between Keras 3 (``tf.keras`` by default in TF 2.21) and tf-keras (``TF_USE_LEGACY_KERAS=1``)
that the training scripts have to bridge. Everything else they write once against ``tf.keras``. What the kit itself
bridges is :mod:`smddp_compat.keras_compat`; ``optimizer_variables`` is its.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from smddp_compat.keras_compat import optimizer_variables  # the kit's one rule: a property in Keras 3, a method in 2

__all__ = ["is_keras3", "keras_name", "optimizer_variables", "build_optimizer"]


def is_keras3() -> bool:
    """Whether ``tf.keras`` is Keras 3 (``False``: tf-keras, i.e. Keras 2, selected by ``TF_USE_LEGACY_KERAS=1``)."""
    return not tf.keras.__name__.startswith("tf_keras")


def keras_name() -> str:
    """``"keras-3.x.y"`` or ``"tf-keras-2.x.y"``, for logs."""
    if is_keras3():
        import keras

        return f"keras-{keras.__version__}"
    import tf_keras

    return f"tf-keras-{tf_keras.__version__}"


def build_optimizer(optimizer: Any, trainable_variables: Sequence[tf.Variable]) -> None:
    """Creates the optimizer's slot variables now (so a checkpoint restores into them instead of deferring)."""
    if not getattr(optimizer, "built", False):
        optimizer.build(list(trainable_variables))
