"""keras_mwms.py --strategy / --cpu-devices: the plan (which strategy, which Keras), one short real training run per
strategy (stopped by SIGTERM, then resumed), the refusals (made before TensorFlow is imported), the Keras 3 finding
behind central_storage's tf-keras, and a checkpoint of the other Keras flavour named as such."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.entry_points.common.errors import EntryPointError, HyperparameterError

from tests.entry_points.script_runs import (
    REPO,
    Layout,
    assert_ok,
    assert_stopped,
    read_scalars,
    run_script,
    script_command,
    step_at_least,
)

SCRIPT = "keras_mwms.py"
TWO_HOSTS = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-1"}
TWO_WORKERS_TF_CONFIG = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                                                 "task": {"type": "worker", "index": 0}})}
ONE_WORKER_TF_CONFIG = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["127.0.0.1:1"]},
                                                "task": {"type": "worker", "index": 0}})}


# -- the plan (no TensorFlow work) ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("strategy", "cpu_devices", "environ", "kind", "workers", "needs_tf_keras"), [
    ("auto", 1, {}, "mirrored", 1, False),
    ("auto", 4, {}, "mirrored", 1, False),
    ("auto", 1, TWO_HOSTS, "multi_worker_mirrored", 2, False),
    ("auto", 1, ONE_WORKER_TF_CONFIG, "multi_worker_mirrored", 1, False),
    ("Mirrored", 2, {}, "mirrored", 1, False),
    ("central-storage", 2, {}, "central_storage", 1, True),
    ("central_storage", 1, ONE_WORKER_TF_CONFIG, "central_storage", 1, True),
    ("multi_worker_mirrored", 1, {}, "multi_worker_mirrored", 1, False),
    ("multi_worker_mirrored", 1, TWO_WORKERS_TF_CONFIG, "multi_worker_mirrored", 2, False),
])
def test_plan(strategy: str, cpu_devices: int, environ: dict[str, str], kind: str, workers: int,
              needs_tf_keras: bool) -> None:
    from smddp_compat.entry_points.keras_mwms import plan_strategy

    plan = plan_strategy(strategy, cpu_devices, environ)
    assert (plan.kind, plan.workers, plan.cpu_devices, plan.needs_tf_keras) == (kind, workers, cpu_devices,
                                                                                needs_tf_keras)


@pytest.mark.parametrize(("strategy", "cpu_devices", "environ", "message"), [
    ("mirrored", 1, TWO_HOSTS, (r"--strategy='mirrored': MirroredStrategy trains on one host, but this job's "
                                r"cluster has 2 hosts \(SM_HOSTS: algo-1, algo-2\)\. Fix: use --strategy "
                                r"multi_worker_mirrored")),
    ("central_storage", 1, TWO_WORKERS_TF_CONFIG, r"--strategy='central_storage': CentralStorageStrategy .* 2 workers"),
    ("multi_worker_mirrored", 2, {}, r"--cpu-devices=2: MultiWorkerMirroredStrategy .* Fix: drop --cpu-devices"),
    ("auto", 3, TWO_HOSTS, r"--cpu-devices=3: MultiWorkerMirroredStrategy \(--strategy=auto\)"),
    ("parameter_server", 1, {}, (r"--strategy='parameter_server': is not a strategy .* Fix: use one of auto, "
                                 r"mirrored, central_storage, multi_worker_mirrored")),
])
def test_plan_refusals(strategy: str, cpu_devices: int, environ: dict[str, str], message: str) -> None:
    from smddp_compat.entry_points.keras_mwms import plan_strategy

    with pytest.raises(HyperparameterError, match=message):
        plan_strategy(strategy, cpu_devices, environ)


def test_keras_flavour_selection() -> None:
    from smddp_compat.entry_points.keras_mwms import plan_strategy, select_keras_flavour

    central = plan_strategy("central_storage", 2, {})
    for before, after in [({}, "1"), ({"TF_USE_LEGACY_KERAS": ""}, "1"), ({"TF_USE_LEGACY_KERAS": "true"}, "true")]:
        environ = dict(before)
        select_keras_flavour(central, environ)
        assert environ["TF_USE_LEGACY_KERAS"] == after
    with pytest.raises(EntryPointError, match=r"TF_USE_LEGACY_KERAS='0': selects Keras 3, which cannot fit this "
                                              r"model under CentralStorageStrategy .* Fix: unset TF_USE_LEGACY_KERAS"):
        select_keras_flavour(central, {"TF_USE_LEGACY_KERAS": "0"})
    mirrored = {}
    select_keras_flavour(plan_strategy("mirrored", 2, {}), mirrored)
    assert mirrored == {}, "MirroredStrategy keeps Keras 3"


# -- one real run per strategy ----------------------------------------------------------------------------------------

RUNS = {
    # id: (hyperparameters, strategy class, replicas, Keras flavour in the log)
    "mirrored-2cpu": (["--strategy", "mirrored", "--cpu-devices", "2"], "MirroredStrategy", 2, "keras-3"),
    "central_storage-2cpu": (["--strategy", "central_storage", "--cpu-devices", "2"], "CentralStorageStrategy", 2,
                             "tf-keras-2"),
    "multi_worker_mirrored-1worker": (["--strategy", "multi_worker_mirrored"], "MultiWorkerMirroredStrategy", 1,
                                      "keras-3"),
}
# --strategy auto is the plan's choice (test_plan), then one of these runs: a run of it would repeat MirroredStrategy's
# (auto on 2 hosts trains as MultiWorkerMirroredStrategy in test_keras_mwms.py).


@pytest.mark.processes
@pytest.mark.parametrize("run_id", list(RUNS))
def test_strategy_trains_stops_and_resumes(run_id: str, layout: Layout) -> None:
    hyperparameters, class_name, replicas, keras = RUNS[run_id]
    args = [*hyperparameters, "--epochs", "2", "--steps-per-epoch", "15", "--checkpoint-steps", "5",
            "--log-steps", "5", "--checkpoint-dir", str(layout.checkpoint_dir)]
    first = run_script(script_command(SCRIPT, args), layout.env(), stop_when=step_at_least(5),
                       stop_signal=signal.SIGTERM)
    assert_stopped(first, layout)
    strategy_line = f"strategy={class_name} replicas={replicas} workers=1"
    assert strategy_line in first.text, first.text[-3000:]
    assert f"{class_name}, worker 0/1, {replicas} replica(s), global batch {32 * replicas}, {keras}" in first.text
    stopped = [line for line in first.lines if line.startswith("stopped on SIGTERM at step ")]
    assert stopped, "the run was not stopped by SIGTERM:\n" + first.text[-3000:]
    stop_step = int(stopped[0].split("step ")[1].split(";")[0])
    assert list_steps(layout.checkpoint_dir)[-1] == stop_step < 30
    assert not (layout.model_dir / "1").exists(), "a stopped run saves no model"

    second = run_script(script_command(SCRIPT, args), layout.env())
    assert_ok(second, layout)
    assert strategy_line in second.text
    assert f"resumed from the checkpoint of step {stop_step}" in second.text
    accuracy_lines = [m for m in second.metrics() if "accuracy" in m and "loss" in m]
    assert accuracy_lines and int(accuracy_lines[-1]["step"]) == 30, second.text[-3000:]
    assert int(second.metrics()[0]["step"]) > stop_step, "the resumed run repeated steps"
    summary = json.loads((layout.output_data_dir / "metrics.json").read_text())
    assert summary["strategy"] == class_name and summary["replicas"] == replicas and summary["workers"] == 1
    assert summary["steps"] == 30 and summary["resumed_from"] == stop_step
    assert summary["global_batch"] == 32 * replicas and summary["keras"].startswith(keras)
    assert summary["test_accuracy"] > 0.5, summary  # 30 steps; chance is 0.1
    assert (layout.model_dir / "1" / "saved_model.pb").is_file()
    assert (layout.model_dir / "model.keras").is_file() == (keras == "keras-3")
    assert f"model saved to {layout.model_dir / '1'}" in second.text
    assert list_steps(layout.checkpoint_dir)[-1] == 30
    scalars = read_scalars(layout.output_dir / "tensorboard")  # the two runs' event files: one curve
    assert [step for step, _ in scalars["train/loss"]] == [5, 10, 15, 20, 25, 30]
    assert len(list((layout.output_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2


# -- refusals: one line, the failure file, exit status 1, TensorFlow never imported ----------------------------------

REFUSALS = {
    "mirrored-on-two-hosts": (["--strategy", "mirrored"], TWO_HOSTS,
                              "HyperparameterError: --strategy='mirrored': MirroredStrategy trains on one host"),
    "central_storage-on-two-workers": (["--strategy", "central_storage"], TWO_WORKERS_TF_CONFIG,
                                       ("HyperparameterError: --strategy='central_storage': CentralStorageStrategy "
                                        "trains on one host, but this job's cluster has 2 workers")),
    "mwms-with-cpu-devices": (["--strategy", "multi_worker_mirrored", "--cpu-devices", "2"], {},
                              "HyperparameterError: --cpu-devices=2: MultiWorkerMirroredStrategy"),
    "keras3-under-central_storage": (["--strategy", "central_storage"], {"TF_USE_LEGACY_KERAS": "0"},
                                     ("EntryPointError: TF_USE_LEGACY_KERAS='0': selects Keras 3, which cannot fit "
                                      "this model under CentralStorageStrategy")),
    "unknown-strategy": (["--strategy", "tpu"], {}, "HyperparameterError: --strategy='tpu': is not a strategy"),
}


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder to put first on PYTHONPATH whose ``tensorflow`` package exits 97 when imported."""
    root = tmp_path_factory.mktemp("no-tensorflow")
    (root / "tensorflow").mkdir()
    (root / "tensorflow" / "__init__.py").write_text(
        'import sys\nsys.stderr.write("TENSORFLOW WAS IMPORTED\\n")\nraise SystemExit(97)\n', encoding="utf-8")
    return root


