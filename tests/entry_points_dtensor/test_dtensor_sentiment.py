"""dtensor_sentiment.py end to end: data -> model -> spatial parallel training continued from one checkpoint
directory (the first run stopped by SIGTERM, the next finishing its epochs), the exported string-input SavedModel
reloads and predicts, bad hyperparameters fail cleanly."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass

import numpy as np
import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.entry_points.common.datasets import load_rotten_tomatoes
from tests.entry_points.script_runs import (
    Layout,
    Run,
    assert_ok,
    assert_stopped,
    make_layout,
    run_script,
    script_command,
    step_at_least,
)

SCRIPT = "dtensor_sentiment.py"
BATCH = 256  # 10,246 training snippets -> 40 steps per epoch: quick, and still learns
STEPS_PER_EPOCH = 10246 // BATCH


@dataclass
class Continuation:
    """Three runs sharing one checkpoint directory, one per parallel mode: data parallel set for 2 epochs and stopped
    by SIGTERM after a few steps (at ``stop_step``), model parallel finishing those 2 epochs, spatial adding one."""

    job: Layout
    runs: dict[str, Run]
    stop_step: int
    steps_after_the_stop: list[int]


@pytest.fixture(scope="module")
def continuation(tmp_path_factory: pytest.TempPathFactory) -> Continuation:
    job = make_layout(tmp_path_factory.mktemp("sentiment") / "job")
    runs = {}
    common = ["--batch-size", str(BATCH), "--log-steps", "5", "--checkpoint-dir", str(job.checkpoint_dir)]
    runs["data"] = run_script(script_command(SCRIPT, ["--mode", "data", "--epochs", "2", "--export", "false", *common]),
                              job.env(), timeout=400, stop_when=step_at_least(5), stop_signal=signal.SIGTERM)
    assert_stopped(runs["data"], job)
    stopped = [m for m in runs["data"].metrics() if m.get("stopped") == "1"]
    assert stopped, runs["data"].text[-3000:]
    steps_after_the_stop = list_steps(job.checkpoint_dir)
    for mode in ("model", "spatial"):  # each asks for 1 epoch: model finishes the 2 the stopped run was set for
        args = ["--mode", mode, "--epochs", "1", "--export", "true" if mode == "spatial" else "false", *common]
        run = run_script(script_command(SCRIPT, args), job.env(), timeout=400)
        assert_ok(run, job)
        runs[mode] = run
    return Continuation(job, runs, int(stopped[0]["step"]), steps_after_the_stop)


def _epoch_lines(run: Run) -> list[dict[str, str]]:
    return [m for m in run.metrics() if "epoch" in m]


@pytest.mark.processes
def test_each_mode_continues_the_previous_checkpoint(continuation: Continuation) -> None:
    """A run stopped by SIGTERM checkpoints where it stopped; the next run (in another mode) finishes the epochs the
    stopped run was set for (resumed), the one after adds its own (continued): the script's own resume rule."""
    runs, stop_step = continuation.runs, continuation.stop_step
    assert "mesh {'batch': 8}" in runs["data"].text
    assert "mesh {'batch': 4, 'model': 2}" in runs["model"].text
    assert "mesh {'batch': 2, 'feature': 2, 'model': 2}" in runs["spatial"].text
    assert 5 <= stop_step < STEPS_PER_EPOCH and continuation.steps_after_the_stop[-1] == stop_step
    assert f"resumed_step={stop_step}; target_step={2 * STEPS_PER_EPOCH};" in runs["model"].text
    assert f"continued_step={2 * STEPS_PER_EPOCH}; target_step={3 * STEPS_PER_EPOCH};" in runs["spatial"].text
    epochs = [_epoch_lines(runs[mode]) for mode in ("model", "spatial")]
    assert [[int(e["epoch"]) for e in lines] for lines in epochs] == [[1, 2], [3]]
    assert [int(lines[-1]["step"]) for lines in epochs] == [2 * STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH]
    # Training resumed where it stopped (a fresh model would start near ln 2 = 0.69) and the loss keeps falling.
    train_losses = [float(e["train_loss"]) for lines in epochs for e in lines]
    assert train_losses[0] > train_losses[1] > train_losses[2], train_losses
    first_logged = next(float(m["loss"]) for m in runs["spatial"].metrics() if "loss" in m)
    assert first_logged < 0.6, first_logged
    assert list_steps(continuation.job.checkpoint_dir)[-1] == 3 * STEPS_PER_EPOCH
    summary = json.loads((continuation.job.output_data_dir / "metrics.json").read_text())
    assert summary["mode"] == "spatial" and summary["started_at_step"] == 2 * STEPS_PER_EPOCH
    assert summary["test_accuracy"] > 0.65, summary


@pytest.mark.processes
def test_the_export_reloads_and_predicts_on_raw_strings(continuation: Continuation) -> None:
    import tensorflow as tf

    saved_model = continuation.job.model_dir / "1"
    assert (saved_model / "saved_model.pb").is_file()
    assert "export_accuracy=" in continuation.runs["spatial"].text
    assert not any(p.name.startswith(".tmp") for p in continuation.job.model_dir.iterdir())

    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    (name, spec), = serve.structured_input_signature[1].items()
    assert name == "text" and spec.dtype == tf.string
    _, (texts, labels) = load_rotten_tomatoes()
    probabilities = serve(text=tf.constant(texts))["probabilities"].numpy()
    assert probabilities.shape == (len(texts), 2)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    accuracy = float(np.mean(probabilities.argmax(axis=1) == labels))
    summary = json.loads((continuation.job.output_data_dir / "metrics.json").read_text())
    assert accuracy == pytest.approx(summary["export_accuracy"], abs=1e-6)
    assert accuracy > 0.65
    # A single raw string works too (BatchNorm uses its moving statistics at inference).
    one = serve(text=tf.constant(["a warm, funny and beautifully acted film"]))["probabilities"].numpy()
    assert one.shape == (1, 2) and np.isfinite(one).all()


@pytest.mark.processes
def test_a_bad_mode_fails_with_a_clear_reason(job: Layout) -> None:
    run = run_script(script_command(SCRIPT, ["--mode", "pipeline"]), job.env(), timeout=120)
    assert run.returncode != 0
    reason = job.failure.read_text()
    assert "HyperparameterError" in reason and "'pipeline'" in reason, reason
    assert "data, model, spatial" in reason, reason
    assert not (job.model_dir / "1").exists()


@pytest.mark.processes
def test_a_batch_that_does_not_split_over_the_mesh_is_refused(job: Layout) -> None:
    run = run_script(script_command(SCRIPT, ["--mode", "spatial", "--batch-size", "63"]), job.env(), timeout=120)
    assert run.returncode != 0
    reason = job.failure.read_text()
    assert "--batch-size=63" in reason and "multiple of 2" in reason, reason


def test_mode_layouts_without_a_run() -> None:
    from smddp_compat.entry_points.dtensor_sentiment import MODES

    assert MODES["data"].mesh_dims(8) == [("batch", 8)]
    assert MODES["model"].mesh_dims(8) == [("batch", 4), ("model", 2)]
    assert MODES["spatial"].mesh_dims(8) == [("batch", 2), ("feature", 2), ("model", 2)]
    assert MODES["spatial"].mesh_dims(16) == [("batch", 4), ("feature", 2), ("model", 2)]
