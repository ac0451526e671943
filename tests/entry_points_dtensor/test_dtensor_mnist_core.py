"""dtensor_mnist_core.py end to end: SIGTERM -> checkpoint -> resume with the step count continued, loss and
accuracy plots, the SavedModel serves; and a 2-client DTensor run on loopback that computes what one client does."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.launcher import reserve_ports
from smddp_compat.entry_points.common.datasets import load_mnist
from tests.entry_points.script_runs import (
    REPO,
    SCRIPTS,
    Layout,
    assert_ok,
    assert_stopped,
    make_layout,
    one_writers_scalars,
    run_script,
    script_command,
    step_at_least,
)

pytestmark = pytest.mark.processes

SCRIPT = "dtensor_mnist_core.py"
STEPS_PER_EPOCH = 4000 // 128
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_sigterm_resume_plots_and_saved_model(job: Layout) -> None:
    args = ["--epochs", "2", "--model-shards", "2", "--log-steps", "2", "--checkpoint-dir", str(job.checkpoint_dir)]
    first = run_script(script_command(SCRIPT, args), job.env(), timeout=400,
                       stop_when=step_at_least(4), stop_signal=signal.SIGTERM)
    assert_stopped(first, job)
    stopped = [m for m in first.metrics() if m.get("stopped") == "1"]
    assert stopped, first.text[-3000:]
    stop_step = int(stopped[0]["step"])
    assert 4 <= stop_step < 2 * STEPS_PER_EPOCH
    assert list_steps(job.checkpoint_dir)[-1] == stop_step
    assert not (job.model_dir / "1").exists(), "a stopped run must not publish a model"

    second = run_script(script_command(SCRIPT, args), job.env(), timeout=400)
    assert_ok(second, job)
    assert f"resumed_step={stop_step}; target_step={2 * STEPS_PER_EPOCH};" in second.text
    steps = [int(m["step"]) for m in second.metrics() if "loss" in m]
    assert steps[0] > stop_step

    # Per-epoch metrics over the whole (interrupted) run; the loss falls and the model learns.
    summary = json.loads((job.output_data_dir / "metrics.json").read_text())
    history = summary["history"]
    assert [row["epoch"] for row in history] == [1, 2] and summary["steps"] == 2 * STEPS_PER_EPOCH
    assert history[1]["train_loss"] < history[0]["train_loss"]
    assert history[1]["test_loss"] < history[0]["test_loss"]
    assert summary["test_accuracy"] > 0.8, summary
    losses = [float(m["loss"]) for m in first.metrics() + second.metrics() if "loss" in m]
    assert losses[-1] < 0.6 * losses[0], losses
    for name in ("loss.png", "accuracy.png"):
        data = (job.output_data_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name

    import tensorflow as tf

    serve = tf.saved_model.load(str(job.model_dir / "1")).signatures["serving_default"]
    _, (x_test, y_test) = load_mnist(flatten=True)
    probabilities = serve(images=tf.constant(x_test))["probabilities"].numpy()
    assert probabilities.shape == (1000, 10)
    assert float(np.mean(probabilities.argmax(axis=1) == y_test)) == pytest.approx(summary["test_accuracy"], abs=1e-6)


def test_two_clients_on_loopback_match_one_client(tmp_path: Path) -> None:
    args = ["--epochs", "1", "--log-steps", "10"]
    single = make_layout(tmp_path / "single")
    alone = run_script(
        script_command(SCRIPT, [*args, "--devices", "4", "--checkpoint-dir", str(single.checkpoint_dir)]),
        single.env(), timeout=300)
    assert_ok(alone, single)

    multi = make_layout(tmp_path / "multi")
    ports = reserve_ports(["127.0.0.1"] * 2)
    jobs = ",".join(f"127.0.0.1:{port}" for port in ports)
    processes = []
    logs = []
    for client in range(2):
        # As local mode and the estimator launcher start clients: the device count comes from the environment.
        env = multi.env({"DTENSOR_JOBS": jobs, "DTENSOR_CLIENT_ID": str(client), "DTENSOR_JOB_NAME": "worker",
                         "SMDDP_DTENSOR_DEVICES_PER_CLIENT": "2"})
        log = open(tmp_path / f"client{client}.log", "w+", encoding="utf-8")  # noqa: SIM115 - closed below
        logs.append(log)
        processes.append(subprocess.Popen(
            [sys.executable, str(SCRIPTS / SCRIPT), *args, "--checkpoint-dir", str(multi.checkpoint_dir)],
            env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    try:
        codes = [process.wait(timeout=300) for process in processes]
    except subprocess.TimeoutExpired:
        codes = None
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
    assert codes == [0, 0], f"exit codes {codes}\n" + "\n=====\n".join(text[-3000:] for text in outputs)

    assert "2 client(s)" in outputs[0] and "mesh {'batch': 4}" in outputs[0]
    assert not re.search(r"^epoch=", outputs[1], re.MULTILINE), "only client 0 prints metrics"
    assert (multi.model_dir / "1" / "saved_model.pb").is_file()
    assert list_steps(multi.checkpoint_dir) == [STEPS_PER_EPOCH]
    # Client 0 alone writes TensorBoard summaries, into the folder both clients see.
    scalars = one_writers_scalars(multi.output_dir / "tensorboard", list(range(10, STEPS_PER_EPOCH + 1, 10)))
    assert [step for step, _ in scalars["test/accuracy"]] == [STEPS_PER_EPOCH]  # the epoch's; the final one is equal
    # One mesh of 4 devices computes the same program whether 1 or 2 processes hold the devices.
    one = json.loads((single.output_data_dir / "metrics.json").read_text())
    two = json.loads((multi.output_data_dir / "metrics.json").read_text())
    assert two["clients"] == 2 and one["clients"] == 1
    assert two["test_loss"] == pytest.approx(one["test_loss"], abs=1e-3)
    assert two["test_accuracy"] == pytest.approx(one["test_accuracy"], abs=0.005)


def test_dtensor_jobs_without_a_client_id_is_refused(job: Layout) -> None:
    env = job.env({"DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:2"})
    run = run_script(script_command(SCRIPT, []), env, timeout=120)
    assert run.returncode != 0
    reason = job.failure.read_text()
    assert "ClusterConfigError" in reason and "DTENSOR_CLIENT_ID" in reason, reason
