"""keras_mwms.py: TF_CONFIG and batch-size rules; one-host MirroredStrategy run killed mid-epoch and resumed;
two workers (MultiWorkerMirroredStrategy over loopback, --strategy auto on Keras 3 and multi_worker_mirrored on
tf-keras) with identical final weights and chief-only artifacts. The other strategies: test_keras_mwms_strategies.py."""

from __future__ import annotations

import io
import json
import signal
import socket

import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.entry_points.common.errors import HyperparameterError
from smddp_compat.entry_points.common.training_env import TrainingEnv
from tests.entry_points.script_runs import (
    Layout,
    assert_ok,
    make_layout,
    one_writers_scalars,
    run_script,
    script_command,
    step_at_least,
)

SCRIPT = "keras_mwms.py"


def test_tf_config_built_from_sagemaker_hosts() -> None:
    from smddp_compat.entry_points.keras_mwms import tf_config_from_env

    env = TrainingEnv.from_environ({
        "SM_HOSTS": '["algo-1", "algo-2", "algo-3"]', "SM_CURRENT_HOST": "algo-2",
        "SMDDP_HOST_ADDRESSES": '{"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}',
    })
    assert tf_config_from_env(env, 12345) == {
        "cluster": {"worker": ["127.0.0.2:12345", "127.0.0.3:12345", "algo-3:12345"]},
        "environment": "cloud",
        "task": {"type": "worker", "index": 1},
    }
    shared = TrainingEnv.from_environ({
        "SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2",
        "SMDDP_HOST_ADDRESSES": '{"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}',
    })
    assert tf_config_from_env(shared, 12345)["cluster"]["worker"] == ["127.0.0.1:12345", "127.0.0.1:12346"]


def test_global_batch_rules() -> None:
    from smddp_compat.entry_points.keras_mwms import global_batch_size

    assert global_batch_size(32, 0, 4) == 128
    assert global_batch_size(32, 96, 4) == 96
    with pytest.raises(HyperparameterError, match=r"--global-batch-size=33: is not divisible by the 2 replicas.*e.g. 32"):
        global_batch_size(32, 33, 2)


@pytest.mark.processes
def test_one_host_sigkill_then_resume(layout: Layout) -> None:
    args = ["--epochs", "2", "--steps-per-epoch", "25", "--checkpoint-steps", "10", "--log-steps", "5",
            "--checkpoint-dir", str(layout.checkpoint_dir)]
    first = run_script(script_command(SCRIPT, args), layout.env(), stop_when=step_at_least(25),
                       stop_signal=signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    assert "MirroredStrategy, worker 0/1, 1 replica(s), global batch 32, keras-3" in first.text
    assert "strategy=MirroredStrategy replicas=1 workers=1" in first.text  # --strategy auto, --cpu-devices 1
    resume_from = list_steps(layout.checkpoint_dir)[-1]
    assert resume_from in (20, 30)

    second = run_script(script_command(SCRIPT, args), layout.env())
    assert_ok(second, layout)
    assert f"resumed from the checkpoint of step {resume_from}" in second.text
    steps = [int(m["step"]) for m in second.metrics()]
    assert steps[0] == resume_from + 5 and steps[-1] == 50
    summary = json.loads((layout.output_data_dir / "metrics.json").read_text())
    assert summary["steps"] == 50 and summary["test_accuracy"] > 0.7
    losses = [float(m["loss"]) for m in first.metrics() + second.metrics() if "loss" in m]
    assert losses[0] > 1.5 and losses[-1] < 0.6 * losses[0], losses
    assert (layout.model_dir / "1" / "saved_model.pb").is_file() and (layout.model_dir / "model.keras").is_file()


def _free_port_pair() -> int:
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base < 65535:
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", base + 1))
                    return base
                except OSError:
                    continue
    raise RuntimeError("no two consecutive free ports")


@pytest.mark.e2e
@pytest.mark.parametrize(("strategy", "keras"), [("auto", "keras-3"), ("multi_worker_mirrored", "tf-keras-2")])
def test_two_workers_mwms(strategy: str, keras: str, tmp_path) -> None:  # noqa: ANN001 - pytest's tmp_path
    from smddp_compat.launcher import ProcessSpec, run_process_group

    hosts = ["algo-1", "algo-2"]
    layouts = [make_layout(tmp_path / host) for host in hosts]
    shared_checkpoints = tmp_path / "checkpoints"
    port = _free_port_pair()
    specs = []
    for host, layout in zip(hosts, layouts):
        env = layout.env({
            "SM_HOSTS": json.dumps(hosts), "SM_CURRENT_HOST": host,
            "SMDDP_HOST_ADDRESSES": json.dumps({h: "127.0.0.1" for h in hosts}),
            **({"TF_USE_LEGACY_KERAS": "1"} if keras.startswith("tf-keras") else {}),
        })
        argv = script_command(SCRIPT, ["--epochs", "1", "--steps-per-epoch", "15", "--log-steps", "5",
                                       "--mwms-port", str(port), "--weights-digest", "true", "--strategy", strategy,
                                       "--checkpoint-dir", str(shared_checkpoints)])
        specs.append(ProcessSpec(argv=argv, env=env, label=host, log_path=str(layout.root / "log.txt"), host=host))
    output = io.StringIO()
    result = run_process_group(specs, timeout=400, stream=output)
    assert result.ok, result.reason + "\n" + output.getvalue()[-4000:]
    chief_log = (layouts[0].root / "log.txt").read_text()
    assert f"worker 0/2, 2 replica(s), global batch 64, {keras}" in chief_log
    assert "strategy=MultiWorkerMirroredStrategy replicas=2 workers=2" in chief_log
    digests = [(layout.output_data_dir / f"weights-rank{i}.sha256").read_text() for i, layout in enumerate(layouts)]
    assert digests[0] == digests[1]
    assert (layouts[0].model_dir / "1" / "saved_model.pb").is_file()
    assert not any(layouts[1].model_dir.iterdir()), "only the chief keeps a model"
    assert list_steps(shared_checkpoints) == [15]
    one_writers_scalars(layouts[0].output_dir / "tensorboard", [5, 10, 15])  # the chief's
    assert not (layouts[1].output_dir / "tensorboard").exists(), "only the chief writes TensorBoard summaries"
    assert "step=15;" in chief_log and "step=" not in (layouts[1].root / "log.txt").read_text()
