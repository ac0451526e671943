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
- ``metric.reset_states()``: Keras 2's name of ``reset_state()`` (AWS's SMDDP TF2 custom-loop example resets its
  metrics with it each epoch).
- ``BatchNormalization(fused=False)``: Keras 2's choice of kernel, which Keras 3 refuses; Keras 3 has one kernel,
  so the argument is accepted and ignored (Horovod's SyncBatchNormalization recipe passes it).
- ``model.save(path)`` (and ``tf.keras.models.save_model``) with a path without ``.keras``/``.h5``: Keras 2 wrote a
  TensorFlow SavedModel there (what TF Serving and SageMaker's TF serving images load; SageMaker's examples end with
  ``model.save(os.path.join(SM_MODEL_DIR, "1"))``); Keras 3 refuses the path. Such a path now gets Keras 3's
  ``model.export(path, format="tf_saved_model")`` (a ``serving_default`` signature, no optimizer), said once on the
  console; ``SMDDP_KERAS3_SAVEDMODEL=0`` restores Keras 3's refusal. ``overwrite=False`` on an existing path raises
  FileExistsError instead of asking on the terminal.
- ``jit_compile``: Keras 3 resolves ``"auto"`` (its default) to XLA when a GPU is present, and Horovod's ops (in
  the distributed optimizer, the tape, a ``train_step``) cannot be compiled by XLA. ``"auto"`` now resolves to no
  XLA, as Keras 2 always did; ``jit_compile=True`` with the kit's distributed optimizer raises a UsageError
  naming ``jit_compile=False``, and so does the kit's all-reduce of gradients traced under XLA
  (:func:`refuse_xla_compilation`).
  ``HOROVOD_ENABLE_XLA_OPS=1`` (Horovod's own XLA ops, GPU builds) leaves ``jit_compile`` to Keras.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from smddp_compat.errors import UsageError
from smddp_compat.keras_flavor import keras3_module, tf_keras_module

__all__ = [
    "CallableList", "adapt_keras3_for_keras2_scripts", "make_optimizer_variables_callable", "is_keras3_variable", "keras_layer_types", "is_keras3_optimizer", "optimizer_variables",
    "unwrap_variable", "mark_distributed_optimizer", "is_distributed_optimizer", "SAVEDMODEL_OPT_OUT",
    "SAVEDMODEL_NOTE", "XLA_REFUSED", "HOROVOD_XLA_OPS", "refuse_xla_compilation",
]

#: Set to ``0`` in a job's environment, Keras 3's ``model.save`` refuses extension-less paths again.
SAVEDMODEL_OPT_OUT = "SMDDP_KERAS3_SAVEDMODEL"

#: Printed once per process, at the first extension-less ``model.save``.
SAVEDMODEL_NOTE = (
    "smddp-compat: model.save({path!r}) has no .keras/.h5 extension: wrote a TensorFlow SavedModel for TF Serving "
    "there (Keras 3's model.export), as Keras 2 did; {opt_out}=0 restores Keras 3's refusal"
)

#: The error of ``jit_compile=True`` where Horovod's ops would be compiled (``{where}``: which of them).
XLA_REFUSED = (
    "jit_compile=True: XLA cannot compile Horovod's ops ({where}). Fix: pass jit_compile=False to model.compile() "
    "or tf.function (after init(), Keras 3's default jit_compile resolves to no XLA)"
)

#: Horovod's own switch for its experimental XLA ops (GPU builds only); set, the kit leaves ``jit_compile`` to Keras.
HOROVOD_XLA_OPS = "HOROVOD_ENABLE_XLA_OPS"

#: Attribute of the kit's distributed optimizer classes (both faces).
_DISTRIBUTED_MARK = "_smddp_distributed"


class CallableList(list):
    """A list that returns itself when called: ``opt.variables`` and ``opt.variables()`` both work."""

    def __call__(self) -> "CallableList":
        return self


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
    _add_metric_reset_states()
    _accept_batch_normalization_fused()
    _complete_tf_keras_losses()
    _save_extensionless_paths_as_savedmodel()
    _keep_xla_off_for_horovod()


def mark_distributed_optimizer(optimizer_class: type) -> None:
    """Marks `optimizer_class` as one of the kit's distributed optimizers (whose ``apply`` runs Horovod's ops)."""
    setattr(optimizer_class, _DISTRIBUTED_MARK, True)


def is_distributed_optimizer(optimizer: Any) -> bool:
    """True for the kit's distributed optimizer, also inside Keras 3's ``LossScaleOptimizer``."""
    inner = getattr(optimizer, "inner_optimizer", None)
    return bool(getattr(optimizer, _DISTRIBUTED_MARK, False)) or (inner is not None and is_distributed_optimizer(inner))


def _horovod_xla_ops_enabled() -> bool:
    """Whether Horovod's own XLA ops are switched on (``HOROVOD_ENABLE_XLA_OPS``), so XLA may compile its ops."""
    return os.environ.get(HOROVOD_XLA_OPS, "0") not in ("", "0")


def refuse_xla_compilation(operation: str) -> None:
    """Raises when Horovod's all-reduce of gradients is being traced into a function that XLA compiles.

    Args:
        operation: What is being traced (named in the error).

    Raises:
        UsageError: XLA would compile it (and Horovod's own XLA ops are not switched on).
    """
    # TensorFlow is kept out of this light module's import; GraphOrParentsInXlaContext has no public equivalent.
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    if (not tf.executing_eagerly() and not _horovod_xla_ops_enabled()
            and control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())):
        raise UsageError(XLA_REFUSED.format(where=operation))


