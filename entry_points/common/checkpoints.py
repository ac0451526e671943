"""Atomic TensorFlow checkpoints (``<directory>/step-<N>/``) that a restarted job resumes from, step count included;
written by rank 0 / the chief, restored by every process, for any ``tf.train.Checkpoint`` (Keras 3 and tf-keras,
DTensor). Layout and atomicity: docs/training-scripts.md#what-a-run-reads-and-writes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf

from smddp_compat.entry_points.common.errors import CheckpointError

__all__ = ["save_checkpoint", "restore_latest", "restore_from_rank_0", "latest_step", "list_steps", "CHECKPOINT_PREFIX"]

CHECKPOINT_PREFIX = "ckpt"
_STEP_DIR = re.compile(r"^step-(\d{8,})$")
_TEMP_PREFIX = ".tmp-"


def _step_dir(directory: Path, step: int) -> Path:
    return directory / f"step-{step:08d}"


def list_steps(directory: str | os.PathLike[str]) -> list[int]:
    """Steps of the complete checkpoints in `directory`, ascending (empty if none or no directory)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    steps = []
    for entry in root.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and entry.is_dir() and (entry / f"{CHECKPOINT_PREFIX}.index").is_file():
            steps.append(int(match.group(1)))
    return sorted(steps)


def latest_step(directory: str | os.PathLike[str]) -> int | None:
    """The highest complete checkpoint step in `directory`, or ``None``."""
    steps = list_steps(directory)
    return steps[-1] if steps else None


def io_on_this_process(job: str) -> tf.train.CheckpointOptions:
    """Options that make this process do a checkpoint's file I/O, for variables that live on other hosts (e.g.
    ParameterServerStrategy's parameter servers): without them each parameter server writes its own shards to its own
    disk, under a path only this host has, and the write fails (or the checkpoint is scattered over the hosts).

    Args:
        job: This process's job in the cluster (``chief`` for a parameter-server coordinator).
    """
    return tf.train.CheckpointOptions(experimental_io_device=f"/job:{job}/replica:0/task:0/device:CPU:0")


def save_checkpoint(checkpoint: tf.train.Checkpoint, directory: str | os.PathLike[str], step: int,
                    *, keep: int = 3, options: tf.train.CheckpointOptions | None = None) -> Path:
    """Writes `checkpoint` (model, optimizer, any other trackables) as ``<directory>/step-<step>`` atomically, `step`
    being the number of optimizer steps taken, and keeps the newest `keep` (>= 1); returns the new folder. Call on
    rank 0 / the chief only. `options`: TensorFlow's options of the write (e.g. :func:`io_on_this_process` when the
    variables live on other hosts).

    Raises:
        CheckpointError: `step` or `keep` is invalid, or the directory is not writable.
    """
    if int(step) < 0:
        raise CheckpointError(f"checkpoint step must be >= 0, got {step}.")
    if keep < 1:
        raise CheckpointError(f"keep must be >= 1, got {keep}.")
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(
            f"cannot create the checkpoint directory {str(root)!r}: {exc.strerror}; pass --checkpoint-dir DIR.",
            path=str(root),
        ) from exc
    for stale in root.glob(_TEMP_PREFIX + "*"):  # left by a save that was killed
        shutil.rmtree(stale, ignore_errors=True)
    temp = root / f"{_TEMP_PREFIX}{int(step):08d}-{uuid.uuid4().hex[:8]}"
    final = _step_dir(root, int(step))
    try:
        temp.mkdir()
        checkpoint.write(str(temp / CHECKPOINT_PREFIX), options=options)
        (temp / "step.json").write_text(json.dumps({"step": int(step)}) + "\n", encoding="utf-8")
        if final.exists():  # the same step saved again (e.g. on SIGTERM right after a periodic save)
            shutil.rmtree(final)
        os.replace(temp, final)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise CheckpointError(f"cannot write a checkpoint to {str(root)!r}: {exc}.", path=str(root)) from exc
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    for old in list_steps(root)[:-keep]:
        shutil.rmtree(_step_dir(root, old), ignore_errors=True)
    return final


def restore_latest(checkpoint: tf.train.Checkpoint, directory: str | os.PathLike[str],
                   *, options: tf.train.CheckpointOptions | None = None) -> int | None:
    """Restores the newest complete checkpoint of `directory` into `checkpoint` (same structure as when saved): its
    step, or ``None`` when there is nothing to restore (a missing or empty directory). Build the model and the
    optimizer's variables first (e.g. ``optimizer.build(model.trainable_variables)``) so that every value lands at
    once rather than on a deferred restore. `options` as for :func:`save_checkpoint`.

    Raises:
        CheckpointError: The newest checkpoint cannot be read or does not match `checkpoint`'s structure.
    """
    step = latest_step(directory)
    if step is None:
        return None
    prefix = _step_dir(Path(directory), step) / CHECKPOINT_PREFIX
    try:
        status = checkpoint.read(str(prefix), options=options)
        status.assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError) as exc:
        raise CheckpointError(
            f"cannot restore {prefix}: {exc}. It was written by a different model; point --checkpoint-dir at an "
            "empty directory to start fresh.",
            path=str(prefix),
        ) from exc
    return step


def restore_from_rank_0(checkpoint: tf.train.Checkpoint, directory: str | os.PathLike[str], collectives: Any,
                        *variable_groups: Sequence[tf.Variable]) -> int:
    """Restores the newest checkpoint on every rank, then makes rank 0's step and variables every rank's: on
    SageMaker every host holds the same checkpoints, but a host may also start with an empty or stale directory
    (per-host local dirs). `collectives`: the SMDDP or Horovod module (``rank``, ``size``, ``broadcast``,
    ``broadcast_variables``). Returns the step to start from (0: a fresh start)."""
    restored = restore_latest(checkpoint, directory) or 0
    rank = collectives.rank()
    start_step = int(collectives.broadcast(tf.constant(restored, tf.int64), root_rank=0).numpy())
    if collectives.size() > 1 and start_step:
        for variables in variable_groups:
            collectives.broadcast_variables(variables, root_rank=0)
    if start_step != restored:
        print(f"rank {rank}: found checkpoint step {restored}, taking rank 0's step {start_step} and state",
              flush=True)
    if rank == 0 and start_step:
        print(f"resumed from the checkpoint of step {start_step}", flush=True)
    return start_step
