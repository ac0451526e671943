"""Faults injected into the SageMaker twin and the process backend, for real: a request value shaped as docker
syntax, a request environment meant to steer this machine's docker client, SIGTERM and SIGKILL of the twin while its
containers run, checkpoints rotated while they are synced, a full disk when the artifacts are stored, two jobs of one
name at once, an unreachable S3 output. Each asserts: nothing left running, nothing written outside the job, the
trained model still on disk, a clear message, a bounded time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.image.commands import capture
from smddp_compat.local_mode.docker._containers import TWIN_LABEL, Mount, TwinEngine
from tests.docker.conftest import (  # noqa: F401 - fixtures
    _leftover_suspects, docker_engine, kit_image, no_leftovers)
from tests.fake_aws import moto_url  # noqa: F401 - fixture
from tests.reliability.conftest import quiet_env, smddp

pytestmark = pytest.mark.timeout(300)


def _twin_entries(docker: str, job: str = "", running: bool = False) -> set[str]:
    """The twin's containers (only the running ones with ``running``) and networks, those of the jobs whose id starts
    with ``job`` (lower case): a twin job of another pytest-xdist worker may be running beside this test's."""
    found: set[str] = set()
    for what in ([["ps"]] if running else [["ps", "--all"], ["network", "ls"]]):
        code, output = capture([docker, *what, "--filter", f"label={TWIN_LABEL}",
                                "--format", f'{{{{.ID}}}} {{{{.Label "{TWIN_LABEL}"}}}}'], timeout=60)
        assert code == 0, output
        for line in output.splitlines():
            entry, _, job_id = line.partition(" ")
            if entry and job_id.startswith(job.lower()):
                found.add(f"{what[0]}:{entry}")
    return found


# -- request values never become docker syntax -----------------------------------------------------------------------


