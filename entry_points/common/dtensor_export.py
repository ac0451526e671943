"""A DTensor model as a servable SavedModel: written from its host twin, checked by reloading it.

A SavedModel's signatures take ordinary tensors, so the scripts export the plain-variable twin of the mesh model
(filled by `smddp_compat.entry_points.common.dtensor_mesh.HostCopy.pull`) wrapped in a ``tf.Module`` that holds the
serving function. The folder layout is the one `smddp_compat.entry_points.common.model_artifacts` uses for every
script: ``<model_dir>/1`` with a ``serving_default`` signature, written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import tensorflow as tf

from smddp_compat.entry_points.common.errors import EntryPointError
from smddp_compat.entry_points.common.model_artifacts import SAVED_MODEL_VERSION, load_serving_function

__all__ = ["ExportError", "write_saved_model", "check_reloaded"]


class ExportError(EntryPointError):
    """The exported SavedModel does not load or does not answer like the model it was written from."""


def write_saved_model(module: tf.Module, model_dir: str | os.PathLike[str],
                      signatures: Mapping[str, tf.types.experimental.ConcreteFunction]) -> Path:
    """Saves the serving `module` (plain variables only) as ``<model_dir>/1`` atomically, with `signatures` by name
    (include ``"serving_default"``); client 0 / the chief only.
    """
    root = Path(model_dir)
    root.mkdir(parents=True, exist_ok=True)
    temp = root / f".tmp-savedmodel-{uuid.uuid4().hex[:8]}"
    final = root / SAVED_MODEL_VERSION
    try:
        tf.saved_model.save(module, str(temp), signatures=dict(signatures))
        if final.exists():
            shutil.rmtree(final)
        os.replace(temp, final)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return final


def check_reloaded(saved_model_dir: str | os.PathLike[str], inputs: Mapping[str, tf.Tensor], output: str,
                   expected: np.ndarray, *, tolerance: float = 1e-4) -> np.ndarray:
    """Loads the SavedModel `write_saved_model` wrote, calls ``serving_default`` with the keyword `inputs` and compares
    its `output` with `expected` (the live model's) within `tolerance`; returns the reloaded model's output.

    Raises:
        ExportError: Loading fails, the output is missing, or it differs from `expected`.
    """
    try:
        serve = load_serving_function(saved_model_dir)
        answer = serve(**inputs)
    except (OSError, ValueError, TypeError, KeyError, tf.errors.OpError) as exc:
        raise ExportError(f"the SavedModel in {saved_model_dir} does not load or run: {exc}") from exc
    if output not in answer:
        raise ExportError(f"the SavedModel in {saved_model_dir} has outputs {sorted(answer)}, not {output!r}.")
    got = answer[output].numpy()
    if got.shape != expected.shape or not np.allclose(got, expected, atol=tolerance):
        difference = np.max(np.abs(got - expected)) if got.shape == expected.shape else "n/a"
        raise ExportError(
            f"the reloaded SavedModel in {saved_model_dir} answers differently from the trained model "
            f"(shape {got.shape} vs {expected.shape}, largest difference {difference})."
        )
    return got
