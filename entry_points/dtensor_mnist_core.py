"""MNIST with DTensor and TensorFlow's Core API: an MLP of DVariables trained by a hand-written Adam.

TensorFlow's "Distributed training with Core APIs and DTensor" tutorial as a SageMaker-contract script; see
docs/training-scripts.md#dtensor_mnist_core (model, mesh, plots, export) and #dtensor-devices-and-checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf
from tensorflow.experimental import dtensor

from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.dtensor_export import check_reloaded, write_saved_model
from smddp_compat.entry_points.common.dtensor_layers import MLP
from smddp_compat.entry_points.common.dtensor_mesh import (
    ClientTopology, HostCopy, build_mesh, initialize_devices, resolve_total_devices)
from smddp_compat.entry_points.common.dtensor_optimizers import Adam
from smddp_compat.entry_points.common.dtensor_training import MeshCheckpoint, classifier_steps, evaluate, train_epochs
from smddp_compat.entry_points.common.errors import HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.lifecycle import run_entry_point
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.model_artifacts import write_summary
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments

__all__ = ["LAYER_SIZES", "MnistServer", "plot_history", "build_parser", "main"]

LAYER_SIZES = (784, 700, 500, 10)
U = dtensor.UNSHARDED


class MnistServer(tf.Module):
    """The exported model: flattened images in, digit probabilities out.

    Args:
        model: The host (plain-variable) copy of the trained MLP.
    """

    def __init__(self, model: MLP) -> None:
        super().__init__(name="mnist_server")
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, LAYER_SIZES[0]], tf.float32, name="images")])
    def serve(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        """``{"probabilities": [n, 10]}`` for `images` ``[n, 784]`` with values in [0, 1]."""
        return {"probabilities": tf.nn.softmax(self.model(images))}


def plot_history(history: list[dict[str, float]], directory: Path) -> list[Path]:
    """Draws ``loss.png`` and ``accuracy.png`` (train and test per epoch) into `directory`, atomically.

    Args:
        history: One dict per epoch with ``epoch``, ``train_loss``, ``test_loss``, ``train_accuracy``,
            ``test_accuracy``.
        directory: Target directory (must exist).

    Returns:
        The two files.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a training host
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [int(row["epoch"]) for row in history]
    written = []
    for metric, label in (("loss", "Cross-entropy loss"), ("accuracy", "Accuracy")):
        figure, axes = plt.subplots(figsize=(7, 4.5))
        axes.plot(epochs, [row[f"train_{metric}"] for row in history], marker="o", label=f"Training {metric}")
        axes.plot(epochs, [row[f"test_{metric}"] for row in history], marker="o", label=f"Held-out {metric}")
        axes.set_xlabel("Epoch")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(label)
        axes.set_title(f"{label} per epoch (DTensor MLP on MNIST)")
        axes.legend()
        axes.grid(alpha=0.3)
        final = directory / f"{metric}.png"
        temp = directory / f".tmp-{metric}-{uuid.uuid4().hex[:8]}.png"
        figure.savefig(temp, dpi=100)
        plt.close(figure)
        os.replace(temp, final)
        written.append(final)
    return written


def _weight_layouts(mesh: dtensor.Mesh, model_shards: int) -> list[dtensor.Layout]:
    # Hidden units split over "model": W1 by its output axis, W2 by its input axis, so that the split hidden layer
    # feeds W2 with no relayout; the small output layer stays replicated.
    model = "model" if model_shards > 1 else U
    return [dtensor.Layout([U, model], mesh), dtensor.Layout([model, U], mesh), dtensor.Layout([U, U], mesh)]


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=positive_int, default=10, help="total epochs (a resumed run finishes them)")
    parser.add_argument("--batch-size", type=positive_int, default=128, help="global batch size")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3)
    parser.add_argument("--devices", type=non_negative_int, default=0,
                        help="mesh devices over all clients; 0: SMDDP_DTENSOR_DEVICES_PER_CLIENT x clients, else 8")
    parser.add_argument("--model-shards", type=positive_int, default=1,
                        help="devices splitting each hidden layer (1: pure data parallelism)")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--log-steps", type=positive_int, default=50)
    parser.add_argument("--eval-batch-size", type=positive_int, default=500)
    add_output_dir_arguments(parser)
    parser.add_argument("--save-model", type=boolean, default=True,
                        help="write the SavedModel to <model_dir>/1 and check it reloads")
    return parser


def _validate(args: argparse.Namespace) -> None:
    if args.devices % args.model_shards:
        raise HyperparameterError(
            "--model-shards", args.model_shards, f"does not divide --devices {args.devices}",
            f"use a divisor of {args.devices}")
    for hidden in LAYER_SIZES[1:-1]:
        if hidden % args.model_shards:
            raise HyperparameterError(
                "--model-shards", args.model_shards, f"does not divide the hidden layer of {hidden} units",
                "use 1, 2, 4, 5 or 10")
    batch_shards = args.devices // args.model_shards
    if args.batch_size % batch_shards:
        raise HyperparameterError(
            "--batch-size", args.batch_size,
            f"does not split over {batch_shards} batch shards (--devices {args.devices} / --model-shards "
            f"{args.model_shards})", f"use a multiple of {batch_shards}")


