"""What differs between Keras 3 (``tf.keras`` in TF 2.21) and tf-keras (Keras 2, ``TF_USE_LEGACY_KERAS=1``).

SMDDP-era scripts call ``opt.variables()``: a method in Keras 2, a list property in Keras 3. After ``init()``, the
Keras 3 property returns a list that can also be called, so those scripts run unchanged on both.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CallableList",
    "make_optimizer_variables_callable",
    "is_keras3_optimizer",
    "optimizer_variables",
    "unwrap_variable",
]


class CallableList(list):
    """A list that returns itself when called: ``opt.variables`` and ``opt.variables()`` both work."""

    def __call__(self) -> "CallableList":
        return self


def _keras3_optimizer_base() -> type | None:
    try:
        import keras
    except ImportError:
        return None
    if not str(getattr(keras, "__version__", "0")).startswith("3"):
        return None
    return keras.optimizers.Optimizer


def make_optimizer_variables_callable() -> None:
    """Lets ``optimizer.variables()`` work on Keras 3 optimizers (idempotent)."""
    base = _keras3_optimizer_base()
    if base is None:
        return
    for klass in base.__mro__:
        prop = klass.__dict__.get("variables")
        if isinstance(prop, property):
            break
    else:
        return
    if getattr(prop.fget, "_smddp_callable", False):
        return
    original = prop.fget

    def variables(self: Any) -> CallableList:
        return CallableList(original(self))

    variables._smddp_callable = True  # type: ignore[attr-defined]
    variables.__doc__ = original.__doc__
    setattr(klass, "variables", property(variables, prop.fset, prop.fdel, prop.__doc__))


def is_keras3_optimizer(optimizer: Any) -> bool:
    """True for a Keras 3 optimizer instance."""
    base = _keras3_optimizer_base()
    return base is not None and isinstance(optimizer, base)


def optimizer_variables(optimizer: Any) -> list:
    """The optimizer's variables, whichever Keras it comes from."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def unwrap_variable(variable: Any) -> Any:
    """The ``tf.Variable`` behind a Keras 3 variable (or the variable itself)."""
    import tensorflow as tf

    if isinstance(variable, tf.Variable):
        return variable
    inner = getattr(variable, "value", None)
    if isinstance(inner, tf.Variable):
        return inner
    return variable
