"""Which Keras is this: Keras 3 (``tf.keras`` in TensorFlow 2.21) or tf-keras (Keras 2, ``TF_USE_LEGACY_KERAS=1``).

The one place the kit decides it; the faces, the entry points, the Keras 3 adaptation, local mode, the image and
``smddp doctor`` all ask here. Standard library only at import time (Keras and TensorFlow are imported by the
functions that need them), so a job's start-up can ask before TensorFlow is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LEGACY_KERAS_VARIABLE", "selects_tf_keras", "keras3_module", "tf_keras_module", "is_keras3", "keras_name",
]

#: TensorFlow's switch: set to one of :data:`_TRUE`, ``tf.keras`` is tf-keras (Keras 2) instead of Keras 3.
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
#: The values TensorFlow reads as "tf-keras" (``tensorflow/__init__.py``).
_TRUE = ("1", "true", "True")


def selects_tf_keras(env: Mapping[str, str] | None = None) -> bool:
    """Whether `env` (default: ``os.environ``) makes ``tf.keras`` tf-keras (Keras 2) rather than Keras 3."""
    env = os.environ if env is None else env
    return env.get(LEGACY_KERAS_VARIABLE, "") in _TRUE


def keras3_module() -> Any:
    """The ``keras`` package when it is Keras 3, else None."""
    try:
        import keras
    except ImportError:
        return None
    if not str(getattr(keras, "__version__", "0")).startswith("3"):
        return None
    return keras


def tf_keras_module() -> Any:
    """The ``tf_keras`` package (Keras 2) when it is installed, else None."""
    try:
        import tf_keras
    except ImportError:
        return None
    return tf_keras


def is_keras3() -> bool:
    """Whether ``tf.keras`` is Keras 3 in this process (``False``: tf-keras); imports TensorFlow."""
    import tensorflow as tf

    return not tf.keras.__name__.startswith("tf_keras")


def keras_name() -> str:
    """``"keras-3.x.y"`` or ``"tf-keras-2.x.y"``: the Keras behind ``tf.keras``, for logs."""
    if is_keras3():
        return f"keras-{keras3_module().__version__}"
    return f"tf-keras-{tf_keras_module().__version__}"
