"""Unit tests of the modules the entry points share: datasets, the SageMaker contract, checkpoints."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smddp_compat.entry_points.common import datasets
from smddp_compat.entry_points.common.errors import ClusterConfigError, DatasetError, HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean,
    parse_hyperparameters,
    positive_float,
    positive_int,
)
from smddp_compat.entry_points.common.metric_lines import (
    MetricLogger,
    metric_definitions,
    metric_regex,
    parse_metric_line,
)
from smddp_compat.entry_points.common.training_env import TrainingEnv
from smddp_compat import cluster

# ------------------------------------------------------------------------------------------------ datasets


def test_bundled_mnist_split_is_stratified_deterministic_and_disjoint() -> None:
    (x, y), (xt, yt) = datasets.load_mnist()
    assert x.shape == (4000, 28, 28, 1) and xt.shape == (1000, 28, 28, 1)
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= x.min() and x.max() <= 1.0 and x.max() > 0.9
    assert np.bincount(y).tolist() == [400] * 10 and np.bincount(yt).tolist() == [100] * 10
    (x2, y2), _ = datasets.load_mnist(flatten=True)
    assert x2.shape == (4000, 784) and np.array_equal(x2.reshape(x.shape), x) and np.array_equal(y2, y)
    train_rows = {row.tobytes() for row in x.reshape(4000, -1)}
    assert not any(row.tobytes() in train_rows for row in xt.reshape(1000, -1))


def test_bundled_rotten_tomatoes_split() -> None:
    (texts, labels), (test_texts, test_labels) = datasets.load_rotten_tomatoes()
    assert len(texts) + len(test_texts) == 12808
    assert abs(len(test_texts) / 12808 - 0.2) < 0.005
    assert set(np.unique(labels)) == {0, 1} and labels.dtype == np.int64
    assert labels.sum() + test_labels.sum() == 7403  # fresh snippets
    assert texts.dtype.kind == "U" and all(len(t) > 0 for t in texts[:50])


def test_write_channel_round_trips(tmp_path: Path) -> None:
    datasets.write_channel("mnist", tmp_path / "mnist")
    datasets.write_channel("rotten_tomatoes", tmp_path / "rt")
    (x, y), (xt, yt) = datasets.load_mnist(str(tmp_path / "mnist"))
    (bx, by), (bxt, byt) = datasets.load_mnist()
    assert np.abs(x - bx).max() <= 0.5 / 255 + 1e-6 and np.array_equal(y, by) and np.array_equal(yt, byt)
    (texts, labels), (test_texts, _) = datasets.load_rotten_tomatoes(str(tmp_path / "rt"))
    (btexts, blabels), _ = datasets.load_rotten_tomatoes()
    assert texts.tolist() == btexts.tolist() and np.array_equal(labels, blabels)
    # Separate train/test channels, as SageMaker mounts them.
    (tmp_path / "test_only").mkdir()
    (tmp_path / "mnist" / "test.npz").rename(tmp_path / "test_only" / "test.npz")
    _, (xt2, _) = datasets.load_mnist(str(tmp_path / "mnist"), test_channel=str(tmp_path / "test_only"))
    assert xt2.shape == (1000, 28, 28, 1)


def test_malformed_channels_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="holds no train.npz"):
        datasets.load_mnist(str(tmp_path))
    np.savez(tmp_path / "train.npz", x=np.zeros((5, 28, 28)), y=np.zeros(5, np.int64))
    with pytest.raises(DatasetError, match="needs its own held-out data"):
        datasets.load_mnist(str(tmp_path))
    np.savez(tmp_path / "test.npz", x=np.zeros((5, 27, 28)), y=np.zeros(5, np.int64))
    with pytest.raises(DatasetError, match=r"shape \(5, 27, 28\)"):
        datasets.load_mnist(str(tmp_path))
    np.savez(tmp_path / "test.npz", images=np.zeros((5, 28, 28)))
    with pytest.raises(DatasetError, match=r"lacks array\(s\) \['x', 'y'\]"):
        datasets.load_mnist(str(tmp_path))
    with pytest.raises(DatasetError, match="not a directory"):
        datasets.load_mnist(str(tmp_path / "missing"))
    (tmp_path / "train.csv").write_text("text,label\nnice,1\nbad,maybe\n")
    (tmp_path / "test.csv").write_text("text,label\nok,0\n")
    with pytest.raises(DatasetError, match="line 3: label 'maybe'"):
        datasets.load_rotten_tomatoes(str(tmp_path))
    with pytest.raises(DatasetError, match="unknown dataset 'cifar'"):
        datasets.write_channel("cifar", tmp_path)


# -------------------------------------------------------------------------------------- SageMaker contract


def test_training_env_reads_sagemaker_variables(tmp_path: Path) -> None:
    env = TrainingEnv.from_environ({
        "SM_MODEL_DIR": "/m", "SM_OUTPUT_DIR": "/o", "SM_CHANNEL_TRAIN": "/data/train", "SM_CHANNEL_TEST": "/t",
        "SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "0", "SM_NUM_CPUS": "4",
        "SMDDP_HOST_ADDRESSES": '{"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}',
    }, checkpoint_dir=tmp_path / "ck")
    assert env.model_dir == Path("/m") and env.output_data_dir == Path("/o/data")
    assert env.checkpoint_dir == tmp_path / "ck"
    assert env.channel("train") == "/data/train" and env.channel("TEST") == "/t" and env.channel("x") is None
    assert env.hosts == ("algo-1", "algo-2") and env.host_index == 1 and env.is_multi_host
    assert env.address_of("algo-1") == "127.0.0.2" and env.num_cpus == 4


def test_training_env_local_fallbacks(tmp_path: Path) -> None:
    env = TrainingEnv.from_environ({"SMDDP_LOCAL_ROOT": str(tmp_path)})
    if not Path("/opt/ml/model").is_dir():
        assert env.model_dir == tmp_path / "model"
    if not Path("/opt/ml/checkpoints").is_dir():
        assert env.checkpoint_dir == env.output_dir / "checkpoints"
    assert env.hosts == ("algo-1",) and env.address_of("algo-1") == "algo-1" and not env.is_multi_host
    env.prepare_dirs()
    assert env.output_data_dir.is_dir()


def test_a_job_that_names_its_tree_keeps_its_checkpoints_there(tmp_path: Path, monkeypatch) -> None:
    """Local mode's host (SAGEMAKER_BASE_DIR): its tree's checkpoints/, even when this machine has a writable
    /opt/ml/checkpoints (another job's, or SageMaker's default path created by a local estimator)."""
    from smddp_compat.entry_points.common import training_env

    machine = tmp_path / "machine-opt-ml-checkpoints"
    machine.mkdir()
    monkeypatch.setattr(training_env.contract, "DEFAULT_CHECKPOINT_DIR", str(machine))
    host_tree = tmp_path / "algo-1"
    assert TrainingEnv.from_environ({"SAGEMAKER_BASE_DIR": str(host_tree)}).checkpoint_dir == host_tree / "checkpoints"
    assert TrainingEnv.from_environ({"SMDDP_LOCAL_ROOT": str(tmp_path / "x")}).checkpoint_dir == machine  # SageMaker's


@pytest.mark.parametrize(("environ", "error", "message"), [
    ({"SM_HOSTS": "[algo-1]"}, cluster.ClusterConfigError, "not valid JSON"),
    ({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-3"}, cluster.ClusterConfigError, "not one of SM_HOSTS"),
    ({"SMDDP_HOST_ADDRESSES": '["127.0.0.2"]'}, cluster.ClusterConfigError, "is not a JSON object"),
    ({"SM_NUM_CPUS": "many"}, ClusterConfigError, "not an integer"),
])
def test_training_env_rejects_bad_cluster_values(environ: dict[str, str], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        TrainingEnv.from_environ(environ)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning-rate", type=positive_float, default=0.1)
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    parser.add_argument("--export", type=boolean, default=False)
    return parser


def test_parse_hyperparameters_accepts_sagemaker_spellings() -> None:
    args = parse_hyperparameters(_parser(), ["--learning_rate", "0.5", "--epochs=4.0", "--optimizer", '"sgd"',
                                             "--export", "True", "--sagemaker_program", "x.py"])
    assert (args.learning_rate, args.epochs, args.optimizer, args.export) == (0.5, 4, "sgd", True)
    assert parse_hyperparameters(_parser(), []).epochs == 3


def test_parse_hyperparameters_drops_the_tf_estimators_model_dir_unless_the_script_defines_it() -> None:
    # SDK v2's TensorFlow estimator adds model_dir (an S3 path) to every job's hyperparameters.
    args = parse_hyperparameters(_parser(), ["--model_dir", "s3://bucket/job/model", "--epochs", "2"])
    assert args.epochs == 2 and not hasattr(args, "model_dir")
    parser = _parser()
    parser.add_argument("--model-dir", default="")
    assert parse_hyperparameters(parser, ["--model_dir", "s3://b/m"]).model_dir == "s3://b/m"


def test_parse_hyperparameters_drops_the_objective_name_a_tuning_job_gives_each_trial() -> None:
    # SageMaker adds _tuning_objective_metric to the hyperparameters of every training job a tuning job starts.
    args = parse_hyperparameters(_parser(), ["--_tuning_objective_metric", '"test_accuracy"', "--epochs", "2"])
    assert args.epochs == 2 and not hasattr(args, "_tuning_objective_metric")


@pytest.mark.parametrize(("argv", "message"), [
    (["--epoch", "3"], r"hyperparameters=\['--epoch', '3'\]: this script has no such hyperparameter\. Fix: use the "
                       r"ones it accepts: \['--epochs'"),
    (["--epochs", "0"], "--epochs='0': '0' must be an integer >= 1. Fix: pass values this script accepts"),
    (["--epochs", "2.5"], "'2.5' is not an integer"),
    (["--learning-rate", "nan"], "finite number > 0"),
    (["--optimizer", "rmsprop"], "invalid choice: 'rmsprop'"),
    (["--export", "maybe"], "not a boolean"),
])
def test_parse_hyperparameters_errors_name_the_value(argv: list[str], message: str) -> None:
    with pytest.raises(HyperparameterError, match=message):
        parse_hyperparameters(_parser(), argv)


def test_metric_lines_are_stable_and_parse() -> None:
    stream = io.StringIO()
    line = MetricLogger(stream=stream).log(epoch=1, step=120, loss=0.31, accuracy=np.float32(0.91), lr=1e-5)
    assert line == "epoch=1; step=120; loss=0.3100; accuracy=0.9100; lr=1.0000e-05;"
    assert stream.getvalue() == line + "\n"  # no progress bar: not a terminal
    assert parse_metric_line("[0] " + line.replace("epoch", "x_epoch"))["step"] == "120"
    assert MetricLogger(enabled=False, stream=stream).log(step=1) == "step=1;"
    assert stream.getvalue().count("\n") == 1
    regex = re.compile(metric_regex("loss"))
    assert regex.search("[algo-1] epoch=2; test_loss=0.2000; loss=0.3100;").group(1) == "0.3100"
    assert regex.search("epoch=2; test_loss=0.2000;") is None
    assert metric_definitions(["loss"]) == [{"Name": "loss", "Regex": metric_regex("loss")}]


@pytest.mark.processes
def test_run_entry_point_writes_failure_file_and_exits_non_zero(tmp_path: Path) -> None:
    program = tmp_path / "fails.py"
    program.write_text(
        "from smddp_compat.entry_points.common.lifecycle import run_entry_point\n"
        "from smddp_compat.entry_points.common.errors import HyperparameterError\n"
        "def main():\n"
        "    raise HyperparameterError('--epochs', 0, 'must be >= 1', 'pass --epochs 1 or more')\n"
        "run_entry_point(main)\n"
    )
    env = {"SM_OUTPUT_DIR": str(tmp_path / "out"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    failure = (tmp_path / "out" / "failure").read_text()
    assert failure.startswith("HyperparameterError: --epochs=0: must be >= 1. Fix: pass --epochs 1 or more")
    assert "Traceback" in failure and "HyperparameterError" in done.stderr


@pytest.mark.processes
def test_sigterm_sets_the_flag_and_a_second_one_kills(tmp_path: Path) -> None:
    program = tmp_path / "loop.py"
    program.write_text(
        "import os, signal, time\n"
        "from smddp_compat.entry_points.common.lifecycle import run_entry_point, termination_requested\n"
        "def main():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    deadline = time.monotonic() + 20\n"
        "    while not termination_requested() and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "    print('flag', termination_requested(), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(20)\n"
        "run_entry_point(main)\n"
    )
    env = {"SM_OUTPUT_DIR": str(tmp_path / "out"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=60)
    assert "flag True" in done.stdout
    assert done.returncode == -15  # the second SIGTERM ends it the default way


# --------------------------------------------------------------------------------------------- checkpoints


def test_checkpoints_are_atomic_pruned_and_restored(tmp_path: Path) -> None:
    import tensorflow as tf

    from smddp_compat.entry_points.common.checkpoints import latest_step, list_steps, restore_latest, save_checkpoint
    from smddp_compat.entry_points.common.errors import CheckpointError

    variable = tf.Variable([1.0, 2.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    assert restore_latest(checkpoint, tmp_path / "none") is None
    for step in (10, 20, 30, 40):
        variable.assign([float(step), 0.0])
        save_checkpoint(checkpoint, tmp_path, step, keep=2)
    assert list_steps(tmp_path) == [30, 40]
    # A save killed halfway leaves a temporary folder and a step folder without its index: both ignored.
    (tmp_path / ".tmp-00000050-dead").mkdir()
    (tmp_path / "step-00000060").mkdir()
    assert latest_step(tmp_path) == 40
    variable.assign([0.0, 0.0])
    assert restore_latest(checkpoint, tmp_path) == 40 and variable.numpy().tolist() == [40.0, 0.0]
    save_checkpoint(checkpoint, tmp_path, 41)
    assert not list(tmp_path.glob(".tmp-*"))
    assert json.loads((tmp_path / "step-00000041" / "step.json").read_text()) == {"step": 41}
    with pytest.raises(CheckpointError, match="different model"):
        restore_latest(tf.train.Checkpoint(v=tf.Variable([[1.0, 2.0, 3.0]])), tmp_path)


@pytest.mark.processes
def test_data_and_contract_modules_do_not_import_tensorflow() -> None:
    code = ("import sys, smddp_compat.entry_points, smddp_compat.entry_points.common.datasets, "
            "smddp_compat.entry_points.common.training_env, smddp_compat.entry_points.common.hyperparameters, "
            "smddp_compat.entry_points.common.metric_lines, smddp_compat.entry_points.common.lifecycle, "
            "smddp_compat.entry_points.common.errors; "
            "heavy = [m for m in ('tensorflow', 'keras', 'horovod', 'boto3', 'sagemaker') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
