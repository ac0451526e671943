"""Keras 3 and tf-keras models trained on 2 ranks end with identical weights and a falling loss."""

import re

import pytest

pytestmark = pytest.mark.processes

FLAVOURS = {"keras3": {}, "tf_keras": {"TF_USE_LEGACY_KERAS": "1"}}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("mode", ["tape", "optimizer", "fit"])
def test_training_converges_to_identical_weights(run_ranks, flavour, mode):
    job = run_ranks("train.py", 2, mode, env=FLAVOURS[flavour])
    assert job.returncode == 0, job.output
    first, second = job.results[0], job.results[1]
    assert first["keras"] == ("tf_keras" if flavour == "tf_keras" else "keras"), first
    assert first["digest"] == second["digest"], (first["checksum"], second["checksum"])
    losses = first["losses"]
    assert losses == pytest.approx(second["losses"])
    assert losses[-1] < 0.7 * losses[0], losses


def test_seed_004_example_runs_unchanged_and_learns(run_ranks, tmp_path):
    job = run_ranks("seed004_example.py", 2)
    assert job.returncode == 0, job.output
    assert "[0] Step #0" in job.output and "[1] Step" not in job.output
    assert list(tmp_path.glob("results-seed004_example.py-2/checkpoints-1.index")), job.output
    accuracy, classes = re.search(r"\[0\] Held-out accuracy: ([0-9.]+) over (\d+) classes", job.output).groups()
    assert int(classes) == 10 and float(accuracy) > 0.5, job.output  # chance is 0.1


def test_model_with_distributed_optimizer_saves_and_loads(tmp_path):
    """A .keras file saved with DistributedOptimizer names the plain optimizer, so it loads without smddp_compat."""
    import subprocess
    import sys

    from tests.compat.conftest import quiet_env

    code = f"""
import numpy as np, tensorflow as tf, smddp_compat.tensorflow as hvd
hvd.init()
m = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
m.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.01)), loss="mse")
m.fit(np.ones((8, 3)), np.ones((8, 1)), verbose=0)
m.save({str(tmp_path / 'm.keras')!r})
print(type(tf.keras.models.load_model({str(tmp_path / 'm.keras')!r}).optimizer).__name__)
"""
    proc = subprocess.run([sys.executable, "-c", code], env=quiet_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("Adam")
