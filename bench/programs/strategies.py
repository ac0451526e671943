"""Rank program of the strategy comparison: one model, one dataset, one global batch, trained under one of the
strategies a TensorFlow user can pick, started by ``smddp local`` as SageMaker's distribution of that strategy
starts it.

How it works: ``docs/performance.md``, "The strategy comparison's rank program".
"""

from __future__ import annotations

import time

PROCESS_STARTED = time.time()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("BENCH_REPO"):
    sys.path.insert(0, os.environ["BENCH_REPO"])

from smddp_compat import parameter_server as ps  # noqa: E402  (no TensorFlow)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.experimental import dtensor  # noqa: E402

from _distributed_step import distributed_train_step  # noqa: E402
from _rank_result import peak_rss_bytes, progress, write_rank_result  # noqa: E402
from smddp_compat.entry_points.common.datasets import load_mnist  # noqa: E402
from smddp_compat.entry_points.common.dtensor_layers import MLP  # noqa: E402
from smddp_compat.entry_points.common.dtensor_mesh import (  # noqa: E402
    ClientTopology, build_mesh, initialize_devices, pack_global, resolve_total_devices)
from smddp_compat.entry_points.common.dtensor_optimizers import Adam  # noqa: E402
from smddp_compat.entry_points.common.dtensor_training import classifier_steps  # noqa: E402
from smddp_compat.entry_points.common.keras_flavor import build_optimizer, keras_name, optimizer_variables  # noqa: E402
from smddp_compat.entry_points.common.mnist_model import (  # noqa: E402
    MLP_SIZES, build_cnn, build_mlp, evaluate_classifier)

#: The module each Horovod-style strategy imports.
HOROVOD_APIS = {
    "smddp": "smdistributed.dataparallel.tensorflow",
    "horovod_face": "smddp_compat.horovod.tensorflow",
    "horovod": "horovod.tensorflow",
}
STRATEGIES = (*HOROVOD_APIS, "mwms", "mwms_fit", "dtensor", "parameter_server")
MODELS = ("mlp", "cnn")


