"""``smddp local --distribution parameter_server``: the bundled parameter-server entry point trains on 2 simulated
hosts with SageMaker's toolkit layout (a parameter server and the script per host), reaches its held-out target,
resumes from its checkpoints, and a lost process ends the job naming its host and role (a job whose scripts never
use the parameter servers completes when they end: the probe's parameter_server job in
tests/docker/test_one_command.py, in both backends)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from tests.entry_points.script_runs import one_writers_scalars

ENTRY_POINTS = Path(__file__).resolve().parents[2] / "entry_points"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
TARGET_ACCURACY = 0.90  # held-out accuracy after two epochs (0.95-0.97 measured; one epoch gives 0.91-0.94)
pytestmark = [pytest.mark.processes, pytest.mark.timeout(600)]


def _smddp_local(tmp_path: Path, *extra: str, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "smddp_compat.commands.cli", "local", "parameter_server_mnist.py", "--source-dir",
         str(ENTRY_POINTS), "--distribution", "parameter_server", "--instance-count", "2",
         "--output", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
    )


def _test_accuracy(output: str) -> float:
    values = re.findall(r"^\[algo-1,master\] .*test_accuracy=([0-9.]+);", output, flags=re.MULTILINE)
    assert values, output[-3000:]
    return float(values[-1])


def test_two_hosts_train_to_the_target_and_resume_from_the_checkpoints(tmp_path: Path) -> None:
    """The toolkit's layout (per host a parameter server and the script: master on algo-1, worker on algo-2) trains
    to the held-out target; only the coordinator writes (model, checkpoints at each epoch end, TensorBoard summaries,
    metrics.json; the hosts share the job's checkpoint folder); every other task exits once the coordinator has finished; a second job on the checkpoints
    resumes at the next step (the only test of the bundled entry point's whole 2-host run and resume)."""
    first = _smddp_local(tmp_path, "--job-name", "ps-first", "--hp", "epochs=2", "--hp", "log-steps=31",
                         "--work-dir", str(tmp_path / "work"))
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    out = first.stdout
    assert re.search(r"^\[algo-1,master\] .*ParameterServerStrategy, coordinator \(master 0\) at 127\.0\.0\.2:\d+ "
                     r"\(host algo-1\), 1 worker\(s\), 2 parameter server\(s\)", out, flags=re.MULTILINE), out[-3000:]
    for label, task in (("algo-1,ps", "ps 0"), ("algo-2,ps", "ps 1"), ("algo-2,worker", "worker 0")):
        assert re.search(rf"^\[{label}\] {task} at 127\.0\.0\.\d:\d+ \(host {label[:6]}\): the coordinator has "
                         "finished; exiting", out, flags=re.MULTILINE), (label, out[-3000:])
    assert not re.search(r"^\[algo-2,worker\] .*step=", out, flags=re.MULTILINE)  # the coordinator alone trains
    assert _test_accuracy(out) >= TARGET_ACCURACY
    job = tmp_path / "out" / "ps-first"
    with tarfile.open(job / "output" / "model.tar.gz") as archive:
        names = archive.getnames()
    assert "1/saved_model.pb" in names, names
    with tarfile.open(job / "output" / "output.tar.gz") as archive:
        assert json.load(archive.extractfile("metrics.json"))["steps"] == 124  # type: ignore[arg-type]
    assert list_steps(job / "checkpoints") == [62, 124]  # each epoch end
    one_writers_scalars(job / "tensorboard", [31, 62, 93, 124])
    assert not any((tmp_path / "work" / "ps-first" / "algo-2" / "model").iterdir()), "algo-2 wrote a model"

    second = _smddp_local(tmp_path, "--job-name", "ps-second", "--hp", "epochs=3", "--hp", "log-steps=31",
                          "--checkpoint-dir", str(job / "checkpoints"))
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-2000:]
    assert "[algo-1,master] resumed from the checkpoint of step 124" in second.stdout, second.stdout[-3000:]
    resumed = [int(s) for s in re.findall(r"^\[algo-1,master\] epoch=\d+; step=(\d+);", second.stdout,
                                          flags=re.MULTILINE)]
    assert resumed[0] == 155 and resumed[-1] == 186, resumed  # the step count continued; no epoch redone
    assert list_steps(job / "checkpoints") == [62, 124, 186]
    assert _test_accuracy(second.stdout) >= TARGET_ACCURACY


def test_a_killed_worker_ends_the_job_naming_its_host_and_role(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "smddp_compat.commands.cli", "local", "parameter_server_mnist.py", "--source-dir",
         str(ENTRY_POINTS), "--distribution", "parameter_server", "--instance-count", "2", "--output",
         str(tmp_path / "out"), "--job-name", "ps-killed", "--hp", "epochs=20", "task-timeout=30"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 300
    while not any(re.match(r"\[algo-1,master\] epoch=1; step=", line) for line in lines):
        assert process.poll() is None and time.monotonic() < deadline, "".join(lines)[-4000:]
        time.sleep(0.5)
    os.kill(_pid_of_the_worker(), signal.SIGKILL)
    started = time.monotonic()
    code = process.wait(timeout=240)
    reader.join(timeout=10)
    output = "".join(lines)
    assert code != 0, output[-3000:]
    assert time.monotonic() - started < 200
    assert "algo-2,worker" in output.split("local job ps-killed:")[-1], output[-3000:]


def _pid_of_the_worker() -> int:
    """The worker's script process: TF_CONFIG's task is the worker on algo-2 (found through /proc)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"parameter_server_mnist.py" not in cmdline or not any(b"ps-killed" in entry for entry in environ):
            continue  # another job's process
        for entry in environ:
            if entry.startswith(b"TF_CONFIG=") and json.loads(entry[10:])["task"]["type"] == "worker":
                return int(proc.name)
    raise AssertionError("no worker process found")


def _script_job(tmp_path: Path, script: str, job_name: str, *extra: str) -> tuple[str, dict[str, float]]:
    """A 2-host parameter_server job of a script in tests/local_mode/scripts (the servers' start timeout an hour, far
    beyond the tests' limits): its output, once Completed, and the accuracy each host printed."""
    done = subprocess.run(
        [sys.executable, "-m", "smddp_compat.commands.cli", "local", script, "--source-dir", str(SCRIPTS),
         "--distribution", "parameter_server", "--instance-count", "2", "--output", str(tmp_path / "out"),
         "--job-name", job_name, "--env", "SMDDP_PS_START_TIMEOUT_SECONDS=3600", *extra],
        capture_output=True, text=True, timeout=280, cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert f"local job {job_name}: Completed" in out, out[-2000:]
    for label in ("algo-1,ps", "algo-2,ps"):
        assert f"[{label}]" in out, label
    accuracies = {host: float(value) for host, value in
                  re.findall(r"^\[(algo-[12]),(?:master|worker)\] .*accuracy=([0-9.]+);", out, flags=re.MULTILINE)}
    return out, accuracies


@pytest.mark.timeout(300)
def test_a_script_in_the_tutorials_pattern_trains_with_keras_fit_under_the_strategy(tmp_path: Path) -> None:
    """TensorFlow's parameter-server tutorial's start (TFConfigClusterResolver, a branch on the task type) with
    Keras fit, evaluate and predict under ParameterServerStrategy on the coordinator, on tf-keras (its
    DatasetCreator): the servers are used, and end with the coordinator. The same script on Keras 3:
    tests/launcher/test_tensorflow_strategies.py (under smddprun); the entry point on Keras 3 here, above."""
    keras = "tf-keras"
    out, accuracies = _script_job(tmp_path, "ps_strategy_fit.py", "ps-tutorial", "--env", "TF_USE_LEGACY_KERAS=1")
    assert "[algo-1,master] task=master:0" in out and "[algo-2,worker] task=worker:0" in out, out[-3000:]
    assert f"[algo-1,master] keras={keras};" in out, out[-3000:]
    assert list(accuracies) == ["algo-1"] and accuracies["algo-1"] >= 0.8, accuracies
    evaluated = float(re.findall(r"evaluated=([0-9.]+);", out)[-1])
    assert evaluated >= 0.8, out[-3000:]  # evaluate's steps ran on the workers, its metrics read on the servers
    for task in ("ps 0", "ps 1", "worker 0"):
        assert re.search(rf"\] {task} at .*: the coordinator has finished; exiting$", out, flags=re.MULTILINE), task
