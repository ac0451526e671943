"""A local job is an MLflow run (``--mlflow``, ``JobSpec.mlflow``), read back from a real ``mlflow server`` on
loopback with ``MlflowClient``: its hyperparameters, the exact metric series the job printed, its status (a failed
and a stopped job too), ``describe()``'s ``MlflowDetails``; a script logging to the same run; credentials never kept;
an unreachable server is one line before anything starts; a server gone when the job ends loses nothing (the end
is kept, then sent by ``smddp mlflow-send``). A tuning job as a run with a child run per trial: the SDK doors'
tuner tests (tests/estimators/test_local_tuning.py, sdk3/test_local_tuning.py), ``smddp tune``'s in both backends
(tests/docker/test_one_command.py's tuning-trial case) and docs/mlflow.md's block."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode import JobSpec, run
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.tracking import PENDING_FILE, MlflowSettings
from tests.mlflow_server import MlflowServer

pytestmark = pytest.mark.processes

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra (setup.sh installs it)")

# Prints its loss per epoch on every host (the job's metric definition reads them); algo-1 also logs a metric of
# its own to the job's run through mlflow; waits for GO (a file) when set; exits with EXIT.
SCRIPT = """\
import os, pathlib, sys, time
import mlflow
for epoch in range(3):
    print(f"epoch={epoch} loss={1.0 / (epoch + 1):.4f}", flush=True)
    time.sleep(0.05)
if os.environ["SM_CURRENT_HOST"] == "algo-1":
    mlflow.log_metric("from_script", 7.5)
go = os.environ.get("GO")
if go:
    print("waiting for GO", flush=True)
    deadline = time.monotonic() + 120
    while not pathlib.Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
sys.exit(int(os.environ.get("EXIT", "0")))
"""
LOSS = [{"Name": "loss", "Regex": r"loss=([0-9.]+)"}]


@pytest.fixture
def server(mlflow_server: MlflowServer) -> MlflowServer:
    """The session's server (tests/conftest.py)."""
    return mlflow_server


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "code"
    source.mkdir(exist_ok=True)
    (source / "train.py").write_text(SCRIPT)
    return source


def _job(tmp_path: Path, name: str, settings: MlflowSettings, **options: Any) -> tuple[Any, str]:
    spec = JobSpec("train.py", source_dir=str(_source(tmp_path)), instance_count=2, output_path=str(tmp_path / "out"),
                   job_name=name, hyperparameters={"epochs": 3, "note": "a b"}, metric_definitions=LOSS,
                   mlflow=settings, **{"max_run": 120, **options})
    stream = io.StringIO()
    result = run(spec, stream=stream)
    return result, stream.getvalue()


def test_a_job_is_a_run_with_its_hyperparameters_metric_series_status_and_the_scripts_own_metric(
    server: MlflowServer, tmp_path: Path
) -> None:
    secret_uri = server.uri.replace("http://", "http://someone:s3cret-word@")
    result, printed = _job(tmp_path, "tracked-job", MlflowSettings(secret_uri, experiment_name="local-jobs"))
    assert result.ok, printed
    described = result.describe()
    assert described["MlflowConfig"] == {"MlflowResourceArn": server.uri, "MlflowExperimentName": "local-jobs"}
    details = described["MlflowDetails"]
    client = mlflow.MlflowClient(server.uri)
    tracked = client.get_run(details["MlflowRunId"])
    assert tracked.info.experiment_id == details["MlflowExperimentId"]
    assert client.get_experiment(details["MlflowExperimentId"]).name == "local-jobs"
    assert (tracked.info.run_name, tracked.info.status) == ("tracked-job", "FINISHED")
    assert tracked.data.params == {"epochs": "3", "note": "a b"}  # no toolkit parameter
    tags = tracked.data.tags
    assert {k: tags[k] for k in ("sagemaker.training_job_name", "sagemaker.distribution", "sagemaker.instance_count",
                                 "sagemaker.status")} == {"sagemaker.training_job_name": "tracked-job",
                                                          "sagemaker.distribution": "none",
                                                          "sagemaker.instance_count": "2",
                                                          "sagemaker.status": "Completed"}
    assert tags["sagemaker.model_artifacts"] == result.artifacts.model
    # The exact series the job printed (both hosts' lines), each point at the time it was printed, in order.
    history = sorted(client.get_metric_history(tracked.info.run_id, "loss"), key=lambda m: m.step)
    printed_series = [(int(when.timestamp() * 1000), value) for when, name, value in result.metric_series
                      if name == "loss"]
    assert [(m.timestamp, m.value) for m in history] == printed_series and len(history) == 6
    assert [m.step for m in history] == list(range(6))
    assert tracked.data.metrics["from_script"] == 7.5  # the script's own mlflow call, to the same run
    # The credentials were used, never kept: not in the answer, the output or the job's files.
    assert "s3cret-word" not in json.dumps(described, default=str) + printed
    for path in (tmp_path / "out").rglob("*"):
        assert not path.is_file() or b"s3cret-word" not in path.read_bytes(), path


