"""Sentiment of movie-review snippets with DTensor: data-, model- or spatial-parallel training of a tf-idf MLP.

TensorFlow's "Distributed training with DTensors" tutorial as a SageMaker-contract script; see
docs/training-scripts.md#dtensor_sentiment (data, model, meshes and layouts, export) and
#dtensor-devices-and-checkpoints.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from smddp_compat.entry_points.common.datasets import load_rotten_tomatoes
from smddp_compat.entry_points.common.dtensor_export import check_reloaded, write_saved_model
from smddp_compat.entry_points.common.dtensor_layers import MLP
from smddp_compat.entry_points.common.dtensor_mesh import (
    ClientTopology, HostCopy, build_mesh, initialize_devices, resolve_total_devices)
from smddp_compat.entry_points.common.dtensor_optimizers import Adam
from smddp_compat.entry_points.common.dtensor_training import MeshCheckpoint, classifier_steps, evaluate, train_epochs
from smddp_compat.entry_points.common.errors import CheckpointError, HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.lifecycle import run_entry_point
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.model_artifacts import write_summary
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments

__all__ = ["ParallelMode", "MODES", "TfIdfFeatures", "SentimentServer", "build_parser", "main"]

U = dtensor.UNSHARDED


@dataclass(frozen=True)
class ParallelMode:
    """A parallelism scheme: how the devices form a mesh and how weights and inputs are laid out on it.

    Attributes:
        name: ``data``, ``model`` or ``spatial``.
        model_shards: Devices that split the hidden units (the ``model`` mesh dimension), 1 for none.
        feature_shards: Devices that split the input features (the ``feature`` mesh dimension), 1 for none.
    """

    name: str
    model_shards: int
    feature_shards: int

    def mesh_dims(self, devices: int) -> list[tuple[str, int]]:
        """Mesh dimensions over `devices` devices (the rest of the devices form the ``batch`` dimension)."""
        dims = [("batch", devices // (self.model_shards * self.feature_shards))]
        if self.feature_shards > 1:
            dims.append(("feature", self.feature_shards))
        if self.model_shards > 1:
            dims.append(("model", self.model_shards))
        return dims

    def weight_layouts(self, mesh: dtensor.Mesh) -> list[dtensor.Layout]:
        """Layouts of W1 (features x hidden) and W2 (hidden x classes)."""
        feature = "feature" if self.feature_shards > 1 else U
        model = "model" if self.model_shards > 1 else U
        return [dtensor.Layout([feature, model], mesh), dtensor.Layout([model, U], mesh)]

    def input_layouts(self, mesh: dtensor.Mesh) -> tuple[dtensor.Layout, dtensor.Layout]:
        """Layouts of a batch of features and of its labels."""
        feature = "feature" if self.feature_shards > 1 else U
        return dtensor.Layout(["batch", feature], mesh), dtensor.Layout(["batch"], mesh)

    def validate(self, *, devices: int, batch_size: int, hidden_units: int) -> None:
        """Checks that the mesh fits the devices and the batch and hidden layer split evenly.

        Raises:
            HyperparameterError: Naming the hyperparameter to change.
        """
        per_replica = self.model_shards * self.feature_shards
        if devices % per_replica:
            raise HyperparameterError(
                "--devices", devices, f"--mode {self.name} needs a multiple of {per_replica}",
                f"use a multiple of {per_replica}, or another --mode")
        batch_shards = devices // per_replica
        if batch_size % batch_shards:
            raise HyperparameterError(
                "--batch-size", batch_size,
                f"does not split over the {batch_shards} batch shards of --mode {self.name} on {devices} devices",
                f"use a multiple of {batch_shards}")
        if hidden_units % self.model_shards:
            raise HyperparameterError(
                "--hidden-units", hidden_units, f"does not split over {self.model_shards} model shards",
                f"use a multiple of {self.model_shards}")


MODES: dict[str, ParallelMode] = {
    "data": ParallelMode("data", model_shards=1, feature_shards=1),
    "model": ParallelMode("model", model_shards=2, feature_shards=1),
    "spatial": ParallelMode("spatial", model_shards=2, feature_shards=2),
}


def _mode(text: str) -> ParallelMode:
    mode = MODES.get(str(text).strip().lower())
    if mode is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a parallel mode; choose one of {', '.join(MODES)}")
    return mode


class TfIdfFeatures(tf.Module):
    """Text -> ``log1p`` of tf-idf weights over the most frequent tokens of the training texts.

    Args:
        max_tokens: Vocabulary size (including the out-of-vocabulary token).
    """

    def __init__(self, max_tokens: int) -> None:
        super().__init__(name="tf_idf_features")
        self.vectorizer = tf.keras.layers.TextVectorization(output_mode="tf_idf", max_tokens=max_tokens)

    def adapt(self, texts: np.ndarray) -> None:
        """Learns the vocabulary and the inverse document frequencies from `texts`."""
        self.vectorizer.adapt(tf.constant(texts))

    @property
    def size(self) -> int:
        """Number of features (the vocabulary size; at most ``max_tokens``)."""
        return int(self.vectorizer.vocabulary_size())

    def digest(self) -> int:
        """A 62-bit fingerprint of the vocabulary, to tell whether a checkpoint was trained on the same features."""
        text = "\n".join(str(token) for token in self.vectorizer.get_vocabulary())
        return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 2

    def __call__(self, texts: tf.Tensor) -> tf.Tensor:
        return tf.math.log1p(self.vectorizer(texts))


class SentimentServer(tf.Module):
    """The exported model: raw strings in, class probabilities (rotten, fresh) out.

    Args:
        features: The fitted preprocessing.
        model: The host (plain-variable) copy of the trained MLP.
    """

    def __init__(self, features: TfIdfFeatures, model: MLP) -> None:
        super().__init__(name="sentiment_server")
        self.features = features
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        """``{"probabilities": [n, 2]}`` for `text` ``[n]``; column 1 is the probability of a fresh review."""
        return {"probabilities": tf.nn.softmax(self.model(self.features(text), training=False))}


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", type=_mode, default=MODES["data"], help="data, model or spatial")
    # Held-out loss is lowest after 2 epochs; later ones overfit (accuracy stays near 0.71, loss rises).
    parser.add_argument("--epochs", type=positive_int, default=2, help="epochs to train in this run")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="global batch size")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3)
    parser.add_argument("--hidden-units", type=positive_int, default=48)
    parser.add_argument("--max-tokens", type=positive_int, default=1200, help="tf-idf vocabulary size")
    parser.add_argument("--devices", type=non_negative_int, default=0,
                        help="mesh devices over all clients; 0: SMDDP_DTENSOR_DEVICES_PER_CLIENT x clients, else 8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-steps", type=positive_int, default=50)
    parser.add_argument("--eval-batch-size", type=positive_int, default=512)
    add_output_dir_arguments(parser)
    parser.add_argument("--export", type=boolean, default=True,
                        help="write the string-input SavedModel to <model_dir>/1 and check it reloads")
    return parser


def main() -> None:
    """Trains (continuing from any checkpoint), evaluates and exports the model (see the module docstring)."""
    args = parse_hyperparameters(build_parser())
    mode: ParallelMode = args.mode
    topology = ClientTopology.from_environ()
    args.devices = resolve_total_devices(args.devices, topology)
    mode.validate(devices=args.devices, batch_size=args.batch_size, hidden_units=args.hidden_units)
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    initialize_devices(args.devices, topology)
    mesh = build_mesh(mode.mesh_dims(args.devices), topology)
    log = MetricLogger(enabled=topology.is_chief)
    if topology.is_chief:
        env.prepare_dirs()
        print(f"dtensor_sentiment: --mode {mode.name}, mesh {dict(mode.mesh_dims(args.devices))}, "
              f"{topology.num_clients} client(s), checkpoints in {env.checkpoint_dir}", flush=True)

    (train_texts, y_train), (test_texts, y_test) = load_rotten_tomatoes(env.channel("train"),
                                                                        test_channel=env.channel("test"))
    if len(train_texts) < args.batch_size:
        raise HyperparameterError("--batch-size", args.batch_size, f"exceeds the {len(train_texts)} training texts",
                                  f"use --batch-size <= {len(train_texts)}")
    features = TfIdfFeatures(args.max_tokens)
    features.adapt(train_texts)
    if features.size % mode.feature_shards:
        raise HyperparameterError(
            "--max-tokens", args.max_tokens,
            f"the vocabulary has {features.size} tokens, which does not split over {mode.feature_shards} feature "
            "shards", "use an even --max-tokens no larger than the corpus' vocabulary")
    x_train = features(tf.constant(train_texts)).numpy()
    x_test = features(tf.constant(test_texts)).numpy()

    sizes = [features.size, args.hidden_units, 2]
    model = MLP(sizes, mode.weight_layouts(mesh), batch_norm=True, seed=args.seed)
    optimizer = Adam(model.trainable_variables, learning_rate=args.learning_rate)
    host_model = MLP(sizes, None, batch_norm=True, seed=args.seed)
    host_optimizer = Adam(host_model.trainable_variables, learning_rate=args.learning_rate)
    target_step = tf.Variable(0, dtype=tf.int64, name="target_step")
    vocabulary = tf.Variable(0, dtype=tf.int64, name="vocabulary_digest")
    checkpoint = MeshCheckpoint(
        HostCopy(model.variables + optimizer.variables, host_model.variables + host_optimizer.variables),
        env.checkpoint_dir, mesh=mesh, is_chief=topology.is_chief,
        model=host_model, optimizer=host_optimizer, target_step=target_step, vocabulary_digest=vocabulary)
    restored = checkpoint.restore()
    if restored is not None and int(vocabulary.numpy()) != features.digest():
        raise CheckpointError(
            f"the checkpoint in {env.checkpoint_dir} was trained on another vocabulary (other training data or "
            "--max-tokens); point --checkpoint-dir at an empty directory to start fresh.",
            path=str(env.checkpoint_dir))
    vocabulary.assign(features.digest())

    steps_per_epoch = len(x_train) // args.batch_size
    start_step = restored or 0
    if restored is not None and start_step < int(target_step.numpy()):
        end_step = int(target_step.numpy())
        log.log(resumed_step=start_step, target_step=end_step)
    else:
        end_step = start_step + args.epochs * steps_per_epoch
        if restored is not None:
            log.log(continued_step=start_step, target_step=end_step)
    target_step.assign(end_step)

    train_step, eval_step = classifier_steps(model, model.trainable_variables, optimizer.apply_gradients)
    summaries = TrainingSummaries(env.tensorboard_dir if topology.is_chief else None,
                                  learning_rate=lambda: learning_rate_of(optimizer))
    x_layout, y_layout = mode.input_layouts(mesh)

    def held_out() -> dict[str, float]:
        return evaluate(eval_step, x_test, y_test, x_layout=x_layout, y_layout=y_layout,
                        batch_size=args.eval_batch_size)

    def on_epoch_end(epoch: int, step: int, metrics: dict[str, float]) -> None:
        test = held_out()
        log.log(epoch=epoch, step=step, train_loss=metrics["train_loss"], train_accuracy=metrics["train_accuracy"],
                test_loss=test["loss"], test_accuracy=test["accuracy"])
        summaries.log_evaluation(step, loss=test["loss"], accuracy=test["accuracy"])

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

        summary: dict[str, object] = {"mode": mode.name, "steps": result.step, "started_at_step": start_step,
                                      "clients": topology.num_clients, "devices": args.devices,
                                      "test_loss": test["loss"], "test_accuracy": test["accuracy"],
                                      "train_seconds": round(result.seconds, 2)}
        if args.export:
            checkpoint.copy.pull()  # a collective; the host model now holds the trained values on every client
            if topology.is_chief:
                server = SentimentServer(features, host_model)
                path = write_saved_model(server, env.model_dir, {"serving_default": server.serve})
                probe = tf.constant(test_texts)
                expected = server.serve(probe)["probabilities"].numpy()
                reloaded = check_reloaded(path, {"text": probe}, "probabilities", expected)
                export_accuracy = float(np.mean(np.argmax(reloaded, axis=1) == y_test))
                log.log(export_accuracy=export_accuracy)
                summary.update(saved_model=str(path), export_accuracy=export_accuracy)
                print(f"model exported to {path}", flush=True)
        if topology.is_chief:
            write_summary(summary, env.output_data_dir)
        if topology.is_multi_client:
            dtensor.barrier(mesh, "dtensor_sentiment_done")  # nobody leaves while client 0 still writes


if __name__ == "__main__":
    run_entry_point(main)
