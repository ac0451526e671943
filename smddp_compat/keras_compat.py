"""What differs between Keras 3 (``tf.keras`` in TF 2.21) and tf-keras (Keras 2, ``TF_USE_LEGACY_KERAS=1``).

Keras 2-era scripts (SMDDP's and Horovod's documented recipes, Horovod's own tests) use things Keras 3 dropped;
after ``init()`` they work again on Keras 3 (nothing changes on tf-keras):

- ``opt.variables()``: a method in Keras 2, a list property in Keras 3. The property returns a list that can also
  be called.
- ``opt.lr`` and ``SGD(lr=0.1)``: Keras 2's alias of ``learning_rate`` (Horovod's learning-rate callbacks read and
  set it; Horovod's Keras examples pass it).
- ``model.compile(..., experimental_run_tf_function=False)``: Horovod's documentation tells every Keras script to
  pass it; Keras 3 refuses unknown arguments. It only ever mattered to Keras 2, so Keras 3 now ignores it.
- ``variable.ref()`` and variables as ``Session.run`` fetches: Keras 2 variables were ``tf.Variable``s, whose
  ``ref()`` gives a hashable key (Horovod and scripts key gradients and local variables by it) and which a
  ``tf.compat.v1`` session can fetch; a Keras 3 variable now does both through its ``tf.Variable``.
- ``tf.keras.losses.mean_squared_error`` (and the other loss functions ``keras.losses`` has but Keras 3's
  ``tf.keras.losses`` namespace lacks): Horovod's Keras tests and examples call them there.
- ``BatchNormalization(fused=False)``: Keras 2's choice of kernel, which Keras 3 refuses; Keras 3 has one kernel,
  so the argument is accepted and ignored (Horovod's SyncBatchNormalization recipe passes it).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CallableList", "adapt_keras3_for_keras2_scripts", "make_optimizer_variables_callable", "keras3_module",
    "tf_keras_module", "is_keras3_variable", "keras_layer_types", "is_keras3_optimizer", "optimizer_variables",
    "unwrap_variable",
]


class CallableList(list):
    """A list that returns itself when called: ``opt.variables`` and ``opt.variables()`` both work."""

    def __call__(self) -> "CallableList":
        return self


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


def _keras3_optimizer_base() -> type | None:
    keras = keras3_module()
    return None if keras is None else keras.optimizers.Optimizer


def is_keras3_variable(value: Any) -> bool:
    """True for a Keras 3 variable (which wraps a ``tf.Variable`` and has no ``.ref()``)."""
    keras = keras3_module()
    return keras is not None and isinstance(value, keras.Variable)


def keras_layer_types() -> tuple[type, ...]:
    """The Layer base classes of every Keras in this process (Keras 3 and, when installed, tf-keras)."""
    return tuple(keras.layers.Layer for keras in (keras3_module(), tf_keras_module()) if keras is not None)


def adapt_keras3_for_keras2_scripts() -> None:
    """Applies the Keras 3 adaptations listed in the module docstring (idempotent; no-op without Keras 3)."""
    make_optimizer_variables_callable()
    _add_optimizer_lr_alias()
    _accept_legacy_compile_arguments()
    _add_variable_ref()
    _accept_batch_normalization_fused()
    _complete_tf_keras_losses()


def _complete_tf_keras_losses() -> None:
    keras = keras3_module()
    if keras is None:
        return
    import tensorflow as tf

    tf_keras_losses = tf.keras.losses
    if tf_keras_losses is keras.losses or not tf.keras.__name__.startswith("keras"):
        return
    for name in dir(keras.losses):
        if not name.startswith("_") and not hasattr(tf_keras_losses, name):
            setattr(tf_keras_losses, name, getattr(keras.losses, name))


def _add_variable_ref() -> None:
    keras = keras3_module()
    if keras is None or hasattr(keras.Variable, "ref"):
        return
    import tensorflow as tf

    def backing_variable(variable: Any) -> Any:
        inner = getattr(variable, "_value", None)
        if not isinstance(inner, tf.Variable):
            raise TypeError(f"{variable.path!r} is not backed by a tf.Variable")
        return inner

    def ref(self: Any) -> Any:
        return backing_variable(self).ref()

    def as_graph_element(self: Any) -> Any:
        return backing_variable(self)._as_graph_element()  # noqa: SLF001 - TF's fetch protocol

    ref.__doc__ = "The ``ref()`` of the ``tf.Variable`` behind this variable (a hashable key, as in Keras 2)."
    keras.Variable.ref = ref
    keras.Variable._as_graph_element = as_graph_element


def _accept_batch_normalization_fused() -> None:
    keras = keras3_module()
    if keras is None:
        return
    klass = keras.layers.BatchNormalization
    original = klass.__dict__["__init__"]
    if getattr(original, "_smddp_accepts_fused", False):
        return

    def __init__(self: Any, *args: Any, fused: Any = None, **kwargs: Any) -> None:  # noqa: N807
        original(self, *args, **kwargs)

    __init__._smddp_accepts_fused = True  # type: ignore[attr-defined]
    __init__.__doc__ = original.__doc__
    klass.__init__ = __init__


def _add_optimizer_lr_alias() -> None:
    base = _keras3_optimizer_base()
    if base is None or hasattr(base, "lr"):
        return

    def get_lr(self: Any) -> Any:
        return self.learning_rate

    def set_lr(self: Any, value: Any) -> None:
        self.learning_rate = value

    base.lr = property(get_lr, set_lr, doc="Keras 2's name of ``learning_rate``.")
    for klass in base.__mro__:
        if "__init__" in klass.__dict__ and "learning_rate" in klass.__init__.__code__.co_varnames:
            break
    original = klass.__dict__["__init__"]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        if "lr" in kwargs:
            kwargs["learning_rate"] = kwargs.pop("lr")
            args = args[1:]  # lr= replaces the learning rate, given by name or first by position
        original(self, *args, **kwargs)

    __init__.__doc__ = original.__doc__
    klass.__init__ = __init__


#: Arguments of Keras 2's ``Model.compile`` that have no meaning in Keras 3.
_LEGACY_COMPILE_ARGUMENTS = ("experimental_run_tf_function",)


def _accept_legacy_compile_arguments() -> None:
    keras = keras3_module()
    if keras is None:
        return
    for klass in keras.Model.__mro__:
        if "compile" in klass.__dict__:
            break
    original = klass.__dict__["compile"]
    if getattr(original, "_smddp_legacy_arguments", False):
        return

    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A001 - Keras's name
        for name in _LEGACY_COMPILE_ARGUMENTS:
            kwargs.pop(name, None)
        return original(self, *args, **kwargs)

    compile._smddp_legacy_arguments = True  # type: ignore[attr-defined]
    compile.__doc__ = original.__doc__
    setattr(klass, "compile", compile)


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
