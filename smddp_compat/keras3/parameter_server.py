"""Keras 3 ``fit`` and ``evaluate`` under ParameterServerStrategy, their steps scheduled through a
``ClusterCoordinator`` as tf-keras schedules them.

Keras 3.15's TensorFlow trainer has no parameter-server path (keras-team/keras#18624): its ``fit`` runs every step
on the coordinator and refuses a dataset function. Here, when the model's strategy is one that runs with a
coordinator (``ParameterServerStrategy``), ``fit`` and ``evaluate`` do what tf-keras's do:

- The input is a dataset function (``dataset_fn(input_context) -> tf.data.Dataset``, tf-keras's ``DatasetCreator``
  is one) or a ``tf.data.Dataset``; each worker builds its own copy
  (``ClusterCoordinator.create_per_worker_dataset``). Arrays are refused in one line, as tf-keras refuses them.
- ``steps_per_epoch`` (``steps`` for ``evaluate``) is required for a dataset function (a worker's dataset may be
  endless, and no worker can tell the coordinator it ran out); a ``tf.data.Dataset`` of known size gives it.
- Each step (``steps_per_execution`` of them) is one function scheduled on whichever worker is free; the
  coordinator waits for all of them at the end of the epoch. The model's variables, the optimizer's and the metrics'
  live on the parameter servers, so the epoch's logs (read from the metrics once every step ran) are the global ones.
- ``predict`` runs on the coordinator, as tf-keras's does (the model's variables read from the parameter
  servers), with Keras's own ``predict`` outside the strategy (called outside ``strategy.scope()``).
- Batch-level callback hooks are called without values (fetching a step's values would wait for that step, which
  is what scheduling avoids); epoch-level hooks get the epoch's global logs. ``verbose="auto"`` is 2, one line per
  epoch, as in tf-keras.
- The model is built on the coordinator from one batch of the input (its shapes and dtypes), under the strategy's
  scope, so every variable is created on the parameter servers before any step is scheduled.
- A Keras 3 variable adds with a read and a write (``assign(self + value)``); on a parameter server, steps of
  several workers then lose each other's additions (a metric's total and count drift apart: an accuracy above 1).
  Under a coordinator strategy ``assign_add``/``assign_sub`` use the ``tf.Variable``'s own atomic ones, as tf-keras's
  variables do.
- A Keras 3 variable is one ``tf.Variable`` (its gradient is taken through its handle), so the strategy's
  ``variable_partitioner`` does not shard it: each Keras variable is placed whole on one parameter server (the
  strategy's round-robin placement), said once on standard error. Variables created outside Keras are still sharded.

A custom loop (``coordinator.schedule`` of a ``strategy.run`` step) with Keras 3 layers, optimizers and metrics
needs nothing from here.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType
from typing import Any, Callable

import tensorflow as tf

from smddp_compat.errors import ConfigurationError
from smddp_compat.keras3.releases import untested_keras_refusal

__all__ = ["adapt", "uses_coordinator", "UNSHARDED"]

_STRATEGY_NAME = "ParameterServerStrategy"


def uses_coordinator(strategy: Any) -> bool:
    """Whether `strategy` runs its steps through a ``ClusterCoordinator`` (ParameterServerStrategy)."""
    return bool(getattr(strategy, "_should_use_with_coordinator", False))


def adapt(trainer_module: ModuleType) -> None:
    """Routes ``fit``, ``evaluate`` and ``predict`` of Keras 3's TensorFlow trainer under a coordinator strategy, and
    adapts its variables (once)."""
    trainer = trainer_module.TensorFlowTrainer
    if getattr(trainer.fit, "_smddp_parameter_server", False):
        return
    keras_fit, keras_evaluate, keras_predict = trainer.fit, trainer.evaluate, trainer.predict

    @functools.wraps(keras_fit)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not uses_coordinator(self.distribute_strategy):
            return keras_fit(self, *args, **kwargs)
        return _Coordinated(self, trainer_module).fit(*args, **kwargs)

    @functools.wraps(keras_evaluate)
    def evaluate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not uses_coordinator(self.distribute_strategy):
            return keras_evaluate(self, *args, **kwargs)
        return _Coordinated(self, trainer_module).evaluate(*args, **kwargs)

    @functools.wraps(keras_predict)
    def predict(self: Any, *args: Any, **kwargs: Any) -> Any:
        strategy = self._distribute_strategy
        if not uses_coordinator(strategy):
            return keras_predict(self, *args, **kwargs)
        self._distribute_strategy = None  # Keras's own predict, on the coordinator
        try:
            return keras_predict(self, *args, **kwargs)
        finally:
            self._distribute_strategy = strategy

    fit._smddp_parameter_server = True  # type: ignore[attr-defined]
    trainer.fit, trainer.evaluate, trainer.predict = fit, evaluate, predict
    _adapt_variables()


#: Said once, when a Keras variable is created whole under a strategy that would shard it.
UNSHARDED = ("smddp-compat: Keras 3 variables are not sharded by ParameterServerStrategy's variable_partitioner (a "
             "Keras 3 variable is one tf.Variable); each is placed whole on one parameter server")


def _adapt_variables() -> None:
    from keras.src.backend.common.stateless_scope import in_stateless_scope
    from keras.src.backend.tensorflow.core import Variable

    keras_initialize = Variable._initialize
    said: list[bool] = []

    @functools.wraps(keras_initialize)
    def initialize(self: Any, value: Any) -> Any:
        strategy = tf.distribute.get_strategy()
        extended = strategy.extended
        partitioner = getattr(extended, "_variable_partitioner", None)
        if partitioner is None or not uses_coordinator(strategy):
            return keras_initialize(self, value)
        if not said:
            said.append(True)
            print(UNSHARDED, file=sys.stderr, flush=True)
        extended._variable_partitioner = None  # noqa: SLF001 - the strategy's own switch, for this variable only
        try:
            return keras_initialize(self, value)
        finally:
            extended._variable_partitioner = partitioner  # noqa: SLF001

    Variable._initialize = initialize

    def atomic(keras_update: Callable[[Any, Any], Any], tf_update: str) -> Callable[[Any, Any], Any]:
        @functools.wraps(keras_update)
        def update(self: Any, value: Any) -> Any:
            if (self._value is None or in_stateless_scope()
                    or not uses_coordinator(tf.distribute.get_strategy())):
                return keras_update(self, value)
            value = self._convert_to_tensor(value, dtype=self._dtype)
            return getattr(self._value, tf_update)(tf.cast(value, self._value.dtype))

        return update

    Variable.assign_add = atomic(Variable.assign_add, "assign_add")
    Variable.assign_sub = atomic(Variable.assign_sub, "assign_sub")


class _ScheduledInput:
    """A ``fit``/``evaluate`` input as every worker's own dataset, and the steps of one pass over it."""

    def __init__(self, coordinator: Any, x: Any, steps: int | None, steps_name: str, argument: str) -> None:
        strategy = coordinator.strategy
        if isinstance(x, tf.data.Dataset):
            if steps is None and int(x.cardinality()) >= 0:
                steps = int(x.cardinality())
            first_input, per_worker = x, strategy.experimental_distribute_dataset(x)
        elif callable(x):
            first_input = x(tf.distribute.InputContext())
            per_worker = lambda: strategy.distribute_datasets_from_function(x)  # noqa: E731 - runs on each worker
        else:
            raise ConfigurationError(
                argument, type(x).__name__, "under ParameterServerStrategy each worker reads its own data",
                "pass a dataset function (dataset_fn(input_context) -> tf.data.Dataset) or a tf.data.Dataset")
        if steps is None or steps <= 0:
            raise ConfigurationError(
                steps_name, steps, "under ParameterServerStrategy the coordinator schedules a fixed number of steps "
                "(a worker cannot tell it that its data ran out)", f"set {steps_name} to the steps of one pass")
        self.steps = steps
        self.first_batch = next(iter(first_input))
        self.iterator = iter(coordinator.create_per_worker_dataset(per_worker))


