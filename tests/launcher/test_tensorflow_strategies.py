"""smddprun launches TensorFlow's own strategies, as torchrun launches PyTorch's: every rank a MultiWorkerMirrored
worker's TF_CONFIG and a DTensor client's variables (one loopback port each), and ``--parameter-servers`` a
ParameterServerStrategy cluster whose chief's exit ends the job. The jobs run Keras 3 unchanged (the kit's start-up
is on every rank's PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.cluster import HostSlots, task_tf_configs
from smddp_compat.launcher import main
from smddp_compat.launcher._cli import tensorflow_rank_environments

TESTS = Path(__file__).resolve().parents[1]


def test_every_rank_is_a_worker_and_a_dtensor_client_on_its_own_loopback_port() -> None:
    envs = tensorflow_rank_environments([HostSlots("localhost", 3)])
    configs = [json.loads(env["TF_CONFIG"]) for env in envs]
    workers = configs[0]["cluster"]["worker"]
    assert [c["task"] for c in configs] == [{"index": i, "type": "worker"} for i in range(3)]
    assert all(c["cluster"] == {"worker": workers} for c in configs)
    assert len(set(workers)) == 3 and all(w.startswith("127.0.0.1:") for w in workers)
    assert [env["DTENSOR_CLIENT_ID"] for env in envs] == ["0", "1", "2"]
    assert {env["DTENSOR_JOBS"] for env in envs} == {",".join(workers)}
    assert {env["SMDDP_DTENSOR_NUM_CLIENTS"] for env in envs} == {"3"}


def test_a_parameter_server_cluster_names_each_task() -> None:
    tasks = task_tf_configs({"chief": ["a:1"], "worker": ["b:1", "c:1"], "ps": ["d:1"], "evaluator": []})
    assert [(job, index) for job, index, _ in tasks] == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    config = json.loads(tasks[2][2]["TF_CONFIG"])
    assert config["cluster"] == {"chief": ["a:1"], "worker": ["b:1", "c:1"], "ps": ["d:1"]}
    assert config["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize(("argv", "message"), [
    (["-np", "1", "--parameter-servers", "1"], "--parameter-servers 1 needs a chief and at least one worker, but -np is 1"),
    (["-np", "2", "--parameter-servers", "1", "--gloo"], "--gloo chooses Horovod's engine, which a ParameterServerStrategy"),
    (["-np", "2", "--parameter-servers", "-1"], "--parameter-servers must be 0 or more, got -1"),
])
def test_parameter_server_options_are_refused_in_one_line(argv: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, sys.executable, "-c", "pass"]) == 2
    assert message in capsys.readouterr().err


def _smddprun(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smddp_compat.launcher", *argv], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})


@pytest.mark.processes
def test_two_ranks_fit_keras3_under_multi_worker_mirrored_strategy(tmp_path: Path) -> None:
    """A user's plain Keras 3 MWMS script (callbacks, evaluate, predict) under ``smddprun -np 2``: one cluster, the
    same weights on both workers; and a shell's own TF_CONFIG is replaced, said in one line."""
    done = _smddprun("-np", "2", sys.executable, str(TESTS / "docker" / "scripts" / "plain_keras_fit.py"),
                     env={"SM_OUTPUT_DATA_DIR": str(tmp_path), "SM_MODEL_DIR": str(tmp_path / "model"),
                          "TF_CONFIG": '{"cluster": {"worker": ["elsewhere:1"]}}'})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "TF_CONFIG of this shell is replaced by the job's own" in done.stderr
    records = [json.loads((tmp_path / f"fit-{task}.json").read_text()) for task in (0, 1)]
    assert {r["keras"] for r in records} == {"keras-3"}
    assert records[0]["weights"] == records[1]["weights"] and records[0]["evaluation"][1] > 0.9


@pytest.mark.processes
def test_two_ranks_are_one_dtensor_mesh(tmp_path: Path) -> None:
    done = _smddprun("-np", "2", sys.executable, str(TESTS / "local_mode" / "scripts" / "dtensor_sum.py"),
                     env={"SM_OUTPUT_DATA_DIR": str(tmp_path), "SMDDP_DTENSOR_DEVICES_PER_CLIENT": "2"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert [json.loads((tmp_path / f"dtensor-{c}.json").read_text()) for c in (0, 1)] == [
        {"client": 0, "clients": 2, "sum": 4.0}, {"client": 1, "clients": 2, "sum": 4.0}]


@pytest.mark.processes
def test_parameter_servers_train_keras3_fit_and_end_with_the_chief() -> None:
    """TensorFlow's parameter-server tutorial pattern (a branch on the task type) on Keras 3: the chief fits,
    evaluates and predicts through the workers and the parameter server smddprun started; their serving ends with
    the chief."""
    done = _smddprun("-np", "2", "--parameter-servers", "1", sys.executable,
                     str(TESTS / "local_mode" / "scripts" / "ps_strategy_fit.py"))
    out = done.stdout
    assert done.returncode == 0, (out + done.stderr)[-4000:]
    assert "the chief, 1 worker(s), 1 parameter server(s)" in done.stderr
    assert "[chief] task=chief:0" in out and "[worker:0] task=worker:0" in out
    assert "[chief] keras=keras-3; accuracy=" in out, out[-3000:]
    accuracy = float(out.split("[chief] keras=keras-3; accuracy=")[1].split(";")[0])
    assert accuracy >= 0.8
