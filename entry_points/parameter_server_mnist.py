"""MNIST CNN trained with TensorFlow's ParameterServerStrategy, as SageMaker's ``parameter_server`` distribution
starts it: the coordinator trains, workers and parameter servers serve until it is done; every wait is bounded.

See docs/training-scripts.md#parameter_server_mnist (roles, timeouts); runs on Keras 3 and on tf-keras.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smddp_compat import parameter_server as ps  # no TensorFlow

import smddp_compat.keras3  # noqa: E402,F401 - Keras 3 under ParameterServerStrategy (the kit's jobs arm it too)

import numpy as np
import tensorflow as tf

from smddp_compat.entry_points.common.checkpoints import io_on_this_process, restore_latest, save_checkpoint
from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.errors import HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.keras_flavor import build_optimizer, keras_name
from smddp_compat.entry_points.common.lifecycle import run_entry_point, termination_requested, write_failure
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.mnist_model import build_cnn, evaluate_classifier
from smddp_compat.entry_points.common.model_artifacts import save_servable_model, write_summary
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments

__all__ = ["build_parser", "chunk_end", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=positive_int, default=5)
    parser.add_argument("--batch-size", type=positive_int, default=64, help="images per step (on one worker)")
    parser.add_argument("--learning-rate", type=positive_float, default=0.001)
    parser.add_argument("--steps-per-epoch", type=non_negative_int, default=0, help="0: the train set once")
    parser.add_argument("--steps-per-execution", type=positive_int, default=10,
                        help="training steps per function the coordinator schedules on a worker")
    parser.add_argument("--checkpoint-steps", type=non_negative_int, default=0, help="0: at each epoch end")
    parser.add_argument("--log-steps", type=positive_int, default=50)
    add_output_dir_arguments(parser)
    parser.add_argument("--start-timeout", type=positive_float, default=600.0,
                        help="seconds the coordinator waits for every task to accept connections, and a worker for "
                             "the coordinator")
    parser.add_argument("--task-timeout", type=positive_float, default=120.0,
                        help="seconds a task may go without answering (ended or hung), or a chunk of steps (an "
                             "evaluation, a checkpoint) may take, before the coordinator stops the job; a worker "
                             "gives up on a coordinator that stops answering after as long")
    parser.add_argument("--seed", type=non_negative_int, default=42, help="seed of the initial weights")
    parser.add_argument("--save-model", type=boolean, default=True)
    return parser


def chunk_end(step: int, *, epoch_end: int, log_steps: int, checkpoint_steps: int) -> int:
    """The step at which the coordinator next waits for the workers: the first boundary after `step` of the next log
    line, checkpoint or the current epoch's end (`epoch_end`, > `step`).
    """
    def next_multiple(period: int) -> int:
        return (step // period + 1) * period

    return min(epoch_end, next_multiple(log_steps), next_multiple(checkpoint_steps))


def _abort(error: BaseException) -> NoReturn:
    """Reports `error` and ends the process at once: called from the watch's thread while the main thread may be
    blocked inside TensorFlow for ever (ParameterServerStrategy waiting for a lost worker)."""
    summary = f"{type(error).__name__}: {error}"
    print(f"training failed: {summary}", file=sys.stderr, flush=True)
    write_failure(summary)
    sys.stdout.flush()
    os._exit(1)


class _NoWatch:
    """The watch of a run without a cluster: nothing to watch."""

    def phase(self, what: str, limit: float) -> None:
        """Nothing to bound (one process)."""

    def idle(self) -> None:
        """Nothing to bound (one process)."""


def _serve(config: ps.ParameterServerConfig, args: argparse.Namespace) -> None:
    outcome = ps.serve(config, start_timeout=args.start_timeout, timeout_field="--start-timeout",
                       should_stop=termination_requested, silent_limit=args.task_timeout,
                       silent_field="--task-timeout")
    if outcome == "stopped":
        print("stopped on SIGTERM", flush=True)


def _lost_task_error(config: ps.ParameterServerConfig, error: tf.errors.OpError, during: str) -> Exception:
    """The error to raise for a TensorFlow failure of the cluster: a `TaskLostError` naming the tasks whose server
    does not answer when there are any, else `error` itself."""
    states = {task: ps.probe(task.address) for task in (*config.workers, *config.parameter_servers)}
    lost = [task for task, state in states.items() if state != ps.ANSWERS]
    if not lost:
        return error
    names = "; ".join(f"{task.describe()} " + ("refuses connections" if states[task] == ps.REFUSED
                                               else "does not answer") for task in lost)
    first_line = (str(error).strip().splitlines() or [""])[0]
    return ps.TaskLostError(
        f"{names}: it was lost during {during} ({type(error).__name__}: {first_line}). Fix: look at that host's log "
        "for why the task ended or hung, then run the job again; training resumes from its last checkpoint.",
        task=lost[0])


def main() -> None:
    """Serves (worker, ps) or trains, evaluates and saves the model (coordinator, single); see the docstring."""
    args = parse_hyperparameters(build_parser())
    config = ps.read_tf_config()
    if config.role in (ps.Role.WORKER, ps.Role.PS):
        _serve(config, args)
        return
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    log = MetricLogger()

    (x_train, y_train), (x_test, y_test) = load_mnist(env.channel("train"), test_channel=env.channel("test"))
    full_epoch = len(x_train) // args.batch_size
    if full_epoch < 1 or args.steps_per_epoch > full_epoch:
        raise HyperparameterError(
            "--steps-per-epoch", args.steps_per_epoch,
            f"with batches of {args.batch_size} it needs more than the {len(x_train)} training images",
            f"lower --batch-size or use --steps-per-epoch <= {max(1, full_epoch)}")
    steps_per_epoch = args.steps_per_epoch or full_epoch
    total_steps = args.epochs * steps_per_epoch
    checkpoint_steps = args.checkpoint_steps or steps_per_epoch
    env.prepare_dirs()

    watch: ps.ClusterWatch | _NoWatch = _NoWatch()
    coordinator = None
    if config.role is ps.Role.COORDINATOR:
        ps.wait_for_tasks(config, timeout=args.start_timeout, timeout_field="--start-timeout")
        # From here on every task has been reachable: one that stops accepting connections is lost.
        watch = ps.ClusterWatch(config, lost_after=args.task_timeout, on_failure=_abort,
                                limit_field="--task-timeout").start()
        watch.phase("connecting to the cluster", args.start_timeout)
        strategy: tf.distribute.Strategy = tf.distribute.experimental.ParameterServerStrategy(
            ps.cluster_resolver(config))
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        assert config.task is not None
        print(f"parameter_server_mnist: ParameterServerStrategy, {config.task.describe()}, "
              f"{len(config.workers)} worker(s), {len(config.parameter_servers)} parameter server(s), batch "
              f"{args.batch_size} per step, {keras_name()}, checkpoints in {env.checkpoint_dir}", flush=True)
    else:
        strategy = tf.distribute.get_strategy()
        print(f"parameter_server_mnist: no parameter servers in TF_CONFIG (one host): training alone, batch "
              f"{args.batch_size} per step, {keras_name()}, checkpoints in {env.checkpoint_dir}", flush=True)

    try:
        _train(args, config, env, log, watch, strategy, coordinator, x_train, y_train, x_test, y_test,
               steps_per_epoch=steps_per_epoch, total_steps=total_steps, checkpoint_steps=checkpoint_steps)
    except tf.errors.OpError as exc:
        if config.role is ps.Role.COORDINATOR:
            raise _lost_task_error(config, exc, "training") from exc
        raise
    finally:
        if isinstance(watch, ps.ClusterWatch):
            watch.stop()


def _train(args: argparse.Namespace, config: ps.ParameterServerConfig, env: TrainingEnv, log: MetricLogger,
           watch: ps.ClusterWatch | _NoWatch, strategy: tf.distribute.Strategy, coordinator: Any,
           x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *,
           steps_per_epoch: int, total_steps: int, checkpoint_steps: int) -> None:
    limit = args.task_timeout
    watch.phase("creating the variables on the parameter servers", limit)
    with strategy.scope():
        model = build_cnn(seed=args.seed)
        optimizer = tf.keras.optimizers.Adam(args.learning_rate)
        build_optimizer(optimizer, model.trainable_variables)
        train_loss = tf.keras.metrics.Mean("loss")
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy("accuracy")
    local_copy = build_cnn(seed=args.seed)  # evaluation and the saved model: no parameter-server placement
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    # The variables live on the parameter servers, each on its own host: the coordinator does the file I/O, into its
    # own checkpoint folder (else each parameter server writes its shards on its own disk, where the folder is not).
    io = io_on_this_process("chief") if coordinator is not None else None
    watch.phase("restoring the latest checkpoint", limit)
    start_step = restore_latest(checkpoint, env.checkpoint_dir, options=io) or 0
    if start_step:
        print(f"resumed from the checkpoint of step {start_step}", flush=True)

    # Stored as bytes (a quarter of float32): the function that builds each worker's dataset carries the images.
    images = np.round(x_train * 255.0).astype(np.uint8)
    labels = y_train.astype(np.int64)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = context.get_per_replica_batch_size(args.batch_size)
        data = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(labels)).repeat()
        data = data.batch(batch, drop_remainder=True)
        return data.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y)).prefetch(2)

    if coordinator is not None:
        @tf.function
        def per_worker_dataset() -> Any:
            return strategy.distribute_datasets_from_function(dataset_fn)

        watch.phase("creating the workers' datasets", limit)
        iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))
    else:
        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            probs = model(x, training=True)
            loss = tf.nn.compute_average_loss(tf.keras.losses.sparse_categorical_crossentropy(y, probs))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_loss.update_state(loss * strategy.num_replicas_in_sync)
        train_accuracy.update_state(y, probs)

    @tf.function
    def train_steps(iterator: Any, count: tf.Tensor) -> None:
        for _ in tf.range(count):
            x, y = next(iterator)
            strategy.run(replica_step, args=(x, y))

    def run_steps(first: int, last: int) -> None:
        """Steps first+1..last: scheduled on the workers (at most --steps-per-execution each), then awaited."""
        watch.phase(f"training steps {first + 1}-{last}", limit)
        for begin in range(first, last, args.steps_per_execution):
            count = tf.constant(min(args.steps_per_execution, last - begin), tf.int64)
            if coordinator is not None:
                coordinator.schedule(train_steps, args=(iterator, count))
            else:
                train_steps(iterator, count)
        if coordinator is not None:
            coordinator.join()

    def evaluate(step: int) -> dict[str, float]:
        watch.phase(f"the evaluation at step {step}", limit)
        # The weights are copied once into a local model, which then runs on the coordinator's CPU without reading
        # the parameter servers at every layer.
        local_copy.set_weights(model.get_weights())
        return evaluate_classifier(local_copy, x_test, y_test)

    def save(step: int) -> None:
        watch.phase(f"the checkpoint of step {step}", limit)
        save_checkpoint(checkpoint, env.checkpoint_dir, step, options=io)

    summaries = TrainingSummaries(env.tensorboard_dir, learning_rate=lambda: learning_rate_of(optimizer))
    with summaries:  # closes the event file however training ends
        started = time.monotonic()
        summaries.start(start_step)
        step = start_step
        saved = start_step
        while step < total_steps:
            epoch = step // steps_per_epoch
            epoch_end = (epoch + 1) * steps_per_epoch
            if step % steps_per_epoch == 0 or step == start_step:
                train_loss.reset_state()  # running means of the epoch (since the restart, after a resume)
                train_accuracy.reset_state()
            while step < epoch_end:
                end = chunk_end(step, epoch_end=epoch_end, log_steps=args.log_steps,
                                checkpoint_steps=checkpoint_steps)
                run_steps(step, end)
                step = end
                if step % args.log_steps == 0 or step == epoch_end:
                    values = {"loss": float(train_loss.result()), "accuracy": float(train_accuracy.result())}
                    if step % args.log_steps == 0:
                        log.log(epoch=epoch + 1, step=step, **values)
                        summaries.log_step(step, **values)
                if termination_requested():
                    save(step)
                    print(f"stopped on SIGTERM at step {step}; checkpoint saved", flush=True)
                    return
                if step % checkpoint_steps == 0:
                    save(step)
                    saved = step
            result = evaluate(step)
            log.log(epoch=epoch + 1, step=step, **values, **result)
            summaries.log_evaluation(step, loss=result["test_loss"], accuracy=result["test_accuracy"])
        if saved != step:
            save(step)
        wall = time.monotonic() - started
        result = evaluate(step)
        log.log(step=step, **result, train_seconds=wall)
        summaries.log_evaluation(step, loss=result["test_loss"], accuracy=result["test_accuracy"])
    watch.idle()
    summary = {"steps": step, "resumed_from": start_step, "role": config.role.value,
               "workers": len(config.workers) or 1, "parameter_servers": len(config.parameter_servers),
               "batch_size": args.batch_size, **result, "train_seconds": round(wall, 2), "keras": keras_name()}
    write_summary(summary, env.output_data_dir)
    if args.save_model:
        path = save_servable_model(local_copy, env.model_dir)  # holds the weights of the last evaluation
        print(f"model saved to {path}", flush=True)


if __name__ == "__main__":
    run_entry_point(main)
