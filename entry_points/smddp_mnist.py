"""MNIST CNN trained with the SageMaker distributed data parallel (SMDDP) TensorFlow API, the shape of AWS's example.

One process per device (``smddprun -np 2 python entry_points/smddp_mnist.py``); see
docs/training-scripts.md#smddp_mnist (the SMDDP steps, sharding, metrics, SIGTERM).
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

import numpy as np
import tensorflow as tf

import smddp_compat.tensorflow as sdp
from smddp_compat.entry_points.common.checkpoints import restore_from_rank_0, save_checkpoint
from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.errors import HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.keras_flavor import build_optimizer, keras_name, optimizer_variables
from smddp_compat.entry_points.common.lifecycle import run_entry_point, termination_requested
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.mnist_model import build_cnn
from smddp_compat.entry_points.common.model_artifacts import save_servable_model, write_summary, write_weights_digest
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=positive_int, default=5, help="passes over each rank's shard")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per-rank batch size")
    parser.add_argument("--learning-rate", type=positive_float, default=0.001,
                        help="single-rank Adam learning rate; multiplied by size()")
    parser.add_argument("--max-steps", type=non_negative_int, default=0,
                        help="stop after this many global steps in total (0: epochs decide)")
    parser.add_argument("--checkpoint-steps", type=non_negative_int, default=0,
                        help="checkpoint every N steps (0: at each epoch end); always at the end and on SIGTERM")
    parser.add_argument("--log-steps", type=positive_int, default=50, help="print a metrics line every N steps")
    add_output_dir_arguments(parser)
    parser.add_argument("--seed", type=non_negative_int, default=42)
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="TF intra-op threads per rank (0: CPUs / local_size)")
    parser.add_argument("--save-model", type=boolean, default=True, help="save the final model (rank 0)")
    parser.add_argument("--weights-digest", type=boolean, default=False,
                        help="write weights-rank<r>.sha256 to the output data dir (every rank)")
    parser.add_argument("--step-delay", type=float, default=0.0, help=argparse.SUPPRESS)  # tests: slow steps down
    return parser


def _pin_devices(threads: int, num_cpus: int) -> None:
    gpus = tf.config.experimental.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        # Pin one GPU per process.
        tf.config.experimental.set_visible_devices(gpus[sdp.local_rank()], "GPU")
    # Ranks on one host share its CPUs: without a cap each would start one thread per core.
    per_rank = threads or max(1, num_cpus // max(1, sdp.local_size()))
    tf.config.threading.set_intra_op_parallelism_threads(per_rank)
    tf.config.threading.set_inter_op_parallelism_threads(max(2, per_rank))


def _epoch_order(shard_size: int, seed: int, epoch: int, rank: int) -> np.ndarray:
    # Deterministic per (seed, epoch, rank), so a resumed run continues with exactly the batches it would have seen.
    return np.random.default_rng([seed, epoch, rank]).permutation(shard_size)


def main() -> None:
    """Trains, evaluates and saves the model (see the module docstring)."""
    args = parse_hyperparameters(build_parser())
    sdp.init()
    rank, size = sdp.rank(), sdp.size()
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    _pin_devices(args.threads, env.num_cpus)
    log = MetricLogger(enabled=rank == 0)
    if rank == 0:
        env.prepare_dirs()
        print(f"smddp_mnist: {size} rank(s), {keras_name()}, TensorFlow {tf.__version__}, "
              f"checkpoints in {env.checkpoint_dir}", flush=True)

    (x_train, y_train), (x_test, y_test) = load_mnist(env.channel("train"), test_channel=env.channel("test"))
    x_shard, y_shard = x_train[rank::size], y_train[rank::size]
    # Every rank must take the same number of steps (each step is a collective): size it from the smallest shard.
    steps_per_epoch = (len(x_train) // size) // args.batch_size
    if steps_per_epoch < 1:
        raise HyperparameterError(
            "--batch-size", args.batch_size,
            f"is larger than each rank's shard ({len(x_train) // size} images for {size} ranks)",
            f"use --batch-size <= {len(x_train) // size}",
        )
    total_steps = args.epochs * steps_per_epoch
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    checkpoint_every = args.checkpoint_steps or steps_per_epoch

    tf.random.set_seed(args.seed)
    mnist_model = build_cnn(seed=args.seed)
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    # Scale the learning rate by the number of workers.
    opt = tf.keras.optimizers.Adam(args.learning_rate * size)
    build_optimizer(opt, mnist_model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)

    start_step = restore_from_rank_0(checkpoint, env.checkpoint_dir, sdp, mnist_model.variables,
                                     optimizer_variables(opt))

    @tf.function
    def training_step(images: tf.Tensor, labels: tf.Tensor, first_batch: bool) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)

        # Wrap tf.GradientTape with the library's DistributedGradientTape.
        tape = sdp.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))

        if first_batch:
            # Broadcast model and optimizer variables.
            sdp.broadcast_variables(mnist_model.variables, root_rank=0)
            sdp.broadcast_variables(optimizer_variables(opt), root_rank=0)

        hits = tf.cast(tf.equal(tf.argmax(probs, axis=1), tf.cast(labels, tf.int64)), tf.float32)
        return loss_value, tf.reduce_mean(hits)

    def evaluate() -> tuple[float, float]:
        probs = mnist_model.predict(x_test, batch_size=500, verbose=0)
        test_loss = float(loss(y_test, probs).numpy())
        return test_loss, float(np.mean(np.argmax(probs, axis=1) == y_test))

    def checkpoint_now(step: int) -> None:
        # Save checkpoints only from the leader.
        if rank == 0:
            save_checkpoint(checkpoint, env.checkpoint_dir, step)

    # Rank 0 alone writes TensorBoard summaries; the block closes the event file however training ends.
    with TrainingSummaries(env.tensorboard_dir if rank == 0 else None,
                           learning_rate=lambda: learning_rate_of(opt)) as summaries:
        started = time.monotonic()
        step = start_step
        summaries.start(step)
        stopped_early = False
        window: list[tuple[float, float]] = []  # since the last metrics line
        epoch_stats: list[tuple[float, float]] = []  # since the start of the epoch (or of this run)
        while step < total_steps:
            epoch, offset = divmod(step, steps_per_epoch)
            order = _epoch_order(len(x_shard), args.seed, epoch, rank)
            for batch in range(offset, steps_per_epoch):
                if step >= total_steps:
                    break
                idx = order[batch * args.batch_size:(batch + 1) * args.batch_size]
                loss_value, accuracy = training_step(
                    tf.constant(x_shard[idx]), tf.constant(y_shard[idx]), step == start_step
                )
                step += 1
                if args.step_delay:
                    time.sleep(args.step_delay)
                # One out-of-band all-reduce per step carries the logged loss/accuracy and the stop request,
                # so that every rank stops at the same step when any of them got SIGTERM.
                reduced = sdp.oob_allreduce(
                    tf.stack([loss_value, accuracy, tf.constant(1.0 if termination_requested() else 0.0)])
                ).numpy()
                window.append((float(reduced[0]), float(reduced[1])))
                epoch_stats.append(window[-1])
                log.progress(batch + 1, steps_per_epoch, loss=reduced[0])
                if step % args.log_steps == 0:
                    mean = np.mean(window, axis=0)
                    log.log(epoch=epoch + 1, step=step, loss=mean[0], accuracy=mean[1])
                    summaries.log_step(step, loss=mean[0], accuracy=mean[1])
                    window.clear()
                if reduced[2] > 0:
                    checkpoint_now(step)
                    if rank == 0:
                        print(f"stopped on SIGTERM at step {step}; checkpoint saved", flush=True)
                    stopped_early = True
                    break
                if step % checkpoint_every == 0 and step < total_steps:
                    checkpoint_now(step)
            if stopped_early:
                break
            if rank == 0 and (step % steps_per_epoch == 0 or step >= total_steps):
                test_loss, test_accuracy = evaluate()
                mean = np.mean(epoch_stats, axis=0) if epoch_stats else (float("nan"), float("nan"))
                log.log(epoch=epoch + 1, step=step, loss=mean[0], accuracy=mean[1], test_loss=test_loss,
                        test_accuracy=test_accuracy)
                summaries.log_evaluation(step, loss=test_loss, accuracy=test_accuracy)
            window.clear()
            epoch_stats.clear()

        if args.weights_digest:
            write_weights_digest(mnist_model, env.output_data_dir, rank)
        if stopped_early:
            return
        checkpoint_now(step)
        if rank == 0:
            test_loss, test_accuracy = evaluate()
            wall = time.monotonic() - started
            log.log(step=step, test_loss=test_loss, test_accuracy=test_accuracy, train_seconds=wall)
            summaries.log_evaluation(step, loss=test_loss, accuracy=test_accuracy)
            summary = {"steps": step, "resumed_from": start_step, "ranks": size, "test_loss": test_loss,
                       "test_accuracy": test_accuracy, "train_seconds": round(wall, 2), "keras": keras_name()}
            write_summary(summary, env.output_data_dir)
            if args.save_model:
                path = save_servable_model(mnist_model, env.model_dir)
                print(f"model saved to {path}", flush=True)


if __name__ == "__main__":
    run_entry_point(main)
