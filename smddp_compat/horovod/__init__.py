"""The Horovod face of the kit: Horovod 0.28.1's TensorFlow API, with Horovod's semantics, on TF 2.21 and Keras 3.

One import line changes in a Horovod script: ``horovod.`` becomes ``smddp_compat.horovod.`` (for
``horovod.tensorflow``, ``horovod.tensorflow.keras`` and ``horovod.keras``; docs/migrating-from-horovod.md).

Everything comes from Horovod itself (collectives, process sets, ``join``, timeline, elastic ``run``, errors such
as ``tf.errors.FailedPreconditionError``...), except the names in :data:`OVERRIDES`: the places where Keras 3 or
TensorFlow 2.21 break Horovod 0.28.1, each with what breaks and what the kit does. ``python -m
smddp_compat.horovod`` prints that list as a table; a test checks it against the names the face modules define.

The SMDDP face (``smddp_compat.tensorflow``, SMDDP's documented semantics: a second ``init()`` raises) shares the
same process state: after either face's ``init()`` the other sees the job initialized.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Override", "OVERRIDES", "overrides_table"]


class Override(NamedTuple):
    """One name the Horovod face defines instead of taking Horovod's."""

    modules: str
    name: str
    breaks: str
    fix: str


_TF = "tensorflow"
_KERAS = "tensorflow.keras"
_BOTH = "tensorflow, tensorflow.keras"

#: Every override of the Horovod face (module paths relative to ``smddp_compat.horovod``).
OVERRIDES: tuple[Override, ...] = (
    Override(_BOTH, "init", "Run alone (no launcher), Horovod built with MPI tries MPI singleton mode, which Open MPI "
             "refuses as root. Keras 3 lacks what Horovod's recipes and tests write in Keras 2: `opt.variables()`, "
             "`opt.lr`, `Adam(lr=...)`, `compile(experimental_run_tf_function=False)`, `variable.ref()`, variables as "
             "`tf.compat.v1` session fetches, `tf.keras.losses.mean_squared_error`, "
             "`BatchNormalization(fused=False)`, `model.save(dir)` writing a SavedModel. Keras 3 turns XLA on for "
             "`fit` on GPU hosts, and XLA cannot compile Horovod's ops.",
             "Chooses Gloo for a lone process, calls Horovod's init (repeat calls allowed, as in Horovod), makes "
             "those Keras 2 spellings work on Keras 3 and keeps `jit_compile` off XLA where Horovod's ops run "
             "(`smddp_compat.keras_compat`), and marks the SMDDP face initialized."),
    Override(_BOTH, "shutdown", "-", "Horovod's shutdown, and the SMDDP face's state reset with it."),
    Override(_TF, "broadcast_variables", "Keras 3 variables are read as symbolic tensors inside Horovod's "
             "tf.function: `'SymbolicTensor' object has no attribute 'assign'`.",
             "Hands Horovod the `tf.Variable` inside each Keras 3 variable."),
    Override(_TF, "DistributedGradientTape", "Gradients are keyed by `variable.ref()`; Keras 3 variables have none "
             "(`'Variable' object has no attribute 'ref'`); `groups` of Keras 3 variables fail the same way.",
             "Horovod's tape, whose `gradient`, `register_local_source` and `get_local_and_global_gradients` hand "
             "Horovod the `tf.Variable`s; sources may also be nested or a single variable."),
    Override(_TF, "PartialDistributedGradientTape", "As DistributedGradientTape; `local_layers` must be "
             "`tf.keras` layers of the Keras in use.",
             "Built on the tape above; layers of Keras 3 or tf-keras accepted."),
    Override(_TF, "DistributedOptimizer", "Keras 3 optimizers: as for `tensorflow.keras.DistributedOptimizer`.",
             "Keras 3 optimizers: as `tensorflow.keras.DistributedOptimizer`; others: Horovod's own."),
    Override(_KERAS, "DistributedOptimizer", "Horovod all-reduces in `_aggregate_gradients`/`get_gradients`/"
             "`_compute_gradients`, which Keras 3 never calls: gradients are never all-reduced; "
             "`backward_passes_per_step` aggregation never happens; `register_local_var` needs `.ref()`.",
             "Horovod's own subclass (its reduction, groups, process sets, local variables, aggregation helper) "
             "gets Keras 3's `apply` (reduce, or accumulate and apply every N steps, counting iterations as "
             "Horovod does), `apply_gradients`, and Keras 2's `_compute_gradients`."),
    Override(_KERAS, "PartialDistributedOptimizer", "Only in `horovod.keras`; needs `.ref()` on Keras 3 variables.",
             "Built on the optimizer above; also in `tensorflow.keras`."),
    Override(_KERAS, "load_model", "Horovod passes lower-cased optimizer names in `custom_objects`; Keras 3 and "
             "tf-keras 2.21 look optimizers up by class name: the model comes back with a plain, non-distributed "
             "optimizer (ranks silently diverge).",
             "Loads with Keras, then replaces the optimizer by a DistributedOptimizer of the same class and config "
             "holding the loaded state (`legacy_opts=True`: Horovod's own)."),
    Override(_KERAS, "callbacks", "Horovod hands its callbacks `keras.backend`, which in Keras 3 has no "
             "`get_value`/`set_value`/`constant` (metric average and learning-rate callbacks fail, on tf-keras "
             "too); the broadcast callback calls `.ref()` and Horovod's broadcast on Keras 3 variables.",
             "Horovod's callback logic with a backend that reads and sets Keras 3 and tf-keras values; broadcast "
             "through the fixed `broadcast_variables`; `local_variables` may be Keras 3 variables."),
    Override(_BOTH, "elastic", "`TensorFlowKerasState`/`KerasState` broadcast Keras 3 variables with Horovod's "
             "broadcast (fails as above).",
             "Horovod's elastic module with the Keras states broadcasting through the fixed `broadcast_variables`."),
    Override(_TF, "SyncBatchNormalization", "Overrides Keras 2's private `_moments(inputs, axes, keep_dims)` and "
             "passes `fused=False`; Keras 3's BatchNormalization has neither: the layer cannot be built.",
             "On Keras 3, a BatchNormalization whose `_moments(inputs, mask)` all-reduces sums, squares and counts "
             "over the process set; on tf-keras, Horovod's own class."),
)


def overrides_table() -> str:
    """:data:`OVERRIDES` as a Markdown table."""
    lines = ["| module(s) | name | what breaks in Horovod 0.28.1 on TF 2.21 / Keras 3 | what the kit does |",
             "|---|---|---|---|"]
    lines += [f"| {o.modules} | `{o.name}` | {o.breaks} | {o.fix} |" for o in OVERRIDES]
    return "\n".join(lines)
