"""The guarantees the one job lifecycle (``local_mode/lifecycle.py``) makes, each run against both backends: the
process backend and the SageMaker twin (a script's job replayed from the request the kit's estimator sends)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from smddp_compat.local_mode import JobResult, JobSpec
from smddp_compat.local_mode.backends import ProcessBackend

pytestmark = pytest.mark.docker
BACKENDS = ["process", "docker"]

_TIDY_AND_FAIL = """
import os, pathlib, sys
data = pathlib.Path(os.environ["SM_CHANNEL_TRAIN"])
for item in data.iterdir():  # a script that tidies its input
    item.unlink()
(data / "rows.csv").write_text("rewritten by the job\\n")
pathlib.Path(os.environ["SM_MODEL_DIR"], "weights.txt").write_text("trained\\n")
print("model written", flush=True)
sys.exit(3)
"""

_WAIT_FOR_A_STOP = """
import os, pathlib, time
pathlib.Path(os.environ["SM_MODEL_DIR"], "weights.txt").write_text("trained until stopped\\n")
print("ready to be stopped", flush=True)
time.sleep(600)
"""


def _run(backend: str, spec: JobSpec, request: pytest.FixtureRequest) -> JobResult:
    if backend == "process":
        return ProcessBackend(stream=io.StringIO()).run(spec)
    request.getfixturevalue("kit_image")
    request.getfixturevalue("no_leftovers")
    from smddp_compat.estimators.replay import replay_spec

    return replay_spec(spec, stream=io.StringIO(), stop_grace=5, short_toolkit_waits=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_job_keeps_its_model_and_never_touches_the_users_data(backend: str, tmp_path: Path,
                                                                      request: pytest.FixtureRequest) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("the user's rows\n")
    (data / "keep.txt").write_text("the user's file\n")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(_TIDY_AND_FAIL)
    spec = JobSpec("train.py", source_dir=str(source), channels={"train": str(data)},
                   output_path=str(tmp_path / "out"), job_name=f"guarantee-{backend}", max_run=600)

    result = _run(backend, spec, request)

    assert (data / "rows.csv").read_text() == "the user's rows\n"  # channels are the job's own copies
    assert (data / "keep.txt").read_text() == "the user's file\n"
    # The process backend returns the script's own code; in the twin the training toolkit ends the container with 1.
    assert (result.status, result.secondary_status, result.exit_code) == ("Failed", "Failed",
                                                                          3 if backend == "process" else 1)
    with tarfile.open(result.model_artifacts) as archive:  # stored whatever the end
        assert archive.extractfile("weights.txt").read() == b"trained\n"  # type: ignore[union-attr]
    answer = result.describe()
    assert answer["TrainingJobStatus"] == "Failed" and "ExitCode 3" in answer["FailureReason"]
    assert [t["Status"] for t in answer["SecondaryStatusTransitions"]] == [
        "Starting", "Downloading", "Training", "Uploading", "Failed"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sigterm_stops_the_job_as_a_stop_and_leaves_nothing_running(backend: str, tmp_path: Path,
                                                                      request: pytest.FixtureRequest) -> None:
    """SIGTERM to ``smddp local`` is StopTrainingJob: the job ends ``Stopped`` (143) with the model it wrote, and
    nothing of it is left running. A tuning job's early stopping stops a trial through the same stop (its
    ``JobControl.stop`` sets the event this signal sets), so a tuning job in the twin has no test of its own: the rule
    is proven on processes (``tests/local_mode/test_tune_command.py``), a trial in the twin by
    ``tests/docker/test_one_command.py``."""
    script = tmp_path / "train.py"
    script.write_text(_WAIT_FOR_A_STOP)
    argv = [sys.executable, "-m", "smddp_compat.commands.cli", "local", str(script), "--output", str(tmp_path / "out"),
            "--job-name", f"stop-{backend}", "--max-run", "900"]
    if backend == "docker":
        request.getfixturevalue("kit_image")
        request.getfixturevalue("no_leftovers")
        argv += ["--backend", "docker", "--stop-grace", "5", "--short-toolkit-waits"]
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"})
    assert job.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 600
    for line in job.stdout:
        seen.append(line)
        if "ready to be stopped" in line or time.monotonic() > deadline:
            break
    assert any("ready to be stopped" in line for line in seen), "".join(seen[-40:])
    job.send_signal(signal.SIGTERM)
    rest, _ = job.communicate(timeout=180)
    output = "".join(seen) + rest
    assert job.returncode == 128 + signal.SIGTERM, output[-4000:]
    assert "Stopped" in output, output[-4000:]
    # StopTrainingJob keeps what the job wrote: its model (also a tuning trial's, stopped early by the same stop)
    with tarfile.open(tmp_path / "out" / f"stop-{backend}" / "output" / "model.tar.gz") as model:
        assert model.extractfile("weights.txt").read() == b"trained until stopped\n"  # type: ignore[union-attr]
    assert not list(Path(tempfile.gettempdir()).glob(f"smddp-*-stop-{backend}-*")), "a temporary tree was left"
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(script) in " ".join(p.info["cmdline"] or [])]
    assert not left, f"still running after the stop: {left}"