def main() -> None:
    """Trains (resuming from any checkpoint), evaluates, plots and saves the model (see the module docstring)."""
    args = parse_hyperparameters(build_parser())
    topology = ClientTopology.from_environ()
    args.devices = resolve_total_devices(args.devices, topology)
    _validate(args)
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    initialize_devices(args.devices, topology)
    dims = [("batch", args.devices // args.model_shards)] + ([("model", args.model_shards)]
                                                            if args.model_shards > 1 else [])
    mesh = build_mesh(dims, topology)
    log = MetricLogger(enabled=topology.is_chief)
    if topology.is_chief:
        env.prepare_dirs()
        print(f"dtensor_mnist_core: mesh {dict(dims)}, {topology.num_clients} client(s), "
              f"checkpoints in {env.checkpoint_dir}", flush=True)

    (x_train, y_train), (x_test, y_test) = load_mnist(env.channel("train"), flatten=True,
                                                      test_channel=env.channel("test"))
    steps_per_epoch = len(x_train) // args.batch_size
    if steps_per_epoch < 1:
        raise HyperparameterError("--batch-size", args.batch_size, f"exceeds the {len(x_train)} training images",
                                  f"use --batch-size <= {len(x_train)}")

    model = MLP(LAYER_SIZES, _weight_layouts(mesh, args.model_shards), seed=args.seed)
    optimizer = Adam(model.trainable_variables, learning_rate=args.learning_rate)
    host_model = MLP(LAYER_SIZES, None, seed=args.seed)
    host_optimizer = Adam(host_model.trainable_variables, learning_rate=args.learning_rate)
    history_json = tf.Variable("[]", dtype=tf.string, name="history")
    checkpoint = MeshCheckpoint(
        HostCopy(model.variables + optimizer.variables, host_model.variables + host_optimizer.variables),
        env.checkpoint_dir, mesh=mesh, is_chief=topology.is_chief,
        model=host_model, optimizer=host_optimizer, history=history_json)
    start_step = checkpoint.restore() or 0
    history: list[dict[str, float]] = [row for row in json.loads(history_json.numpy().decode("utf-8"))
                                       if row["step"] <= start_step]
    end_step = args.epochs * steps_per_epoch
    if start_step:
        log.log(resumed_step=start_step, target_step=end_step)

    train_step, eval_step = classifier_steps(model, model.trainable_variables, optimizer.apply_gradients)
    summaries = TrainingSummaries(env.tensorboard_dir if topology.is_chief else None,
                                  learning_rate=lambda: learning_rate_of(optimizer))
    x_layout = dtensor.Layout(["batch", U], mesh)
    y_layout = dtensor.Layout(["batch"], mesh)

    def held_out() -> dict[str, float]:
        return evaluate(eval_step, x_test, y_test, x_layout=x_layout, y_layout=y_layout,
                        batch_size=args.eval_batch_size)

    def on_epoch_end(epoch: int, step: int, metrics: dict[str, float]) -> None:
        test = held_out()
        row = {"epoch": epoch, "step": step, "train_loss": metrics["train_loss"],
               "train_accuracy": metrics["train_accuracy"], "test_loss": test["loss"],
               "test_accuracy": test["accuracy"]}
        log.log(**row)
        summaries.log_evaluation(step, loss=test["loss"], accuracy=test["accuracy"])
        history.append(row)
        history_json.assign(json.dumps(history))  # saved with the checkpoint that follows
        if topology.is_chief:
            plot_history(history, env.output_data_dir)

    with summaries:  # closes the event file however training ends
        result = train_epochs(
            train_step=train_step, x=x_train, y=y_train, x_layout=x_layout, y_layout=y_layout,
            batch_size=args.batch_size, start_step=start_step, end_step=end_step, seed=args.seed,
            checkpoint=checkpoint, log=log, log_steps=args.log_steps, on_epoch_end=on_epoch_end, summaries=summaries)
        if result.stopped:
            return
        test = held_out()
        log.log(step=result.step, test_loss=test["loss"], test_accuracy=test["accuracy"], train_seconds=result.seconds)
        summaries.log_evaluation(result.step, loss=test["loss"], accuracy=test["accuracy"])
        summary: dict[str, object] = {"steps": result.step, "started_at_step": start_step,
                                      "clients": topology.num_clients, "devices": args.devices,
                                      "model_shards": args.model_shards, "test_loss": test["loss"],
                                      "test_accuracy": test["accuracy"], "train_seconds": round(result.seconds, 2),
                                      "history": history}
        if args.save_model:
            checkpoint.copy.pull()  # a collective; the host model now holds the trained values on every client
            if topology.is_chief:
                server = MnistServer(host_model)
                path = write_saved_model(server, env.model_dir, {"serving_default": server.serve})
                expected = server.serve(tf.constant(x_test))["probabilities"].numpy()
                check_reloaded(path, {"images": tf.constant(x_test)}, "probabilities", expected)
                summary["saved_model"] = str(path)
                print(f"model saved to {path}", flush=True)
        if topology.is_chief:
            if history:
                plot_history(history, env.output_data_dir)
            write_summary(summary, env.output_data_dir)
        if topology.is_multi_client:
            dtensor.barrier(mesh, "dtensor_mnist_core_done")  # nobody leaves while client 0 still writes


if __name__ == "__main__":
    run_entry_point(main)