def _job_in_thread(tmp_path: Path, name: str, settings: MlflowSettings, go: Path,
                   control: JobControl | None = None) -> tuple[threading.Thread, io.StringIO, dict[str, Any]]:
    """The job (its script waits for ``go`` once it printed its losses) run in a thread; its output, its result."""
    spec = JobSpec("train.py", source_dir=str(_source(tmp_path)), instance_count=2, output_path=str(tmp_path / "out"),
                   job_name=name, metric_definitions=LOSS, environment={"GO": str(go)}, max_run=120, mlflow=settings)
    stream, outcome = io.StringIO(), {}
    job = threading.Thread(target=lambda: outcome.update(result=run(spec, stream=stream, control=control)))
    job.start()
    deadline = time.monotonic() + 120
    while stream.getvalue().count("waiting for GO") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    return job, stream, outcome


def test_a_failed_and_a_stopped_job_end_their_runs_so(server: MlflowServer, tmp_path: Path) -> None:
    failed, printed = _job(tmp_path, "tracked-failed", MlflowSettings(server.uri), environment={"EXIT": "3"})
    assert failed.status == "Failed", printed
    control = JobControl()
    job, stream, outcome = _job_in_thread(tmp_path, "tracked-stopped", MlflowSettings(server.uri),
                                          tmp_path / "never", control)
    control.stop()  # SageMaker's StopTrainingJob, once both hosts printed their losses
    job.join(timeout=180)
    stopped = outcome["result"]
    assert stopped.status == "Stopped", stream.getvalue()[-3000:]
    client = mlflow.MlflowClient(server.uri)
    for result, run_status in ((failed, "FAILED"), (stopped, "KILLED")):
        tracked = client.get_run(result.describe()["MlflowDetails"]["MlflowRunId"])
        assert tracked.info.status == run_status and tracked.info.end_time is not None
        assert tracked.data.metrics["loss"] == pytest.approx(1 / 3, abs=1e-4)  # what it printed before it ended


def _smddp(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_an_unreachable_server_is_one_line_before_anything_starts_unless_the_job_may_run_untracked(
    tmp_path: Path
) -> None:
    closed = MlflowServer(tmp_path / "never-started")  # a port nobody listens on
    closed.port = 1
    _source(tmp_path)
    job = ["local", "code/train.py", "--instance-count", "2", "--output", "out", "--mlflow", closed.uri]
    started = time.monotonic()
    refused = _smddp(*job, "--job-name", "refused", cwd=tmp_path)
    assert refused.returncode == 1 and time.monotonic() - started < 60, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"smddp local: error: mlflow tracking URI='{closed.uri}': could not be used: ") and \
        "Fix: start the tracking server" in line, line
    assert not (tmp_path / "out" / "refused").exists()

    untracked = _smddp(*job, "--job-name", "untracked", "--mlflow-optional", cwd=tmp_path)
    assert untracked.returncode == 0, untracked.stderr
    assert f"not tracked in MLflow: {closed.uri} could not be reached" in untracked.stdout


def test_a_server_gone_when_the_job_ends_loses_nothing_and_mlflow_send_delivers_it(tmp_path: Path) -> None:
    server = MlflowServer(tmp_path / "server").start()
    go = tmp_path / "go"
    job, stream, outcome = _job_in_thread(tmp_path, "outage", MlflowSettings(server.uri), go)
    try:
        server.stop()  # the server goes away while the job trains ...
        go.touch()  # ... and is still away when it ends
        job.join(timeout=180)
        result = outcome["result"]
        assert result.ok, stream.getvalue()  # the training is not failed by the tracking
        pending = tmp_path / "out" / "outage" / PENDING_FILE
        assert f"smddp mlflow-send {pending}" in stream.getvalue(), stream.getvalue()[-3000:]
        assert len(json.loads(pending.read_text())["metrics"]) == 6

        server.start()  # back, on the same store
        sent = _smddp("mlflow-send", str(pending), cwd=tmp_path)
        assert sent.returncode == 0, sent.stderr
        assert not pending.exists()
        client = mlflow.MlflowClient(server.uri)
        tracked = client.get_run(result.describe()["MlflowDetails"]["MlflowRunId"])
        assert tracked.info.status == "FINISHED"
        assert sorted(m.value for m in client.get_metric_history(tracked.info.run_id, "loss")) == sorted(
            [1.0, 0.5, 0.3333] * 2)
    finally:
        go.touch()
        job.join(timeout=180)
        server.stop()
