"""Real jobs in real containers (skipped when no Docker daemon answers): 2-host smddp and dtensor jobs with their
artifacts and logs, failure propagation, Ctrl-C, a user's image with the kit mounted in, and cleanup."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from tests.docker.docker_job_helpers import ENTRY_POINTS, LOCAL_MODE_SCRIPTS, ROOT, SCRIPTS, job_containers, run_in_docker

from local_mode import JobSpec
from local_mode.docker import DockerBackend, Engine, ImageNotFoundError
from local_mode.docker._commands import capture

pytestmark = pytest.mark.timeout(1800)  # the first test may build the image (~6 minutes on 2 cores)


def _tar_names(path: str) -> list[str]:
    with tarfile.open(path) as archive:
        return sorted(archive.getnames())


def _tar_json(path: str, name: str) -> dict:
    with tarfile.open(path) as archive:
        handle = archive.extractfile(name)
        assert handle is not None
        return json.load(handle)


def test_two_host_smddp_training_in_containers(tmp_path: Path, docker_backend: DockerBackend, no_leftovers: None) -> None:
    spec = JobSpec(
        entry_point="smddp_mnist.py",
        source_dir=str(ENTRY_POINTS),
        instance_count=2,
        distribution="smddp",
        hyperparameters={"epochs": 1, "max-steps": 12, "log-steps": 4, "batch-size": 32, "weights-digest": True},
        output_path=str(tmp_path / "out"),
        job_name="docker-smddp-mnist",
        max_run=600,
    )
    result, output = run_in_docker(spec, docker_backend)
    assert result.ok, output
    # Both ranks trained and printed prefixed metrics; every line of the logs came from inside the containers.
    assert re.search(r"^\[algo-1,0\] .*loss=", output, re.M) and re.search(r"^\[algo-2,1\] ", output, re.M)
    for host in ("algo-1", "algo-2"):
        log = Path(result.artifacts.logs[host]).read_text()
        assert log and not log.startswith("[")
    # rank 0's model (written in algo-1's container at /opt/ml/model) reached model.tar.gz on this machine.
    assert result.artifacts.model is not None
    names = _tar_names(result.artifacts.model)
    assert names, "model.tar.gz is empty"
    # Both ranks ended with the same weights (allreduce across containers over loopback).
    digests = {}
    with tarfile.open(result.artifacts.output) as archive:
        for member in archive.getmembers():
            if re.search(r"weights-rank\d+\.sha256$", member.name):
                handle = archive.extractfile(member)
                assert handle is not None
                digests[member.name] = handle.read().decode().split()[0]
    assert len(digests) == 2 and len(set(digests.values())) == 1, digests
    container_run = docker_backend.last
    assert container_run is not None and container_run.image == docker_backend.image.tag


def test_two_host_dtensor_job_in_containers(tmp_path: Path, docker_backend: DockerBackend, no_leftovers: None) -> None:
    spec = JobSpec(
        entry_point="dtensor_sum.py",
        source_dir=str(SCRIPTS),
        instance_count=2,
        distribution="dtensor",
        output_path=str(tmp_path / "out"),
        job_name="docker-dtensor",
        max_run=300,
    )
    result, output = run_in_docker(spec, docker_backend)
    assert result.ok, output
    records = [_tar_json(result.artifacts.output, "dtensor-0.json"), _tar_json(result.artifacts.output, "algo-2/dtensor-1.json")]
    for client, record in enumerate(records):
        assert record["client"] == client and record["clients"] == 2
        assert record["devices"] == 4 and record["local_devices"] == 2
        assert record["sum"] == 12.0  # 2 x (0 + 1 + 2 + 3): every client's shards took part
        assert [job.split(":")[0] for job in record["jobs"].split(",")] == ["127.0.0.2", "127.0.0.3"]
    assert _tar_names(result.artifacts.model) == ["sum.txt"]
    assert "[algo-1,0] dtensor" in output and "[algo-2,1] dtensor" in output


def test_the_contract_inside_the_container(tmp_path: Path, docker_backend: DockerBackend, no_leftovers: None) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,2\n")
    spec = JobSpec(
        entry_point="dump_env.py",
        source_dir=str(LOCAL_MODE_SCRIPTS),
        instance_count=2,
        distribution="mpi",
        hyperparameters={"epochs": 2, "write-model": 1},
        channels={"train": str(data)},
        environment={"MY_SETTING": "on"},
        output_path=str(tmp_path / "out"),
        job_name="docker-contract",
        max_run=120,
    )
    result, output = run_in_docker(spec, docker_backend)
    assert result.ok, output
    record = _tar_json(result.artifacts.output, "algo-2/env-1.json")
    env = record["env"]
    assert record["cwd"] == "/opt/ml/code" and env["SAGEMAKER_BASE_DIR"] == "/opt/ml"
    assert env["SM_MODEL_DIR"] == "/opt/ml/model" and env["SM_CHANNEL_TRAIN"] == "/opt/ml/input/data/train"
    assert json.loads(env["SM_TRAINING_ENV"])["output_data_dir"] == "/opt/ml/output/data"
    assert record["channels"] == {"train": ["train.csv"]}  # the channel link resolves in the container
    assert env["SM_CURRENT_HOST"] == "algo-2" and env["HOROVOD_RANK"] == "1" and env["MY_SETTING"] == "on"
    assert env["PATH"].startswith("/opt/smddp-compat/.venv/bin")  # the image's environment, not this machine's
    assert os.environ.get("VIRTUAL_ENV", "-") != env.get("VIRTUAL_ENV")
    assert record["argv"] == ["--epochs", "2", "--write-model", "1"]
    assert _tar_names(result.artifacts.model) == ["model-0.txt"]


def test_a_failure_stops_every_container_within_ten_seconds(
    tmp_path: Path, docker_backend: DockerBackend, docker_engine: Engine, no_leftovers: None
) -> None:
    delay = 3.0
    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(LOCAL_MODE_SCRIPTS),
        instance_count=2,
        hyperparameters={"fail-index": 1, "delay": delay, "sleep": 120, "spawn-child": 1},
        output_path=str(tmp_path / "out"),
        job_name="docker-failure",
        max_run=300,
    )
    start = time.monotonic()
    result, output = run_in_docker(spec, docker_backend)
    elapsed = time.monotonic() - start
    assert result.status == "Failed" and result.exit_code == 3, output
    assert result.failed_label == "algo-2,1"
    assert "ValueError: the loss became NaN at step 7" in (result.failure_reason or "")
    assert "algo-2" in (result.failure_reason or "")
    last = docker_backend.last
    assert last is not None
    # From the failure (start-up + delay) to the last container removed: at most 10 s.
    assert elapsed - last.startup_seconds - delay < 10.0, (elapsed, last.startup_seconds, last.teardown_seconds)
    assert "process 1 failing" in output and "process 0 done" not in output
    stopped = {p.label: p.returncode for p in result.processes}
    assert stopped["algo-1,0"] not in (0, None), stopped  # stopped, not reported as a success
    assert job_containers(docker_engine) == []


def test_max_run_sends_sigterm_to_the_processes_in_the_containers(
    tmp_path: Path, docker_backend: DockerBackend, no_leftovers: None
) -> None:
    spec = JobSpec(
        entry_point="sigterm_aware.py",
        source_dir=str(SCRIPTS),
        instance_count=2,
        hyperparameters={"sleep": 120},
        output_path=str(tmp_path / "out"),
        job_name="docker-max-run",
        max_run=6,
    )
    result, output = run_in_docker(spec, docker_backend)
    assert result.status == "Stopped" and "MaxRuntimeExceeded" in (result.failure_reason or ""), output
    # Each process got SIGTERM in its container, and what it printed while saving still reached the output and logs.
    for host in ("algo-1", "algo-2"):
        assert f"{host} got SIGTERM, saving" in output and f"{host} saved, exiting" in output, output
        assert f"{host} saved, exiting" in Path(result.artifacts.logs[host]).read_text()
        assert f"{host} slept to the end" not in output
    assert result.artifacts.model is not None
    assert _tar_names(result.artifacts.model) == ["stopped-algo-1.txt"]


def test_ctrl_c_stops_the_job_and_removes_its_containers(
    tmp_path: Path, docker_backend: DockerBackend, docker_engine: Engine, no_leftovers: None
) -> None:
    driver = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("interrupt_driver.py")), str(LOCAL_MODE_SCRIPTS), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)},
        text=True,
    )
    seen = []
    try:
        assert driver.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = driver.stdout.readline()
            if not line:
                break
            seen.append(line)
            if sum("started" in text for text in seen) == 2:
                break
        assert sum("started" in text for text in seen) == 2, "".join(seen)
        assert len(job_containers(docker_engine)) == 2
        interrupted = time.monotonic()
        driver.send_signal(signal.SIGINT)
        rest, _ = driver.communicate(timeout=30)
        stopped_in = time.monotonic() - interrupted
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=10)
    assert driver.returncode == 128 + signal.SIGINT, "".join(seen) + rest
    assert "interrupted by SIGINT" in rest
    assert stopped_in < 15.0
    assert job_containers(docker_engine) == []


def test_a_users_image_runs_with_the_kit_mounted_in(
    tmp_path: Path, docker_backend: DockerBackend, docker_engine: Engine, no_leftovers: None
) -> None:
    user_image = "smddp-test-user-image:1"
    code, output = capture([docker_engine.docker, "tag", docker_backend.image.tag, user_image], timeout=60)
    assert code == 0, output
    try:
        backend = DockerBackend(image=user_image, engine=docker_engine, job_name="user-image")
        assert backend.image.kit_installed is False
        spec = JobSpec(
            entry_point="dump_env.py",
            source_dir=str(LOCAL_MODE_SCRIPTS),
            instance_count=1,
            processes_per_host=2,
            distribution="smddp",
            output_path=str(tmp_path / "out"),
            job_name="docker-user-image",
            max_run=120,
        )
        result, output = run_in_docker(spec, backend)
        assert result.ok, output
        record = _tar_json(result.artifacts.output, "env-1.json")
        assert "/opt/smddp-kit" in record["env"]["PYTHONPATH"].split(":")
        assert record["smdistributed"] and record["smdistributed"][0].startswith("/opt/smddp-kit/")
    finally:
        capture([docker_engine.docker, "rmi", user_image], timeout=60)


def test_an_image_that_is_not_there_is_refused_before_anything_starts(docker_engine: Engine) -> None:
    with pytest.raises(ImageNotFoundError) as caught:
        DockerBackend(image="smddp-no-such-image:0", engine=docker_engine)
    assert "smddp-no-such-image:0" in str(caught.value) and "docker load" in str(caught.value)


def test_kill_9_of_a_rank_in_its_container_ends_the_job_within_ten_seconds(
    tmp_path: Path, docker_backend: DockerBackend, docker_engine: Engine, no_leftovers: None
) -> None:
    import threading

    spec = JobSpec(
        entry_point="fail_or_sleep.py",
        source_dir=str(LOCAL_MODE_SCRIPTS),
        instance_count=2,
        hyperparameters={"sleep": 120},
        output_path=str(tmp_path / "out"),
        job_name="docker-kill-9",
        max_run=300,
    )
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(zip(("result", "output"), run_in_docker(spec, docker_backend))))
    job.start()
    try:
        # The rank's process as this machine sees it (docker top lists host pids): kill -9, as a crash would.
        deadline = time.monotonic() + 120
        victim = None
        while victim is None and time.monotonic() < deadline:
            code, names = capture(
                [docker_engine.docker, "ps", "--quiet", "--filter", "label=org.smddp-compat.job", "--filter",
                 "name=-algo-2"], timeout=30,
            )  # fmt: skip
            for container in names.split():
                _, top = capture([docker_engine.docker, "top", container, "-eo", "pid,args"], timeout=30)
                for line in top.splitlines()[1:]:
                    pid, _, args = line.strip().partition(" ")
                    if args.strip().startswith("python /opt/ml/code/fail_or_sleep.py"):
                        victim = int(pid)
            time.sleep(0.2)
        assert victim is not None, "the rank never appeared in its container"
        time.sleep(1.0)
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        job.join(timeout=60)
        ended_in = time.monotonic() - killed
    finally:
        job.join(timeout=120)
    result = outcome["result"]
    assert result.status == "Failed" and result.failed_label == "algo-2,1", outcome.get("output")
    assert "algo-2" in result.failure_reason and "SIGKILL" in result.failure_reason, result.failure_reason
    assert ended_in < 10.0, ended_in
    assert job_containers(docker_engine) == []
