"""Keras ``fit`` that checkpoints every N steps, stops cleanly on SIGTERM and resumes mid-epoch.

``model.fit`` counts epochs, not steps; a job stopped in the middle of an epoch must continue with the very next
batch, not repeat or skip some. `fit_from_step` does it by (1) drawing each epoch's batch order from a seed, so
that the order is known without replaying it, and (2) finishing a partial epoch with a first ``fit`` call of the
remaining steps before the ordinary one. `StepCheckpoint` counts global steps across both calls, writes
checkpoints with `smddp_compat.entry_points.common.checkpoints`, and agrees with the other workers (through a
caller-given collective) on stopping when any of them got SIGTERM. `MetricLines` prints the ``name=value;`` lines and
records the same values as TensorBoard summaries.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from smddp_compat.entry_points.common.checkpoints import save_checkpoint
from smddp_compat.entry_points.common.lifecycle import termination_requested
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries

__all__ = ["epoch_dataset", "StepCheckpoint", "MetricLines", "fit_from_step"]

StopAgreement = Callable[[bool], bool]
"""Given this process's "SIGTERM received" flag, returns whether any worker received one (a collective call)."""


def epoch_dataset(x: np.ndarray, y: np.ndarray, batch_size: int, *, seed: int, start_step: int,
                  steps_per_epoch: int, epochs: int, stream: int = 0) -> tf.data.Dataset:
    """A finite dataset of ``(x_batch, y_batch)`` from global step `start_step` to the end of training (`epochs` of
    `steps_per_epoch` batches, at most ``len(x) // batch_size``), from the examples this process feeds. Epoch ``e``
    visits the first ``steps_per_epoch * batch_size`` items of a permutation drawn from ``(seed, e, stream)``
    (`stream`: e.g. the Horovod rank, for processes that shuffle different shards); a restart from any step produces
    exactly the batches the stopped run had still to see.
    """
    first_epoch, offset = divmod(start_step, steps_per_epoch)
    used = steps_per_epoch * batch_size
    orders = [np.random.default_rng([seed, epoch, stream]).permutation(len(x))[:used]
              for epoch in range(first_epoch, epochs)]
    index = np.concatenate(orders)[offset * batch_size:] if orders else np.zeros(0, dtype=np.int64)
    return tf.data.Dataset.from_tensor_slices((x[index], y[index])).batch(batch_size, drop_remainder=True)


class StepCheckpoint(tf.keras.callbacks.Callback):
    """Counts global steps; checkpoints every `every_steps`, at the end and on SIGTERM; stops on SIGTERM.

    Args:
        checkpoint: What to save (model and optimizer).
        start_step: The step training (re)starts from.
        writer: Whether this process writes checkpoints (rank 0 / the chief).
        scratch_for_non_writer: Non-writers still write, into a temporary directory that is deleted right after
            (what the TF guide asks of MultiWorkerMirroredStrategy workers, whose save may take part in
            collectives); ``False``: non-writers skip saving (Horovod).
        stop_agreement: Collective turning every worker's SIGTERM flag into one decision; ``None``: local flag.
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: str | Path, *, start_step: int, every_steps: int,
                 writer: bool, scratch_for_non_writer: bool = False, stop_agreement: StopAgreement | None = None,
                 log: MetricLogger | None = None) -> None:
        super().__init__()
        self.checkpoint = checkpoint
        self.directory = Path(directory)
        self.step = start_step
        self.every_steps = max(1, every_steps)
        self.writer = writer
        self.scratch_for_non_writer = scratch_for_non_writer
        self.stop_agreement = stop_agreement
        self.log = log or MetricLogger(enabled=writer)
        self.stopped = False

    def save(self) -> None:
        """Writes a checkpoint of the current step (a scratch one, deleted, on non-writers when so configured)."""
        if self.writer:
            save_checkpoint(self.checkpoint, self.directory, self.step)
        elif self.scratch_for_non_writer:
            scratch = tempfile.mkdtemp(prefix="ckpt-non-chief-")
            try:
                save_checkpoint(self.checkpoint, scratch, self.step)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Advances the step; saves on schedule or stops on SIGTERM."""
        self.step += 1
        flag = termination_requested()
        stop = self.stop_agreement(flag) if self.stop_agreement is not None else flag
        if stop:
            self.save()
            self.stopped = True
            self.model.stop_training = True
            if self.log.enabled:
                print(f"stopped on SIGTERM at step {self.step}; checkpoint saved", flush=True)
        elif self.step % self.every_steps == 0:
            self.save()