def build_parser() -> argparse.ArgumentParser:
    """The program's options (passed as hyperparameters by ``smddp local``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=STRATEGIES, required=True)
    parser.add_argument("--model", choices=MODELS, default="mlp")
    parser.add_argument("--steps", type=int, default=300, help="training steps in all")
    parser.add_argument("--warmup", type=int, default=10, help="steps before the first timed window")
    parser.add_argument("--window", type=int, default=20, help="steps per timed window")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between held-out evaluations")
    parser.add_argument("--target", type=float, default=0.9, help="held-out accuracy whose time is reported")
    parser.add_argument("--batch", type=int, default=64, help="global batch (all replicas together)")
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads per process (0: TF's default)")
    return parser


@dataclass
class Trainer:
    """One strategy's training, as the loop drives it.

    Attributes:
        index: This process's result index (0 reports).
        processes: How many processes run the script.
        replicas: Replicas that train in parallel.
        reports: Whether this process reports throughput and accuracy.
        run_steps: Trains steps ``first..last-1`` (global step numbers) and returns when they are done.
        accuracy: The held-out accuracy of the current weights (called on every process: it may be a collective).
        finish: Called once after training.
    """

    index: int
    processes: int
    replicas: int
    reports: bool
    run_steps: Callable[[int, int], None]
    accuracy: Callable[[], float]
    finish: Callable[[], None] = lambda: None


class Data:
    """The training and held-out digits, and the global batch of a step (the same on every process)."""

    def __init__(self, model: str, batch: int) -> None:
        (self.x, self.y), (self.x_test, self.y_test) = load_mnist(flatten=model == "mlp")
        self.batch = batch
        self.batches = len(self.x) // batch

    def global_batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The examples of global step ``step`` (the epoch's order is fixed: every strategy sees the same)."""
        begin = (step % self.batches) * self.batch
        return self.x[begin:begin + self.batch], self.y[begin:begin + self.batch]

    def shard(self, step: int, index: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Replica ``index`` of ``count``'s part of the global batch of ``step``."""
        x, y = self.global_batch(step)
        width = self.batch // count
        return x[index * width:(index + 1) * width], y[index * width:(index + 1) * width]


def keras_model(model: str) -> tf.keras.Model:
    """The Keras model named ``model``, seeded alike on every process."""
    return build_mlp(seed=1) if model == "mlp" else build_cnn(seed=1)


def keras_accuracy(model: tf.keras.Model, data: Data) -> float:
    """Held-out accuracy of a Keras model that outputs probabilities."""
    return evaluate_classifier(model, data.x_test, data.y_test)["test_accuracy"]


def horovod_trainer(args: argparse.Namespace, data: Data) -> Trainer:
    """DistributedGradientTape in a ``tf.function`` step; variables broadcast from rank 0 after the first step."""
    api = importlib.import_module(HOROVOD_APIS[args.strategy])
    api.init()
    rank, size = api.rank(), api.size()
    model = keras_model(args.model)
    optimizer = tf.keras.optimizers.Adam(args.learning_rate)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()

    train_step = distributed_train_step(api, model, optimizer, loss_fn)

    def run_steps(first: int, last: int) -> None:
        for step in range(first, last):
            images, labels = data.shard(step, rank, size)
            train_step(tf.constant(images), tf.constant(labels)).numpy()
            if step == 0:
                api.broadcast_variables(model.variables, root_rank=0)
                api.broadcast_variables(optimizer_variables(optimizer), root_rank=0)

    return Trainer(rank, size, size, rank == 0, run_steps,
                   lambda: keras_accuracy(model, data) if rank == 0 else 0.0, api.shutdown)


def mwms_trainer(args: argparse.Namespace, data: Data) -> Trainer:
    """A custom loop under ``MultiWorkerMirroredStrategy``: each worker feeds its part of the global batch."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    index = resolver.task_id if resolver is not None and resolver.task_id is not None else 0
    workers = strategy.extended._num_workers  # noqa: SLF001 - no public accessor; replicas / local replicas
    with strategy.scope():
        model = keras_model(args.model)
        optimizer = tf.keras.optimizers.Adam(args.learning_rate)
        build_optimizer(optimizer, model.trainable_variables)

    def replica_step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.keras.losses.sparse_categorical_crossentropy(labels, model(images, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(images: Any, labels: Any) -> tf.Tensor:
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    def run_steps(first: int, last: int) -> None:
        for step in range(first, last):
            images, labels = data.shard(step, index, workers)
            values = strategy.experimental_distribute_values_from_function(
                lambda _context, images=images, labels=labels: (tf.constant(images), tf.constant(labels)))
            train_step(*values).numpy()

    return Trainer(index, workers, strategy.num_replicas_in_sync, index == 0, run_steps,
                   lambda: keras_accuracy(model, data) if index == 0 else 0.0)


def mwms_fit(args: argparse.Namespace, data: Data) -> tuple[Trainer, dict[str, Any]]:
    """Keras ``fit`` under ``MultiWorkerMirroredStrategy`` (Keras 3 through the kit's adaptation, or tf-keras): one
    ``fit`` of ``--steps`` steps over the global batches, timed by a callback at each step's end; the held-out
    evaluation every ``--eval-every`` steps on worker 0 (a forward pass of its own), its time left out of training.

    Returns:
        The trainer (who reports; its steps already run) and the figures :func:`train` would give."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    index = resolver.task_id if resolver is not None and resolver.task_id is not None else 0
    with strategy.scope():
        model = keras_model(args.model)
        model.compile(optimizer=tf.keras.optimizers.Adam(args.learning_rate),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy())
    dataset = tf.data.Dataset.from_tensor_slices((data.x, data.y)).repeat().batch(args.batch)
    ends: list[float] = []  # training seconds at each step's end (evaluations left out)
    evaluations: list[tuple[int, float, float]] = []
    clock = {"began": 0.0, "paused": 0.0, "first_step_done": 0.0}

    class StepClock(tf.keras.callbacks.Callback):
        _supports_tf_logs = True  # tf-keras: no conversion of the logs at every step (Keras 3 never converts)

        def on_train_begin(self, logs: Any = None) -> None:
            clock["began"] = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            now = time.perf_counter()
            ends.append(now - clock["began"] - clock["paused"])
            if batch == 0:
                clock["first_step_done"] = time.time()
                progress(index, "first step done")
            if index == 0 and (batch + 1) % args.eval_every == 0:
                accuracy = keras_accuracy(model, data)
                evaluations.append((batch + 1, ends[-1] - ends[0], accuracy))
                clock["paused"] += time.perf_counter() - now

    model.fit(dataset, epochs=1, steps_per_epoch=args.steps, verbose=0, callbacks=[StepClock()])
    trainer = Trainer(index, strategy.extended._num_workers, strategy.num_replicas_in_sync, index == 0,  # noqa: SLF001
                      lambda first, last: None, lambda: keras_accuracy(model, data) if index == 0 else 0.0)
    if index != 0:
        return trainer, {}
    if not evaluations or evaluations[-1][0] != args.steps:
        evaluations.append((args.steps, ends[-1] - ends[0], keras_accuracy(model, data)))
    starts = range(args.warmup, len(ends) - args.window, args.window)
    reached = [trained for _, trained, accuracy in evaluations if accuracy >= args.target]
    return trainer, {
        "first_step_done": clock["first_step_done"],
        "window_samples_per_second": [args.window * args.batch / (ends[i + args.window] - ends[i]) for i in starts
                                      if ends[i + args.window] > ends[i]],
        "evaluations": evaluations,
        "seconds_to_target": reached[0] if reached else None,
        "final_accuracy": evaluations[-1][2],
    }


def dtensor_trainer(args: argparse.Namespace, data: Data) -> Trainer:
    """DTensor data parallel over one device per client: replicated DVariables, a batch-sharded global batch."""
    topology = ClientTopology.from_environ()
    devices = resolve_total_devices(0, topology)
    initialize_devices(devices, topology)
    mesh = build_mesh([("batch", devices)], topology)
    replicated = dtensor.Layout.replicated(mesh, rank=2)
    model = MLP(MLP_SIZES, [replicated] * (len(MLP_SIZES) - 1), seed=1)
    optimizer = Adam(model.trainable_variables, learning_rate=args.learning_rate)
    train_step, eval_step = classifier_steps(model, list(model.trainable_variables), optimizer.apply_gradients)
    x_layout = dtensor.Layout.batch_sharded(mesh, "batch", rank=2)
    y_layout = dtensor.Layout.batch_sharded(mesh, "batch", rank=1)
    test = (pack_global(data.x_test, x_layout), pack_global(data.y_test.astype(np.int64), y_layout),
            pack_global(np.ones(len(data.y_test), np.float32), y_layout))

    def run_steps(first: int, last: int) -> None:
        for step in range(first, last):
            images, labels = data.global_batch(step)
            loss, _ = train_step(pack_global(images, x_layout), pack_global(labels.astype(np.int64), y_layout))
            float(dtensor.unpack(loss)[0])

    def accuracy() -> float:
        _, correct = eval_step(*test)
        return float(dtensor.unpack(correct)[0]) / len(data.y_test)

    return Trainer(topology.client_id, topology.num_clients, devices, topology.is_chief, run_steps, accuracy)


def parameter_server_trainer(args: argparse.Namespace, data: Data, config: ps.ParameterServerConfig) -> Trainer:
    """The coordinator's side: variables on the parameter servers, steps scheduled on the workers in chunks of
    ``--window`` steps (one function per chunk), awaited before the clock is read."""
    ps.wait_for_tasks(config, timeout=120, timeout_field="the bench's start timeout")
    strategy = tf.distribute.experimental.ParameterServerStrategy(ps.cluster_resolver(config))
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = keras_model(args.model)
        optimizer = tf.keras.optimizers.Adam(args.learning_rate)
        build_optimizer(optimizer, model.trainable_variables)
    local_copy = keras_model(args.model)
    images = data.x.astype(np.float32)
    labels = data.y.astype(np.int64)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = context.get_per_replica_batch_size(args.batch)
        return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch, drop_remainder=True)

    @tf.function
    def per_worker_dataset() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            per_example = tf.keras.losses.sparse_categorical_crossentropy(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(per_example)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    @tf.function
    def train_steps(iterator: Any, count: tf.Tensor) -> None:
        for _ in tf.range(count):
            x, y = next(iterator)
            strategy.run(replica_step, args=(x, y))

    def run_steps(first: int, last: int) -> None:
        for begin in range(first, last, args.window):
            coordinator.schedule(train_steps, args=(iterator, tf.constant(min(args.window, last - begin), tf.int64)))
        coordinator.join()

    def accuracy() -> float:
        local_copy.set_weights(model.get_weights())
        return keras_accuracy(local_copy, data)

    return Trainer(0, 1 + len(config.workers), len(config.workers), True, run_steps, accuracy)


def _boundaries(args: argparse.Namespace) -> list[int]:
    """Global step numbers where the loop stops to time a window or evaluate: after step 0, after the warm-up,
    then every window and every evaluation, up to ``--steps``."""
    points = {1, min(args.steps, 1 + args.warmup), args.steps}
    points |= set(range(1 + args.warmup, args.steps + 1, args.window))
    points |= set(range(args.eval_every, args.steps + 1, args.eval_every))
    return sorted(point for point in points if 1 <= point <= args.steps)


def train(args: argparse.Namespace, trainer: Trainer) -> dict[str, Any]:
    """Runs the loop: step 0 (the first step), then the rest in windows, evaluating every ``--eval-every`` steps.

    Returns:
        The reporting figures (empty for a process that does not report).
    """
    trained = 0.0  # training seconds so far, evaluations excluded
    first_step_done = 0.0
    windows: list[tuple[int, float]] = []
    evaluations: list[tuple[int, float, float]] = []
    reached_at: float | None = None
    step = 0
    for boundary in _boundaries(args):
        began = time.perf_counter()
        trainer.run_steps(step, boundary)
        seconds = time.perf_counter() - began
        if step == 0:
            first_step_done = time.time()
            progress(trainer.index, "first step done")
        else:
            trained += seconds  # from the end of the first step (its tracing is start-up)
            if step >= 1 + args.warmup:
                windows.append((boundary - step, seconds))
        step = boundary
        if step % args.eval_every == 0 or step == args.steps:
            accuracy = trainer.accuracy()
            evaluations.append((step, trained, accuracy))
            if trainer.reports and reached_at is None and accuracy >= args.target:
                reached_at = trained
    trainer.finish()
    if not trainer.reports:
        return {}
    return {
        "first_step_done": first_step_done,
        "window_samples_per_second": [steps * args.batch / seconds for steps, seconds in windows if seconds > 0],
        "evaluations": evaluations,
        "seconds_to_target": reached_at,
        "final_accuracy": evaluations[-1][2] if evaluations else None,
    }


def main() -> None:
    """Trains under ``--strategy`` and writes this process's result."""
    args, _ = build_parser().parse_known_args()  # SageMaker adds hyperparameters of its own (--model_dir)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, args.threads))
    data = Data(args.model, args.batch)
    fit_figures: dict[str, Any] | None = None  # mwms_fit: fit ran its steps already
    if args.strategy == "parameter_server":
        config = ps.read_tf_config()
        if config.role in (ps.Role.WORKER, ps.Role.PS):
            ps.serve(config, start_timeout=120, timeout_field="the bench's start timeout")
            assert config.task is not None
            index = 1 + config.task.index if config.role is ps.Role.WORKER else 1 + len(config.workers)
            write_rank_result(index, {"rank": index, "role": config.role.value, "peak_rss_bytes": peak_rss_bytes()})
            return
        trainer = parameter_server_trainer(args, data, config)
    elif args.strategy == "mwms":
        trainer = mwms_trainer(args, data)
    elif args.strategy == "mwms_fit":
        trainer, fit_figures = mwms_fit(args, data)
    elif args.strategy == "dtensor":
        if args.model != "mlp":
            raise SystemExit("strategies.py: --strategy dtensor trains the Core-API MLP only; use --model mlp")
        trainer = dtensor_trainer(args, data)
    else:
        trainer = horovod_trainer(args, data)
    if args.batch % trainer.replicas:
        raise SystemExit(f"strategies.py: --batch {args.batch} does not divide over {trainer.replicas} replicas")
    progress(trainer.index, f"{args.strategy}: {trainer.processes} processes, {trainer.replicas} replicas, "
                            f"{keras_name() if args.strategy != 'dtensor' else 'no Keras'}")
    figures = fit_figures if fit_figures is not None else train(args, trainer)
    write_rank_result(trainer.index, {
        "rank": trainer.index,
        "strategy": args.strategy,
        "model": args.model,
        "keras": keras_name() if args.strategy != "dtensor" else "none",
        "processes": trainer.processes,
        "replicas": trainer.replicas,
        "process_started": PROCESS_STARTED,
        "peak_rss_bytes": peak_rss_bytes(),
        **figures,
    })
    if trainer.reports:
        print("strategies: " + json.dumps({k: v for k, v in figures.items() if k != "evaluations"}), flush=True)


if __name__ == "__main__":
    main()
