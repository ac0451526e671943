"""The SageMaker SDK v2's deprecation notices that the kit's own wrapping causes, quieted through the SDK's setting.

SDK v2 (2.257+) prints a "you are using the SageMaker Python SDK v2, which is on path of deprecation" notice when the
``sagemaker`` package is first imported, and a "<Class> is part of the SageMaker Python SDK v2" notice the first time
each estimator class is built (``sagemaker.deprecations.warn_v2_deprecation``). Each is shown twice: once as a
``SageMakerV2DeprecationWarning`` (a ``FutureWarning``) and once more through the ``sagemaker.deprecations`` logger.

When the user only wrote ``from smddp_compat.estimators import TensorFlow``, both come from the kit: its import of
``sagemaker.tensorflow`` and its subclass's call of the SDK constructor. The kit quiets exactly those two calls
with the SDK's own switch, the ``SAGEMAKER_SUPPRESS_V2_WARNING`` environment variable
(``sagemaker.deprecations.SUPPRESS_V2_WARNING_ENV_VAR``), set only while the call runs and removed afterwards.
While it is set the SDK neither warns nor records the feature as warned, so the user's own direct use of SDK v2
(``sagemaker.tensorflow.TensorFlow(...)``, ``sagemaker.model.Model(...)``) still warns as the SDK decides. A user
who set the variable keeps it as set.

Standard library only: this module must not import ``sagemaker`` (that import is what prints the first notice).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

__all__ = ["SUPPRESS_V2_WARNING_ENV_VAR", "sdk_v2_notices_quieted"]

#: The SDK's switch for its v2 -> v3 notices (``sagemaker.deprecations.SUPPRESS_V2_WARNING_ENV_VAR``; written out
#: here because importing ``sagemaker.deprecations`` imports ``sagemaker``, which prints the notice).
SUPPRESS_V2_WARNING_ENV_VAR = "SAGEMAKER_SUPPRESS_V2_WARNING"

_lock = threading.RLock()
_depth = 0


@contextlib.contextmanager
def sdk_v2_notices_quieted() -> Iterator[None]:
    """Runs the block with the SDK's v2 deprecation notices switched off, then restores the environment.

    Nested and concurrent uses share one setting: the variable is removed when the last one ends. A value the user
    set (in the environment before the block) is never changed.
    """
    global _depth
    with _lock:
        owned = _depth > 0 or SUPPRESS_V2_WARNING_ENV_VAR not in os.environ  # else: the user's own setting
        if owned:
            if _depth == 0:
                os.environ[SUPPRESS_V2_WARNING_ENV_VAR] = "1"
            _depth += 1
    try:
        yield
    finally:
        if owned:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    os.environ.pop(SUPPRESS_V2_WARNING_ENV_VAR, None)
