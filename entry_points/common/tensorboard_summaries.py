"""TensorBoard summaries of a training run (`TRAIN_TAGS` at each logged step, `TEST_TAGS` at each evaluation), written
by rank 0 / the chief: the one writer every entry point uses. Events are written with ``tf.summary.write``, as
``tf.summary.scalar`` would, since TensorFlow 2.21 no longer installs the ``tensorboard`` package;
see docs/training-scripts.md#tensorboard-summaries.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

__all__ = ["TrainingSummaries", "learning_rate_of", "TRAIN_TAGS", "TEST_TAGS", "SCALARS_PLUGIN"]

SCALARS_PLUGIN = "scalars"
"""TensorBoard's scalar plugin, named in each event's metadata (as ``tensorboard.plugins.scalar.metadata``)."""

TRAIN_TAGS = ("train/loss", "train/accuracy", "train/learning_rate", "train/step_seconds")
"""What each logged step records, in this order."""

TEST_TAGS = ("test/loss", "test/accuracy")
"""What each evaluation records."""

# What tensorboard's scalar summary attaches: the plugin's name and its empty ScalarPluginData (version 0).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=SCALARS_PLUGIN, content=b"")
)

# Records are flushed one by one; this bounds what an unflushed writer could hold if a caller wrote past them.
_FLUSH_MILLIS = 10_000


def learning_rate_of(optimizer: object) -> float:
    """The current learning rate of a Keras 3 or tf-keras optimizer (a schedule's value at the current step), or of
    any optimizer with a numeric ``learning_rate`` attribute (the DTensor scripts' own Adam).

    Raises:
        AttributeError: The optimizer has no ``learning_rate``.
    """
    value = optimizer.learning_rate  # type: ignore[attr-defined]
    # .numpy() reads every kind of variable, a MultiWorkerMirroredStrategy's MirroredVariable too (numpy's asarray
    # does not); a schedule's value is already a tensor, the DTensor scripts' rate a float.
    return float(value.numpy() if hasattr(value, "numpy") else value)


class TrainingSummaries:
    """TensorBoard scalars of one training run; a no-op unless this process writes them.

    Use it as a context manager around the training loop, so that the event file is closed however the loop ends::

        with TrainingSummaries(env.tensorboard_dir if rank == 0 else None,
                               learning_rate=lambda: learning_rate_of(opt)) as summaries:
            summaries.start(start_step)
            ... summaries.log_step(step, loss=..., accuracy=...) every --log-steps steps ...
            ... summaries.log_evaluation(step, loss=..., accuracy=...) after each evaluation ...

    Args:
        directory: The folder to write into (created if missing); ``None`` disables the writer (every rank but 0).
        learning_rate: Returns the optimizer's current learning rate; ``None`` leaves ``train/learning_rate`` out.
    """

    def __init__(self, directory: str | os.PathLike[str] | None, *,
                 learning_rate: Callable[[], float] | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self._learning_rate = learning_rate
        self._writer: tf.summary.SummaryWriter | None = None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._writer = tf.summary.create_file_writer(str(self.directory), flush_millis=_FLUSH_MILLIS)
        self._mark: tuple[float, int] | None = None
        self._evaluated_step: int | None = None

    @property
    def enabled(self) -> bool:
        """Whether this process writes (and the writer is still open)."""
        return self._writer is not None

    def start(self, step: int) -> None:
        """Marks the step training (re)starts from: the first record's step time is measured from here."""
        self._mark = (time.monotonic(), int(step))

    def log_step(self, step: int, *, loss: float, accuracy: float) -> None:
        """Records :data:`TRAIN_TAGS` at global step `step`.

        Args:
            step: The global step (optimizer steps taken so far).
            loss: The training loss to show (e.g. the mean since the last record).
            accuracy: The training accuracy to show.
        """
        if not self.enabled:
            return
        now = time.monotonic()
        values = {TRAIN_TAGS[0]: loss, TRAIN_TAGS[1]: accuracy}
        if self._learning_rate is not None:
            values[TRAIN_TAGS[2]] = self._learning_rate()
        if self._mark is not None and step > self._mark[1]:
            values[TRAIN_TAGS[3]] = (now - self._mark[0]) / (step - self._mark[1])
        self._mark = (now, int(step))
        self.scalars(step, values)

    def log_evaluation(self, step: int, *, loss: float, accuracy: float) -> None:
        """Records :data:`TEST_TAGS` (the held-out loss and accuracy) at global step `step`, and restarts the
        step-time clock (an evaluation's time is not a training step's).

        A second evaluation at the same step (a script's final one, right after its last epoch's) is not recorded
        again: the weights, and so the values, are the same.
        """
        if not self.enabled:
            return
        self._mark = (time.monotonic(), int(step))
        if step == self._evaluated_step:
            return
        self._evaluated_step = int(step)
        self.scalars(step, {TEST_TAGS[0]: loss, TEST_TAGS[1]: accuracy})

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Writes each ``tag -> value`` as a scalar at `step`, then flushes.

        Args:
            values: Tag -> number (NaN and infinities are written as they are; TensorBoard shows them as gaps).
        """
        if self._writer is None:
            return
        with self._writer.as_default():
            for tag, value in values.items():
                tf.summary.write(tag, tf.constant(float(value), tf.float32), step=int(step),
                                 metadata=_SCALAR_METADATA)
        self._writer.flush()

    def close(self) -> None:
        """Flushes and closes the event file (again: nothing)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def __enter__(self) -> TrainingSummaries:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
