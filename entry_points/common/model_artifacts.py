"""The trained model as a servable artifact (``<model_dir>/1``, a SavedModel, and ``model.keras`` with Keras 3), a
digest of its weights, and the run's ``metrics.json``; see docs/training-scripts.md#what-a-run-reads-and-writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import tensorflow as tf

from smddp_compat.contract import write_atomically
from smddp_compat.entry_points.common.keras_flavor import is_keras3

__all__ = ["SAVED_MODEL_VERSION", "save_servable_model", "load_serving_function", "weights_digest",
           "write_weights_digest", "write_summary"]

SAVED_MODEL_VERSION = "1"


def _replace_dir(temp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(temp, final)


def save_servable_model(model: tf.keras.Model, model_dir: str | os.PathLike[str]) -> Path:
    """Saves `model` as ``<model_dir>/1`` (SavedModel) and, with Keras 3, ``<model_dir>/model.keras``.

    Call on rank 0 / the chief only.

    Args:
        model: A built Keras model.
        model_dir: The model directory (created if missing).
    """
    root = Path(model_dir)
    root.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    temp = root / f".tmp-savedmodel-{tag}"
    final = root / SAVED_MODEL_VERSION
    try:
        if is_keras3():
            model.export(str(temp), format="tf_saved_model", verbose=False)
            temp_archive = root / f".tmp-{tag}.keras"
            # An uncompiled copy: the archive is for inference, and a distributed optimizer wrapper (a class made
            # at run time) would make it unloadable without the training code.
            inference_copy = type(model).from_config(model.get_config())  # get_config holds no compile state
            inference_copy.set_weights(model.get_weights())
            inference_copy.save(str(temp_archive))
            os.replace(temp_archive, root / "model.keras")
        else:
            model.save(str(temp), save_format="tf", include_optimizer=False)
        _replace_dir(temp, final)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        for leftover in root.glob(f".tmp-{tag}*"):
            leftover.unlink(missing_ok=True)
    return final


def load_serving_function(saved_model_dir: str | os.PathLike[str]):  # noqa: ANN201 - a ConcreteFunction
    """Loads a SavedModel written by `save_servable_model` and returns its ``serving_default`` signature.

    Call it with keyword tensors (the input's name) or inspect ``.structured_input_signature``.
    """
    loaded = tf.saved_model.load(str(saved_model_dir))
    return loaded.signatures["serving_default"]


def weights_digest(model: tf.keras.Model) -> str:
    """SHA-256 over every weight of `model` (in ``model.weights`` order), to compare replicas across ranks."""
    digest = hashlib.sha256()
    for weight in model.weights:
        value = np.ascontiguousarray(np.asarray(weight.numpy() if hasattr(weight, "numpy") else weight))
        digest.update(str(value.shape).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def write_weights_digest(model: tf.keras.Model, directory: str | os.PathLike[str], rank: int) -> Path:
    """Writes `weights_digest` of `model` to ``<directory>/weights-rank<rank>.sha256`` (atomically).

    Every rank may call it: the file name carries the rank.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"weights-rank{rank}.sha256"
    temp = root / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    temp.write_text(weights_digest(model) + "\n", encoding="utf-8")
    os.replace(temp, final)
    return final


def write_summary(summary: Mapping[str, object], directory: str | os.PathLike[str]) -> Path:
    """Writes `summary` (the run's results) as ``<directory>/metrics.json`` atomically and returns the file."""
    final = Path(directory) / "metrics.json"
    write_atomically(final, json.dumps(summary, indent=2) + "\n")
    return final
