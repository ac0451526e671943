"""smddp_mnist.py end to end: SIGTERM -> checkpoint -> resume with the step count continued, the saved model
serves, metric lines parse, 2 ranks end with identical weights, tf-keras works, bad hyperparameters fail cleanly."""

from __future__ import annotations

import json
import re
import signal

import numpy as np
import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.entry_points.common.datasets import load_mnist
from tests.entry_points.script_runs import (
    Layout,
    Run,
    assert_ok,
    assert_stopped,
    read_scalars,
    run_script,
    script_command,
    step_at_least,
)

pytestmark = pytest.mark.processes

SCRIPT = "smddp_mnist.py"
METRIC_LINE = re.compile(r"^(?:[a-z_]+=(?:[-+0-9.e]+|nan|inf); )*[a-z_]+=(?:[-+0-9.e]+|nan|inf);$")


def _held_out_accuracy(saved_model_dir: str) -> float:
    import tensorflow as tf

    from smddp_compat.entry_points.common.model_artifacts import load_serving_function

    _, (x_test, y_test) = load_mnist()
    serve = load_serving_function(saved_model_dir)
    (name,) = serve.structured_input_signature[1]
    (probs,) = serve(**{name: tf.constant(x_test)}).values()
    return float(np.mean(np.argmax(probs.numpy(), axis=1) == y_test))


def _step_lines(run: Run) -> list[int]:
    """The steps of a run's per-step metrics lines (not its epoch-end or final lines)."""
    return [int(m["step"]) for m in run.metrics() if "loss" in m and "test_loss" not in m]


def test_sigterm_checkpoints_and_the_restart_resumes(layout: Layout) -> None:
    args = ["--max-steps", "60", "--log-steps", "5", "--checkpoint-steps", "1000",
            "--checkpoint-dir", str(layout.checkpoint_dir)]
    first = run_script(script_command(SCRIPT, [*args, "--step-delay", "0.05"]), layout.env(),
                       stop_when=step_at_least(20), stop_signal=signal.SIGTERM)
    assert_stopped(first, layout)
    stopped = re.search(r"stopped on SIGTERM at step (\d+)", first.text)
    assert stopped, first.text[-2000:]
    stop_step = int(stopped.group(1))
    assert 20 <= stop_step < 60
    assert list_steps(layout.checkpoint_dir) == [stop_step]
    assert not (layout.model_dir / "1").exists(), "a stopped run must not publish a model"
    # The TensorBoard event file of the stopped run holds every step it logged (closed on SIGTERM, nothing lost).
    tensorboard = layout.output_dir / "tensorboard"
    logged = _step_lines(first)
    assert [step for step, _ in read_scalars(tensorboard)["train/loss"]] == logged

    second = run_script(script_command(SCRIPT, args), layout.env())
    assert_ok(second, layout)
    assert f"resumed from the checkpoint of step {stop_step}" in second.text
    steps = [int(m["step"]) for m in second.metrics()]
    assert steps[0] > stop_step and steps[-1] == 60
    summary = json.loads((layout.output_data_dir / "metrics.json").read_text())
    assert summary["steps"] == 60 and summary["resumed_from"] == stop_step and summary["ranks"] == 1
    # The resumed run adds its own event file; its steps continue where the first run stopped: one curve.
    assert len(list(tensorboard.glob("events.out.tfevents.*"))) == 2
    scalars = read_scalars(tensorboard)
    assert [step for step, _ in scalars["train/loss"]] == logged + _step_lines(second)
    assert scalars["test/accuracy"][-1] == (60, pytest.approx(float(second.metrics()[-1]["test_accuracy"]), abs=1e-4))

    # The loss falls over the whole (interrupted) training.
    losses = [float(m["loss"]) for m in first.metrics() + second.metrics() if "loss" in m and m["loss"] != "nan"]
    assert losses[0] > 1.5 and losses[-1] < 0.8 * losses[0], losses
    # Every metrics line has the stable shape SageMaker's regexes rely on.
    for line in first.lines + second.lines:
        if "step=" in line:
            assert METRIC_LINE.match(line), line
    # The model serves: SavedModel and the Keras archive, both predicting far above chance.
    assert _held_out_accuracy(str(layout.model_dir / "1")) > 0.7
    import keras

    _, (x_test, y_test) = load_mnist()
    restored = keras.models.load_model(layout.model_dir / "model.keras")
    assert np.mean(np.argmax(restored.predict(x_test, verbose=0), axis=1) == y_test) > 0.7


@pytest.mark.e2e
def test_two_ranks_end_with_identical_weights_also_after_a_resume(layout: Layout) -> None:
    def run_to(steps: int):  # noqa: ANN202
        args = ["--max-steps", str(steps), "--log-steps", "10", "--weights-digest", "true",
                "--checkpoint-dir", str(layout.checkpoint_dir)]
        run = run_script(script_command(SCRIPT, args, ranks=2), layout.env())
        assert_ok(run, layout)
        digests = [(layout.output_data_dir / f"weights-rank{r}.sha256").read_text() for r in (0, 1)]
        assert digests[0] == digests[1]
        return run

    first = run_to(20)
    assert json.loads((layout.output_data_dir / "metrics.json").read_text())["ranks"] == 2
    metric_lines = [line for line in first.lines if "step=" in line]
    assert metric_lines and all(line.startswith("[0] ") for line in metric_lines), "only rank 0 logs metrics"
    assert list_steps(layout.checkpoint_dir)[-1] == 20
    second = run_to(30)
    assert "[0] resumed from the checkpoint of step 20" in second.text
    assert json.loads((layout.output_data_dir / "metrics.json").read_text())["resumed_from"] == 20


@pytest.mark.e2e
def test_runs_with_tf_keras(layout: Layout) -> None:
    run = run_script(script_command(SCRIPT, ["--max-steps", "20", "--log-steps", "10",
                                             "--checkpoint-dir", str(layout.checkpoint_dir)]),
                     layout.env({"TF_USE_LEGACY_KERAS": "1"}))
    assert_ok(run, layout)
    assert "tf-keras-2" in run.text
    assert (layout.model_dir / "1" / "saved_model.pb").is_file() and not (layout.model_dir / "model.keras").exists()
    assert _held_out_accuracy(str(layout.model_dir / "1")) > 0.3


def test_bad_hyperparameter_writes_the_failure_file(layout: Layout) -> None:
    # (Malformed values rejected by the parser are covered in test_shared_modules; this one the script checks.)
    expected = "--batch-size=9999: is larger than each rank's shard"
    run = run_script(script_command(SCRIPT, ["--batch-size", "9999"]), layout.env(), timeout=180)
    assert run.returncode != 0
    failure = layout.failure.read_text()
    assert failure.startswith("HyperparameterError: ") and expected in failure.splitlines()[0]
