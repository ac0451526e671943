"""The training loop shared by the DTensor scripts: `train_epochs` (batches packed onto a mesh, metric lines, SIGTERM
agreed by all clients), `MeshCheckpoint` (layout-agnostic checkpoints through the host copy, written by client 0),
`evaluate` and `classifier_steps`; see docs/training-scripts.md#dtensor-devices-and-checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from smddp_compat.entry_points.common.checkpoints import restore_latest, save_checkpoint
from smddp_compat.entry_points.common.dtensor_mesh import HostCopy, fetch_global, mesh_max, mesh_min, pack_global
from smddp_compat.entry_points.common.errors import CheckpointError
from smddp_compat.entry_points.common.lifecycle import termination_requested
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries

__all__ = ["MeshCheckpoint", "LoopResult", "TrainStep", "EvalStep", "classifier_steps", "epoch_order",
           "train_epochs", "evaluate", "stop_agreed"]

TrainStep = Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
"""(x, y) DTensors -> (mean loss, accuracy) of the global batch, replicated scalars."""
EvalStep = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
"""(x, y, weight) DTensors -> (sum of weighted losses, sum of weighted correct predictions), replicated scalars."""


class MeshCheckpoint:
    """Layout-agnostic checkpoints of mesh variables, written by client 0 from their host twins.

    Args:
        copy: Pairs of (mesh variable, host variable) to save and restore.
        directory: The checkpoint directory (``--checkpoint-dir``).
        mesh: The mesh the variables live on (for the clients' agreement on the restored step).
        is_chief: Whether this client writes.
        **host_objects: Trackables saved in the checkpoint: the host twins (model, optimizer) and any host-only
            variables (progress counters).
    """

    def __init__(self, copy: HostCopy, directory: str | Path, *, mesh: dtensor.Mesh, is_chief: bool,
                 **host_objects: tf.Module | tf.Variable) -> None:
        self.copy = copy
        self.directory = Path(directory)
        self.mesh = mesh
        self.is_chief = is_chief
        self.checkpoint = tf.train.Checkpoint(**host_objects)

    def restore(self) -> int | None:
        """Restores the newest checkpoint onto the mesh (every client calls it): its step, or ``None`` for a fresh
        start.

        Raises:
            CheckpointError: The checkpoint does not fit the model, or the clients found different steps.
        """
        step = restore_latest(self.checkpoint, self.directory)
        mark = -1.0 if step is None else float(step)
        low, high = mesh_min(mark, self.mesh), mesh_max(mark, self.mesh)
        if low != high:
            raise CheckpointError(
                f"the DTensor clients found different checkpoints in {str(self.directory)!r} (steps {low:.0f} and "
                f"{high:.0f}; -1 = none): every client must see the same --checkpoint-dir (shared storage).",
                path=str(self.directory),
            )
        if step is not None:
            self.copy.push()
        return step

    def save(self, step: int) -> Path | None:
        """Gathers the mesh values (every client calls it) and, on client 0, writes ``step-<step>``: its folder there,
        ``None`` elsewhere.
        """
        self.copy.pull()
        if not self.is_chief:
            return None
        return save_checkpoint(self.checkpoint, self.directory, step)


@dataclass
class LoopResult:
    """What `train_epochs` did.

    Attributes:
        step: The global step reached.
        stopped: Whether SIGTERM stopped it early (after a checkpoint).
        seconds: Wall time of the loop.
        epochs: Per-epoch training metrics of this run (``epoch``, ``step``, ``train_loss``, ``train_accuracy``).
    """

    step: int
    stopped: bool
    seconds: float
    epochs: list[dict[str, float]] = field(default_factory=list)


def epoch_order(num_examples: int, epoch: int, seed: int) -> np.ndarray:
    """The example order of `epoch`: a permutation that depends only on (seed, epoch), so every client agrees."""
    return np.random.default_rng([seed, epoch]).permutation(num_examples)


def stop_agreed(mesh: dtensor.Mesh) -> bool:
    """Whether any client received SIGTERM (a collective: every client calls it at the same step)."""
    return mesh_max(1.0 if termination_requested() else 0.0, mesh) > 0


def _scalar(value: tf.Tensor) -> float:
    return float(fetch_global(value))


def train_epochs(
    *,
    train_step: TrainStep,
    x: np.ndarray,
    y: np.ndarray,
    x_layout: dtensor.Layout,
    y_layout: dtensor.Layout,
    batch_size: int,
    start_step: int,
    end_step: int,
    seed: int,
    checkpoint: MeshCheckpoint,
    log: MetricLogger,
    log_steps: int = 50,
    on_epoch_end: Callable[[int, int, dict[str, float]], None] | None = None,
    summaries: TrainingSummaries | None = None,
) -> LoopResult:
    """Trains from `start_step` to `end_step`, one global batch per step, dropping each epoch's remainder.

    Args:
        x: All training inputs (the same on every client).
        x_layout: Layout of a batch of `x` (its first axis sharded over the batch mesh dimension).
        batch_size: Global batch size.
        start_step: Steps already taken (from the checkpoint); a mid-epoch value skips that epoch's first batches.
        seed: Shuffling seed.
        checkpoint: Saved at each epoch end and on SIGTERM.
        log: Metric lines (``step=..; loss=..; accuracy=..;`` every `log_steps` steps).
        on_epoch_end: Called after each completed epoch with (epoch number from 1, step, train metrics), before the
            checkpoint (e.g. to evaluate and log).
        summaries: Also receives each metric line's loss and accuracy (TensorBoard, client 0); ``None``: nowhere.

    Raises:
        ValueError: `batch_size` exceeds the number of examples.
    """
    steps_per_epoch = len(x) // batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"a batch of {batch_size} exceeds the {len(x)} training examples")
    started = time.monotonic()
    step = start_step
    summaries = summaries if summaries is not None else TrainingSummaries(None)
    summaries.start(step)
    result = LoopResult(step=step, stopped=False, seconds=0.0)
    losses: list[float] = []
    accuracies: list[float] = []
    window: list[tuple[float, float]] = []
    while step < end_step:
        epoch, offset = divmod(step, steps_per_epoch)
        order = epoch_order(len(x), epoch, seed)
        for position in range(offset, steps_per_epoch):
            if step >= end_step:
                break
            if stop_agreed(checkpoint.mesh):
                checkpoint.save(step)
                log.log(step=step, stopped=1)
                result.stopped = True
                result.step = step
                result.seconds = time.monotonic() - started
                return result
            index = order[position * batch_size:(position + 1) * batch_size]
            loss, accuracy = train_step(pack_global(x[index], x_layout), pack_global(y[index], y_layout))
            step += 1
            losses.append(_scalar(loss))
            accuracies.append(_scalar(accuracy))
            window.append((losses[-1], accuracies[-1]))
            log.progress(position + 1, steps_per_epoch, loss=losses[-1])
            if step % log_steps == 0:
                mean_loss, mean_accuracy = np.mean(window, axis=0)
                log.log(step=step, loss=float(mean_loss), accuracy=float(mean_accuracy))
                summaries.log_step(step, loss=float(mean_loss), accuracy=float(mean_accuracy))
                window.clear()
        if step % steps_per_epoch == 0 and losses:
            metrics = {"epoch": step // steps_per_epoch, "step": step, "train_loss": float(np.mean(losses)),
                       "train_accuracy": float(np.mean(accuracies))}
            result.epochs.append(metrics)
            if on_epoch_end is not None:
                on_epoch_end(int(metrics["epoch"]), step, metrics)
            checkpoint.save(step)
            losses.clear()
            accuracies.clear()
    if step % steps_per_epoch:  # stopped mid-epoch at end_step
        checkpoint.save(step)
    result.step = step
    result.seconds = time.monotonic() - started
    return result


def evaluate(eval_step: EvalStep, x: np.ndarray, y: np.ndarray, *, x_layout: dtensor.Layout,
             y_layout: dtensor.Layout, batch_size: int) -> dict[str, float]:
    """Mean loss and accuracy (``{"loss": ..., "accuracy": ...}``) of the model over all of (`x`, `y`), on the mesh,
    `batch_size` examples a step (rounded up to a multiple of the batch mesh dimension; `y_layout` also lays out the
    weights). The last batch is padded with zero-weight copies of the first example, so every example counts once.
    """
    shards = x_layout.mesh.dim_size(x_layout.sharding_specs[0]) if x_layout.sharding_specs[0] != dtensor.UNSHARDED \
        else 1
    batch_size = -(-batch_size // shards) * shards
    total_loss = total_correct = 0.0
    for start in range(0, len(x), batch_size):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        weights = np.ones(len(xb), np.float32)
        padding = (-len(xb)) % shards
        if padding:
            xb = np.concatenate([xb, np.repeat(xb[:1], padding, axis=0)])
            yb = np.concatenate([yb, np.repeat(yb[:1], padding, axis=0)])
            weights = np.concatenate([weights, np.zeros(padding, np.float32)])
        loss_sum, correct_sum = eval_step(pack_global(xb, x_layout), pack_global(yb, y_layout),
                                          pack_global(weights, y_layout))
        total_loss += _scalar(loss_sum)
        total_correct += _scalar(correct_sum)
    return {"loss": total_loss / max(1, len(x)), "accuracy": total_correct / max(1, len(x))}


def classifier_steps(
    model: Callable[..., tf.Tensor],
    trainable_variables: list[tf.Variable],
    apply_gradients: Callable[[list[tf.Tensor], list[tf.Variable]], None],
) -> tuple[TrainStep, EvalStep]:
    """Compiled ``(train_step, eval_step)`` of a classifier ``model(x, training=bool) -> logits`` under softmax
    cross-entropy, `apply_gradients` being the optimizer's ``(gradients, variables) -> None``. The steps are written for
    the global batch; DTensor turns them into per-device programs with the collectives the layouts call for.
    """

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        gradients = tape.gradient(loss, trainable_variables)
        apply_gradients(gradients, trainable_variables)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=y.dtype), y), tf.float32)
        return loss, tf.reduce_mean(correct)

    @tf.function
    def eval_step(x: tf.Tensor, y: tf.Tensor, weight: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(x, training=False)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=y.dtype), y), tf.float32)
        return tf.reduce_sum(losses * weight), tf.reduce_sum(correct * weight)

    return train_step, eval_step