@pytest.mark.processes
@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusal(case: str, layout: Layout, no_tensorflow: Path) -> None:
    hyperparameters, environ, expected = REFUSALS[case]
    env = layout.env({**environ, "PYTHONPATH": str(no_tensorflow)})
    proc = subprocess.run(script_command(SCRIPT, hyperparameters), env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"keras_mwms: refused: {expected}"), lines
    assert "Fix: " in lines[0]
    assert layout.failure.read_text().startswith(expected)


# -- the Keras 3 finding behind central_storage's tf-keras, and checkpoints across flavours ---------------------------

KERAS3_UNDER_CENTRAL_STORAGE = """
import numpy as np, tensorflow as tf
from smddp_compat.entry_points.common.keras_flavor import is_keras3
from smddp_compat.entry_points.common.mnist_model import build_cnn
assert is_keras3()
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.experimental.CentralStorageStrategy(compute_devices=["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = build_cnn(seed=1)
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
x, y = np.zeros((8, 28, 28, 1), "float32"), np.zeros(8, "int64")
try:
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=1, verbose=0)
    print("FIT OK")
except ValueError as exc:
    print("FIT FAILED:", " ".join(str(exc).split())[:400])
"""


@pytest.mark.processes
def test_keras3_cannot_fit_the_cnn_under_central_storage(layout: Layout) -> None:
    """Why --strategy central_storage selects tf-keras. If this starts printing FIT OK, Keras fixed it: drop the
    switch (plan_strategy's needs_tf_keras) and its paragraph in docs/training-scripts.md."""
    proc = subprocess.run([sys.executable, "-c", KERAS3_UNDER_CENTRAL_STORAGE], env=layout.env(), cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FIT FAILED:" in proc.stdout and "AggregatingVariable" in proc.stdout, proc.stdout + proc.stderr[-2000:]


@pytest.mark.processes
def test_checkpoint_of_the_other_keras_is_named(layout: Layout) -> None:
    args = ["--epochs", "1", "--steps-per-epoch", "4", "--log-steps", "2", "--save-model", "false",
            "--checkpoint-dir", str(layout.checkpoint_dir)]
    tf_keras_run = run_script(script_command(SCRIPT, ["--strategy", "central_storage", *args]), layout.env())
    assert_ok(tf_keras_run, layout)
    assert list_steps(layout.checkpoint_dir) == [4]
    keras3_run = run_script(script_command(SCRIPT, ["--strategy", "mirrored", "--epochs", "2", *args[2:]]),
                            layout.env())
    assert keras3_run.returncode == 1
    failure = layout.failure.read_text()
    assert failure.startswith("CheckpointError: the checkpoint ") and "was written with tf-keras, but this run " \
        "trains with Keras 3 (MirroredStrategy, --strategy=mirrored); their checkpoints do not mix" in failure, failure