def _keep_xla_off_for_horovod() -> None:
    keras = keras3_module()
    if keras is None or _horovod_xla_ops_enabled():
        return
    # The class that resolves jit_compile (Keras 3's private module).
    from keras.src.trainers.trainer import Trainer

    prop = Trainer.__dict__["jit_compile"]
    if getattr(prop.fset, "_smddp_checked", False):
        return
    keras_setter = prop.fset

    def set_jit_compile(self: Any, value: Any) -> None:
        if value and is_distributed_optimizer(getattr(self, "optimizer", None)):
            raise UsageError(XLA_REFUSED.format(where="the distributed optimizer"))
        keras_setter(self, value)

    def resolve_auto_jit_compile(self: Any) -> bool:
        return False

    set_jit_compile._smddp_checked = True  # type: ignore[attr-defined]
    Trainer.jit_compile = property(prop.fget, set_jit_compile, prop.fdel, prop.__doc__)
    Trainer._resolve_auto_jit_compile = resolve_auto_jit_compile


def _save_extensionless_paths_as_savedmodel() -> None:
    keras = keras3_module()
    if keras is None:
        return
    # Model.save calls this module's save_model (Keras 3's private module).
    from keras.src.saving import saving_api

    keras_save_model = saving_api.save_model
    if getattr(keras_save_model, "_smddp_savedmodel", False):
        return
    printed_note = []

    def save_model(model: Any, filepath: Any, overwrite: bool = True, zipped: Any = None, **kwargs: Any) -> Any:
        path = str(filepath) if isinstance(filepath, (str, os.PathLike)) else ""
        if (not path or zipped is not None or os.environ.get(SAVEDMODEL_OPT_OUT, "1") == "0"
                or path.endswith((".keras", ".h5", ".hdf5")) or path.startswith("hf://")
                or kwargs.get("save_format") not in (None, "tf", "tensorflow")
                or set(kwargs) - {"save_format", "include_optimizer"}):
            return keras_save_model(model, filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"model.save({path!r}, overwrite=False): {path} exists; pass overwrite=True or "
                                  "another path")
        model.export(path, format="tf_saved_model", verbose=False)
        if not printed_note:
            printed_note.append(True)
            print(SAVEDMODEL_NOTE.format(path=path, opt_out=SAVEDMODEL_OPT_OUT), file=sys.stderr, flush=True)
        return None

    save_model._smddp_savedmodel = True  # type: ignore[attr-defined]
    save_model.__doc__ = keras_save_model.__doc__
    saving_api.save_model = save_model
    for public in (keras.saving, keras.models):
        if getattr(public, "save_model", None) is keras_save_model:
            public.save_model = save_model


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


def _add_metric_reset_states() -> None:
    keras = keras3_module()
    if keras is None or hasattr(keras.metrics.Metric, "reset_states"):
        return

    def reset_states(self: Any) -> None:
        self.reset_state()

    reset_states.__doc__ = "Keras 2's name of ``reset_state()``."
    keras.metrics.Metric.reset_states = reset_states


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