class _Coordinated:
    """``fit`` and ``evaluate`` of one Keras 3 model under a coordinator strategy (see the module docstring)."""

    def __init__(self, model: Any, trainer_module: ModuleType) -> None:
        refusal = untested_keras_refusal(_STRATEGY_NAME)
        if refusal is not None:
            raise refusal
        self.model, self.trainer_module = model, trainer_module
        self.strategy = model.distribute_strategy
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)

    # -- the scheduled steps ----------------------------------------------------------------------------------------

    def _scheduled(self, step: Callable[[Any], Any], cache: str) -> Callable[[Any], Any]:
        """`step` (the model's ``train_step``/``test_step``) as one scheduled function of ``steps_per_execution``
        steps on a worker's iterator; traced once per model."""
        function = getattr(self.model, cache, None)
        if function is not None:
            return function
        model, strategy, reduce = self.model, self.strategy, self.trainer_module.reduce_per_replica

        def steps_on_iterator(iterator: Any) -> Any:
            outputs = None
            for _ in range(model.steps_per_execution):
                outputs = strategy.run(step, args=(next(iterator),))
            return reduce(outputs, strategy, reduction="auto")

        if not model.run_eagerly:
            steps_on_iterator = tf.function(steps_on_iterator, reduce_retracing=True)
        setattr(model, cache, steps_on_iterator)
        return steps_on_iterator

    def _run_pass(self, data: _ScheduledInput, step: Callable[[Any], Any], cache: str,
                  begin: Callable[[int], None], end: Callable[[int], None]) -> dict[str, Any]:
        """Schedules one pass of `data` (its steps), waits for all of them; the model's metrics' results."""
        function = self._scheduled(step, cache)
        per_call = self.model.steps_per_execution
        for first in range(0, data.steps, per_call):
            begin(first)
            self.coordinator.schedule(function, args=(data.iterator,))
            end(min(first + per_call, data.steps) - 1)
            if getattr(self.model, "stop_training", False):
                break
        self.coordinator.join()
        return self.trainer_module.pythonify_logs(self.model.get_metrics_result())

    def _build(self, data: _ScheduledInput) -> None:
        with self.strategy.scope():
            self.model._symbolic_build(data_batch=data.first_batch)  # noqa: SLF001 - Keras's own build

    def _callbacks(self, callbacks: Any, verbose: Any, epochs: int, steps: int, history: bool) -> Any:
        from keras.src.callbacks.callback_list import CallbackList

        if isinstance(callbacks, CallbackList):
            return callbacks
        verbose = 2 if verbose == "auto" else verbose
        return CallbackList(callbacks, add_history=history, add_progbar=verbose != 0, verbose=verbose,
                            epochs=epochs, steps=steps, model=self.model)

    # -- fit and evaluate -------------------------------------------------------------------------------------------

    def fit(self, x: Any = None, y: Any = None, batch_size: Any = None, epochs: int = 1, verbose: Any = "auto",
            callbacks: Any = None, validation_split: float = 0.0, validation_data: Any = None, shuffle: bool = True,
            class_weight: Any = None, sample_weight: Any = None, initial_epoch: int = 0,
            steps_per_epoch: int | None = None, validation_steps: int | None = None,
            validation_batch_size: Any = None, validation_freq: int = 1) -> Any:
        model = self.model
        model._assert_compile_called("fit")  # noqa: SLF001
        _refuse_array_options(y=y, sample_weight=sample_weight, class_weight=class_weight,
                              validation_split=validation_split or None, batch_size=batch_size,
                              validation_batch_size=validation_batch_size)
        data = _ScheduledInput(self.coordinator, x, steps_per_epoch, "steps_per_epoch", "x")
        validation = (None if validation_data is None else
                      _ScheduledInput(self.coordinator, validation_data, validation_steps, "validation_steps",
                                      "validation_data"))
        self._build(data)
        callback_list = self._callbacks(callbacks, verbose, epochs, data.steps, history=True)
        model.stop_training = False
        callback_list.on_train_begin()
        epoch_logs: dict[str, Any] | None = None
        for epoch in range(model._initial_epoch or initial_epoch, epochs):  # noqa: SLF001 - BackupAndRestore's
            model.reset_metrics()
            callback_list.on_epoch_begin(epoch)
            epoch_logs = dict(self._run_pass(data, model.train_step, "_smddp_scheduled_train_step",
                                             callback_list.on_train_batch_begin,
                                             lambda step: callback_list.on_train_batch_end(step, None)))
            if validation is not None and model._should_eval(epoch, validation_freq):  # noqa: SLF001
                val_logs = self._evaluate_pass(validation, callback_list)
                epoch_logs.update({f"val_{name}": value for name, value in val_logs.items()})
            callback_list.on_epoch_end(epoch, epoch_logs)
            if model.stop_training:
                break
        callback_list.on_train_end(logs=epoch_logs)
        return model.history

    def _evaluate_pass(self, data: _ScheduledInput, callback_list: Any) -> dict[str, Any]:
        callback_list.on_test_begin()
        self.model.reset_metrics()
        logs = self._run_pass(data, self.model.test_step, "_smddp_scheduled_test_step",
                              callback_list.on_test_batch_begin,
                              lambda step: callback_list.on_test_batch_end(step, None))
        callback_list.on_test_end(logs)
        return logs

    def evaluate(self, x: Any = None, y: Any = None, batch_size: Any = None, verbose: Any = "auto",
                 sample_weight: Any = None, steps: int | None = None, callbacks: Any = None,
                 return_dict: bool = False, **kwargs: Any) -> Any:
        model = self.model
        model._assert_compile_called("evaluate")  # noqa: SLF001
        kwargs.pop("_use_cached_eval_dataset", None)
        if kwargs:
            raise ValueError(f"Arguments not recognized: {kwargs}")
        _refuse_array_options(y=y, sample_weight=sample_weight, batch_size=batch_size)
        data = _ScheduledInput(self.coordinator, x, steps, "steps", "x")
        self._build(data)
        logs = self._evaluate_pass(data, self._callbacks(callbacks, verbose, 1, data.steps, history=False))
        return logs if return_dict else model._flatten_metrics_in_order(logs)  # noqa: SLF001


def _refuse_array_options(**given: Any) -> None:
    """Refuses the ``fit``/``evaluate`` arguments that only apply to in-memory arrays (the dataset has them)."""
    for name, value in given.items():
        if value is not None:
            shown = value if isinstance(value, (int, float, str)) else type(value).__name__
            raise ConfigurationError(
                name, shown, "under ParameterServerStrategy the workers read their batches from the dataset",
                f"drop {name} and build it into the dataset")
