"""horovod_mnist.py end to end: killed mid-epoch with SIGKILL, the restart resumes from the last checkpoint with
the step count continued and finishes; the model serves; 2 ranks end with identical weights."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.entry_points.common.datasets import load_mnist
from tests.entry_points.script_runs import (
    Layout,
    assert_ok,
    one_writers_scalars,
    run_script,
    script_command,
    step_at_least,
)

pytestmark = pytest.mark.processes

SCRIPT = "horovod_mnist.py"


def test_sigkill_mid_epoch_then_resume(layout: Layout) -> None:
    # 25 steps per epoch, checkpoints every 10: every checkpoint but the last lies inside an epoch.
    args = ["--epochs", "2", "--steps-per-epoch", "25", "--checkpoint-steps", "10", "--log-steps", "5",
            "--checkpoint-dir", str(layout.checkpoint_dir)]
    first = run_script(script_command(SCRIPT, args), layout.env(), stop_when=step_at_least(25),
                       stop_signal=signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    saved = list_steps(layout.checkpoint_dir)
    assert saved and saved[-1] in (20, 30), saved
    resume_from = saved[-1]

    second = run_script(script_command(SCRIPT, args), layout.env())
    assert_ok(second, layout)
    assert f"resumed from the checkpoint of step {resume_from}" in second.text
    steps = [int(m["step"]) for m in second.metrics()]
    assert steps[0] == resume_from + 5 and steps[-1] == 50, steps
    summary = json.loads((layout.output_data_dir / "metrics.json").read_text())
    assert summary["steps"] == 50 and summary["resumed_from"] == resume_from
    losses = [float(m["loss"]) for m in first.metrics() + second.metrics() if "loss" in m]
    assert losses[0] > 1.5 and losses[-1] < 0.6 * losses[0], losses
    epoch_lines = [m for m in second.metrics() if "test_accuracy" in m and "epoch" in m]
    expected_epochs = [1, 2] if resume_from < 25 else [2]  # a restart inside epoch 1 finishes it first
    assert [int(m["epoch"]) for m in epoch_lines] == expected_epochs
    assert [int(m["step"]) for m in epoch_lines] == [25 * e for e in expected_epochs]

    import tensorflow as tf

    from smddp_compat.entry_points.common.model_artifacts import load_serving_function

    _, (x_test, y_test) = load_mnist()
    serve = load_serving_function(layout.model_dir / "1")
    (name,) = serve.structured_input_signature[1]
    (probs,) = serve(**{name: tf.constant(x_test)}).values()
    assert np.mean(np.argmax(probs.numpy(), axis=1) == y_test) > 0.7


@pytest.mark.e2e
def test_two_ranks_end_with_identical_weights(layout: Layout) -> None:
    run = run_script(script_command(SCRIPT, ["--epochs", "1", "--steps-per-epoch", "15", "--log-steps", "5",
                                             "--weights-digest", "true",
                                             "--checkpoint-dir", str(layout.checkpoint_dir)], ranks=2), layout.env())
    assert_ok(run, layout)
    digests = [(layout.output_data_dir / f"weights-rank{r}.sha256").read_text() for r in (0, 1)]
    assert digests[0] == digests[1]
    assert json.loads((layout.output_data_dir / "metrics.json").read_text())["ranks"] == 2
    assert all(line.startswith("[0] ") for line in run.lines if "step=" in line)
    scalars = one_writers_scalars(layout.output_dir / "tensorboard", [5, 10, 15])  # rank 0's, in the shared folder
    assert scalars["test/accuracy"][-1][0] == 15
    assert (layout.model_dir / "1" / "saved_model.pb").is_file()