class MetricLines(tf.keras.callbacks.Callback):
    """Prints ``epoch=; step=; loss=; accuracy=;`` every `log_steps` and a line with the epoch's logs at its end, and
    records the same values in `summaries` (TensorBoard; a no-op on ranks other than 0).

    Args:
        counter: The `StepCheckpoint` whose step count the lines carry.
        log: The printer (disabled on ranks other than 0).
        evaluate: Optional ``() -> {"test_loss": ..., "test_accuracy": ...}`` run at each epoch end.
        summaries: Where the per-step and held-out values are also recorded; ``None``: nowhere.
    """

    def __init__(self, counter: StepCheckpoint, *, log_steps: int, log: MetricLogger,
                 evaluate: Callable[[], dict[str, float]] | None = None,
                 summaries: TrainingSummaries | None = None) -> None:
        super().__init__()
        self.counter = counter
        self.log_steps = max(1, log_steps)
        self.log = log
        self.evaluate = evaluate
        self.summaries = summaries if summaries is not None else TrainingSummaries(None)
        self.epoch = 0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Starts the step-time clock (each ``fit`` call of `fit_from_step`: the time between them is not a step's)."""
        self.summaries.start(self.counter.step)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Remembers the (absolute) epoch number."""
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Per-step line with Keras's running averages of the epoch so far."""
        step = self.counter.step
        if step % self.log_steps == 0 and logs:
            values = _numbers(logs, ("loss", "accuracy"))
            self.log.log(epoch=self.epoch + 1, step=step, **values)
            if len(values) == 2:
                self.summaries.log_step(step, **values)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Epoch line (train metrics as averaged by earlier callbacks, plus the test metrics)."""
        if self.counter.stopped:
            return
        extra = self.evaluate() if self.evaluate is not None else {}
        self.log.log(epoch=epoch + 1, step=self.counter.step, **_numbers(logs or {}, ("loss", "accuracy")), **extra)
        if "test_loss" in extra and "test_accuracy" in extra:
            self.summaries.log_evaluation(self.counter.step, loss=extra["test_loss"], accuracy=extra["test_accuracy"])


def _numbers(logs: dict[str, Any], names: Sequence[str]) -> dict[str, float]:
    return {name: float(logs[name]) for name in names if name in logs}


def fit_from_step(model: tf.keras.Model, make_dataset: Callable[[int], tf.data.Dataset], *, start_step: int,
                  steps_per_epoch: int, epochs: int, callbacks: Sequence[tf.keras.callbacks.Callback],
                  counter: StepCheckpoint, verbose: int = 0) -> None:
    """Runs ``model.fit`` (compiled) from global step `start_step` (a restored checkpoint's, or 0) to
    ``epochs * steps_per_epoch``; ``make_dataset(step)`` gives the batches from a step onwards (see `epoch_dataset`),
    `callbacks` go to every ``fit`` call and must include `counter`, which ends training early once it stopped on
    SIGTERM.
    """
    epoch, offset = divmod(start_step, steps_per_epoch)
    if epoch >= epochs:
        return
    if offset:
        # Finish the interrupted epoch: its remaining batches only.
        model.fit(make_dataset(start_step), initial_epoch=epoch, epochs=epoch + 1,
                  steps_per_epoch=steps_per_epoch - offset, callbacks=list(callbacks), verbose=verbose, shuffle=False)
        if counter.stopped:
            return
        epoch += 1
    if epoch < epochs:
        model.fit(make_dataset(epoch * steps_per_epoch), initial_epoch=epoch, epochs=epochs,
                  steps_per_epoch=steps_per_epoch, callbacks=list(callbacks), verbose=verbose, shuffle=False)
