"""MNIST CNN trained with Keras ``fit`` and the Horovod API: a typical Horovod Keras script with its imports swapped.

See docs/training-scripts.md#horovod_mnist.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf

import smddp_compat.horovod.tensorflow as hvd
import smddp_compat.horovod.tensorflow.keras as hvd_keras
from smddp_compat.entry_points.common.checkpoints import restore_from_rank_0, save_checkpoint
from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.errors import HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.keras_flavor import build_optimizer, is_keras3, keras_name, optimizer_variables
from smddp_compat.entry_points.common.lifecycle import run_entry_point
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.mnist_model import build_cnn
from smddp_compat.entry_points.common.model_artifacts import save_servable_model, write_summary, write_weights_digest
from smddp_compat.entry_points.common.resumable_fit import MetricLines, StepCheckpoint, epoch_dataset, fit_from_step
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=positive_int, default=5)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per-rank batch size")
    parser.add_argument("--learning-rate", type=positive_float, default=0.001, help="single-rank rate, x size()")
    parser.add_argument("--steps-per-epoch", type=non_negative_int, default=0,
                        help="0: each rank's shard once per epoch")
    parser.add_argument("--checkpoint-steps", type=non_negative_int, default=0, help="0: at each epoch end")
    parser.add_argument("--log-steps", type=positive_int, default=50)
    add_output_dir_arguments(parser)
    parser.add_argument("--seed", type=non_negative_int, default=42)
    parser.add_argument("--threads", type=non_negative_int, default=0, help="0: CPUs / local_size")
    parser.add_argument("--save-model", type=boolean, default=True)
    parser.add_argument("--weights-digest", type=boolean, default=False,
                        help="write weights-rank<r>.sha256 to the output data dir (every rank)")
    return parser


def main() -> None:
    """Trains, evaluates and saves the model (see the module docstring)."""
    args = parse_hyperparameters(build_parser())
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)

    gpus = tf.config.experimental.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")
    threads = args.threads or max(1, env.num_cpus // max(1, hvd.local_size()))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(max(2, threads))

    log = MetricLogger(enabled=rank == 0)
    if rank == 0:
        env.prepare_dirs()
        print(f"horovod_mnist: {size} rank(s), {keras_name()}, checkpoints in {env.checkpoint_dir}", flush=True)

    (x_train, y_train), (x_test, y_test) = load_mnist(env.channel("train"), test_channel=env.channel("test"))
    x_shard, y_shard = x_train[rank::size], y_train[rank::size]
    full_epoch = (len(x_train) // size) // args.batch_size  # the same on every rank: fit steps are collectives
    if full_epoch < 1:
        raise HyperparameterError(
            "--batch-size", args.batch_size, f"exceeds each rank's shard ({len(x_train) // size} images)",
            f"use --batch-size <= {len(x_train) // size}")
    if args.steps_per_epoch > full_epoch:
        raise HyperparameterError(
            "--steps-per-epoch", args.steps_per_epoch,
            f"exceeds one pass over each rank's shard ({full_epoch} batches of {args.batch_size})",
            f"use --steps-per-epoch <= {full_epoch} or 0")
    steps_per_epoch = args.steps_per_epoch or full_epoch

    tf.random.set_seed(args.seed)
    model = build_cnn(seed=args.seed)
    # Horovod: scale the learning rate by the number of workers and wrap the optimizer.
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(args.learning_rate * size))
    compile_kwargs = {} if is_keras3() else {"experimental_run_tf_function": False}
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=["accuracy"],
                  **compile_kwargs)
    build_optimizer(model.optimizer, model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    start_step = restore_from_rank_0(checkpoint, env.checkpoint_dir, hvd, model.variables,
                                     optimizer_variables(model.optimizer))

    def any_rank_stopping(flag: bool) -> bool:
        return float(hvd.allreduce(tf.constant(1.0 if flag else 0.0), op=hvd.Sum).numpy()) > 0

    def evaluate() -> dict[str, float]:
        if rank != 0:
            return {}
        test_loss, test_accuracy = model.evaluate(x_test, y_test, batch_size=500, verbose=0)
        return {"test_loss": float(test_loss), "test_accuracy": float(test_accuracy)}

    counter = StepCheckpoint(checkpoint, env.checkpoint_dir, start_step=start_step,
                             every_steps=args.checkpoint_steps or steps_per_epoch, writer=rank == 0,
                             stop_agreement=any_rank_stopping, log=log)
    summaries = TrainingSummaries(env.tensorboard_dir if rank == 0 else None,
                                  learning_rate=lambda: learning_rate_of(model.optimizer))
    callbacks = [
        # Horovod: make every rank start from rank 0's weights (and optimizer state) after the first batch.
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average the epoch's metrics over the ranks before anything reads them.
        hvd_keras.callbacks.MetricAverageCallback(),
        counter,
        MetricLines(counter, log_steps=args.log_steps, log=log, evaluate=evaluate, summaries=summaries),
    ]
    with summaries:  # closes the event file however training ends
        started = time.monotonic()
        fit_from_step(
            model,
            lambda step: epoch_dataset(x_shard, y_shard, args.batch_size, seed=args.seed, start_step=step,
                                       steps_per_epoch=steps_per_epoch, epochs=args.epochs, stream=rank),
            start_step=start_step, steps_per_epoch=steps_per_epoch, epochs=args.epochs, callbacks=callbacks,
            counter=counter, verbose=1 if rank == 0 and sys.stdout.isatty() else 0,
        )
        if args.weights_digest:
            write_weights_digest(model, env.output_data_dir, rank)
        if counter.stopped or rank != 0:
            return
        save_checkpoint(checkpoint, env.checkpoint_dir, counter.step)
        wall = time.monotonic() - started
        result = evaluate()
        log.log(step=counter.step, **result, train_seconds=wall)
        summaries.log_evaluation(counter.step, loss=result["test_loss"], accuracy=result["test_accuracy"])
        summary = {"steps": counter.step, "resumed_from": start_step, "ranks": size, **result,
                   "train_seconds": round(wall, 2), "keras": keras_name()}
        write_summary(summary, env.output_data_dir)
        if args.save_model:
            print(f"model saved to {save_servable_model(model, env.model_dir)}", flush=True)


if __name__ == "__main__":
    run_entry_point(main)