def test_a_mount_path_with_a_comma_stays_one_path_and_the_request_environment_stays_in_the_container(
    docker_engine: Any, kit_image: str, tmp_path: Path, no_leftovers: None  # noqa: F811
) -> None:
    """Docker takes the last ``source=`` of a mount spec: a target path carrying ``,source=/`` would mount this
    machine's root read-write. Quoted, it is one odd path; and the request's DOCKER_HOST / LD_PRELOAD reach the
    container only, not the docker client that starts it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "marker").write_text("the job's own folder")
    engine = TwinEngine(docker_engine, f"fault-{uuid.uuid4().hex[:6]}")
    engine.create_network()
    try:
        odd_target = "/opt/ml/ck,source=/,readonly=false"
        probe = f"cat '{odd_target}/marker'; echo; ls '{odd_target}' | wc -l; echo \"$DOCKER_HOST|$LD_PRELOAD|$ODD\""
        engine.start(
            "algo-1", kit_image, ["-c", probe], entrypoint="/bin/sh", mounts=[Mount(shared, odd_target)],
            environment={"DOCKER_HOST": "tcp://127.0.0.1:9", "LD_PRELOAD": "/nonexistent/steer.so",
                         "ODD": "a b=c 'q' \"d\" $HOME ;"},
        )
        deadline = time.monotonic() + 60
        while engine.states(["algo-1"])["algo-1"].running:
            assert time.monotonic() < deadline, "the probe container did not end"
            time.sleep(0.2)
        code, printed = capture([docker_engine.docker, "logs", engine.container_name("algo-1")], timeout=60)
    finally:
        engine.remove_job()
    lines = [line for line in printed.splitlines() if not line.startswith("ERROR: ld.so")]  # the container's LD_PRELOAD
    assert lines[0] == "the job's own folder", printed
    assert lines[1].strip() == "1", f"the mount shows more than the job's folder (this machine's root?): {printed}"
    assert lines[2] == "tcp://127.0.0.1:9|/nonexistent/steer.so|a b=c 'q' \"d\" $HOME ;", printed


# -- the twin is stopped or killed ---------------------------------------------------------------------------------


def _sleeping_request(tmp_path: Path, image: str, name: str) -> Path:
    """A 2-host request whose containers only sleep (ContainerEntrypoint: no S3, no toolkit)."""
    request = {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["sleep", "600"]},
        "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 1},
        "OutputDataConfig": {"S3OutputPath": "s3://twin-faults/jobs"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 900},
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return path


def _start_twin(tmp_path: Path, image: str, docker: str) -> tuple[subprocess.Popen[str], str]:
    """Starts ``smddp local --backend docker`` on a sleeping request, with ``tmp_path/tmp`` as its TMPDIR; returns
    once both hosts' containers and the S3 service run, with the job's name (the start of its twin job id)."""
    (tmp_path / "tmp").mkdir()
    name = f"faults-{uuid.uuid4().hex[:6]}"
    request = _sleeping_request(tmp_path, image, name)
    proc = subprocess.Popen(
        smddp("local", "--backend", "docker", "--request", str(request), "--output", str(tmp_path / "out"),
              "--stop-grace", "3"),
        env=quiet_env(TMPDIR=str(tmp_path / "tmp")), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while True:
        if len(_twin_entries(docker, name, running=True)) >= 3:  # the S3 service and 2 hosts, running
            break
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the twin's containers did not start within 120 s"
        time.sleep(0.3)
    return proc, name


def test_sigterm_to_the_twin_stops_the_job_and_removes_everything(
    docker_engine: Any, kit_image: str, tmp_path: Path  # noqa: F811
) -> None:
    proc, name = _start_twin(tmp_path, kit_image, docker_engine.docker)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 143, stderr[-3000:]
    assert json.loads(stdout)["TrainingJobStatus"] == "Stopped"
    assert "Traceback" not in stderr, stderr[-3000:]
    assert took < 3 + 20, f"the twin took {took:.1f} s to stop with a 3 s grace"
    assert not _twin_entries(docker_engine.docker, name), "the stopped twin left containers or a network"


def test_sigkill_of_the_twin_leaves_nothing_running(docker_engine: Any, kit_image: str, tmp_path: Path) -> None:  # noqa: F811
    """Killed outright, the twin cannot clean up: its reaper removes the containers, the network and the job's
    temporary tree (the hosts' folders with their hyperparameters, the channels)."""
    proc, name = _start_twin(tmp_path, kit_image, docker_engine.docker)
    assert list((tmp_path / "tmp").glob("smddp-twin-*")), "the twin's tree is not where the test looks"
    os.killpg(proc.pid, signal.SIGKILL)  # the twin and its whole process group (the reaper has its own session)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while _twin_entries(docker_engine.docker, name) or list((tmp_path / "tmp").glob("smddp-twin-*")):
        assert time.monotonic() < deadline, (
            f"left after the twin was killed: {_twin_entries(docker_engine.docker, name)}, "
            f"{list((tmp_path / 'tmp').glob('smddp-twin-*'))}")
        time.sleep(0.5)


# -- checkpoints rotated while they are synced ----------------------------------------------------------------------


def test_a_checkpoint_that_vanishes_during_the_sync_is_not_an_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A script keeping its last checkpoints deletes the oldest while the twin copies the folder: the sync skips what
    has gone, copies the rest, and never reads through a link or blocks on a FIFO planted there."""
    from smddp_compat.local_mode.folder_sync import FolderSync, FolderTarget
    from smddp_compat.local_mode.layout import HostLayout, create_host_tree

    layout: HostLayout = create_host_tree(tmp_path / "hosts" / "algo-1", "algo-1", encoded_hyperparameters={},
                                          resource={}, data_config={})
    folder = layout.checkpoints_dir
    for step in range(1, 6):
        (folder / f"ckpt-{step}.index").write_text(f"step {step}")
    secret = tmp_path / "secret"
    secret.write_text("aws_secret_access_key = never-uploaded")
    (folder / "planted").symlink_to(secret)
    os.mkfifo(folder / "fifo")
    target = tmp_path / "synced"
    uploaded: list[str] = []

    class RotatingCopy:
        """The sync's copy of each file, during which the script deletes the next-oldest checkpoint."""

        def __call__(self, handle: Any, destination: Path) -> None:
            uploaded.append(destination.name)
            for candidate in sorted(folder.glob("ckpt-*")):
                if candidate.name != destination.name:
                    candidate.unlink()
                    break
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(handle.read())

    sync = FolderSync(FolderTarget(target), what="checkpoints", mirror_deletions=True)  # the twin's sync alone
    monkeypatch.setattr("smddp_compat.local_mode.folder_sync.copy_atomically", RotatingCopy())
    started = time.monotonic()
    sync.sync([layout.checkpoints_dir])
    assert time.monotonic() - started < 5
    assert uploaded and all(name.startswith("ckpt-") for name in uploaded), uploaded
    assert "never-uploaded" not in "".join(p.read_text() for p in target.rglob("*") if p.is_file())


# -- the process backend: a full disk, one name at a time, an unreachable S3 output ---------------------------------

_WRITE_MODEL = """
import os, sys, time
model = os.environ["SM_MODEL_DIR"]
with open(os.path.join(model, "weights.bin"), "wb") as f:
    f.write(os.urandom({size}))
time.sleep({sleep})
print("trained", flush=True)
"""


def _script(tmp_path: Path, size: int = 1000, sleep: float = 0.0) -> Path:
    path = tmp_path / "train.py"
    path.write_text(_WRITE_MODEL.format(size=size, sleep=sleep))
    return path


def _small_filesystem(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@pytest.mark.processes
def test_a_full_disk_when_storing_keeps_the_trained_model_and_says_where(tmp_path: Path) -> None:
    output = tmp_path / "small"
    if not _small_filesystem(output, "256k"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        done = subprocess.run(
            smddp("local", str(_script(tmp_path, size=2_000_000)), "--output", str(output), "--job-name", "full"),
            env=quiet_env(), capture_output=True, text=True, timeout=120,
        )
    finally:
        subprocess.run(["umount", str(output)], check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "could not be stored" in done.stderr and "Nothing was deleted" in done.stderr, done.stderr
    kept = done.stderr.split("kept under ", 1)[1].split()[0].rstrip(".")
    weights = Path(kept) / "algo-1" / "model" / "weights.bin"
    assert weights.is_file() and weights.stat().st_size == 2_000_000, f"the trained model is gone from {kept}"
    assert "Traceback" not in done.stderr


@pytest.mark.processes
def test_a_refused_s3_upload_keeps_the_trained_model_and_says_where(tmp_path: Path, moto_url: str) -> None:  # noqa: F811
    """The output bucket is gone when the job ends (deleted by the script itself, as an admin or a lifecycle rule
    might): the upload is refused, the model stays on disk and the message says where."""
    import boto3

    env = _moto_env(moto_url)
    boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x",
                 aws_secret_access_key="x").create_bucket(Bucket="vanishing-output")
    script = _script(tmp_path, size=5000)
    script.write_text(script.read_text() + (
        "import boto3\n"
        "boto3.client('s3', region_name='us-east-1').delete_bucket(Bucket='vanishing-output')\n"))
    done = subprocess.run(smddp("local", str(script), "--output", "s3://vanishing-output/jobs", "--job-name", "gone"),
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "could not be stored" in done.stderr and "NoSuchBucket" in done.stderr, done.stderr
    kept = done.stderr.split("kept under ", 1)[1].split()[0].rstrip(".")
    assert (Path(kept) / "algo-1" / "model" / "weights.bin").stat().st_size == 5000
    assert "Traceback" not in done.stderr


def _moto_env(moto_url: str) -> dict[str, str]:
    return quiet_env(AWS_ENDPOINT_URL=moto_url, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x",
                     AWS_DEFAULT_REGION="us-east-1")


@pytest.mark.processes
@pytest.mark.parametrize("where", ["folder", "s3"])
def test_two_jobs_of_one_name_at_once_the_second_is_refused(tmp_path: Path, moto_url: str, where: str) -> None:  # noqa: F811
    env = _moto_env(moto_url)
    output = str(tmp_path / "out")
    if where == "s3":
        import boto3

        boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x",
                     aws_secret_access_key="x").create_bucket(Bucket="twice-bucket")
        output = f"s3://twice-bucket/{uuid.uuid4().hex[:8]}"
    argv = smddp("local", str(_script(tmp_path, sleep=6)), "--output", output, "--job-name", "twice")
    first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None
        announced = first.stdout.readline()  # "[local_mode] job twice: ...": it runs now
        assert "job twice" in announced, announced + first.communicate()[1]
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "is in use" in second.stderr and str(first.pid) in second.stderr, second.stderr
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err


@pytest.mark.processes
def test_an_unreachable_s3_output_is_refused_before_the_job_starts(tmp_path: Path, moto_url: str) -> None:  # noqa: F811
    env = _moto_env(moto_url)
    marker = tmp_path / "started"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run(smddp("local", str(script), "--output", "s3://no-such-bucket-here/jobs"), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "s3://no-such-bucket-here/jobs" in done.stderr and "cannot be reached" in done.stderr, done.stderr
    assert not marker.exists(), "the job started before its output was checked"

