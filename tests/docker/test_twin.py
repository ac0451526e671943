"""The SageMaker twin replays real requests: each request is built against moto (an estimator, the plain SDK v2, the
SDK v3 plug-ins) and captured as SageMaker would receive it, then run by the twin on 2 hosts in the kit's image,
started with ``train`` as SageMaker starts it. Every process must see the whole world, the weights must end
identical, and the artifacts must land in moto's S3."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest
from tests.fake_aws import ROLE, Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

SCRIPTS = Path(__file__).resolve().parent / "scripts"
ENTRY_POINTS = Path(__file__).resolve().parents[2] / "entry_points"
GPU_TYPE = "ml.p4d.24xlarge"
CPU_TYPE = "ml.c5.xlarge"


def _estimator(aws: Aws, image: str, **kwargs: Any) -> Any:
    from smddp_compat.estimators import TensorFlow

    settings: dict[str, Any] = dict(
        entry_point="world_probe.py", source_dir=str(SCRIPTS), role=ROLE, instance_type=GPU_TYPE, instance_count=2,
        framework_version="2.21", py_version="py311", image_uri=image, sagemaker_session=aws.sagemaker_session(),
        disable_profiler=True, debugger_hook_config=False,
    )
    settings.update(kwargs)
    return TensorFlow(**settings)


def _as_the_service(request: TrainingJobRequest) -> dict[str, Any]:
    """The twin told to act as SageMaker for this request: its job name, its S3 output (moto's, in these tests)."""
    return {"job_name": request.job_name, "output": request.output_path.uri}


def _replay(aws: Aws, **options: Any) -> tuple[Any, str]:
    """Replays the last captured request as the service; returns the twin's result and everything it printed."""
    stream = io.StringIO()
    request = TrainingJobRequest.from_params(aws.requests[-1])
    result = SageMakerTwin(request, stream=stream, **_as_the_service(request), **options).run()
    return result, stream.getvalue()


def _worlds(aws: Aws, result: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """Every process's world record from output.tar.gz (every host's output/data merged, as on SageMaker)."""
    uri = result if isinstance(result, str) else result.output_artifacts
    path = aws.download(uri, str(tmp_path / "output.tar.gz")) if uri.startswith("s3://") else uri
    with tarfile.open(path) as archive:
        return [
            json.loads(archive.extractfile(member).read())  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile() and Path(member.name).name.startswith("world-")
        ]


def _assert_one_world(worlds: list[dict[str, Any]], size: int, per_host: int) -> None:
    assert sorted(w["rank"] for w in worlds) == list(range(size)), worlds
    assert {w["size"] for w in worlds} == {size}
    assert {w["allreduce_sum"] for w in worlds} == {float(size)}
    assert {w["local_size"] for w in worlds} == {per_host}
    assert sorted(w["host"] for w in worlds) == sorted(f"algo-{1 + i // per_host}" for i in range(size))
    first = worlds[0]["weights"]
    for world in worlds[1:]:
        assert world["weights"] == pytest.approx(first, abs=1e-6), "the ranks' weights differ after training"


def test_smdistributed_through_the_plain_sdk_v2_estimator(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    """A job written for AWS's TF 2.11 images (the SDK's own estimator, SMDDP), unchanged, with our image: SageMaker's
    SMDDP launch (mpirun ... smddprun python ...), 4 ranks on 2 hosts as one world, a hyperparameter with shell
    syntax reaching the script as one argument, and rank 0's model in model.tar.gz."""
    from sagemaker.tensorflow import TensorFlow

    est = TensorFlow(
        entry_point="world_probe.py", source_dir=str(SCRIPTS), role=ROLE, instance_type=GPU_TYPE, instance_count=2,
        framework_version="2.11", py_version="py39", image_uri=kit_image, sagemaker_session=aws.sagemaker_session(),
        distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
        hyperparameters={"kind": "smddp", "note": "a b; $(id)"}, disable_profiler=True, debugger_hook_config=False,
    )
    est.fit(wait=False, job_name="twin-smddp-sdk")
    assert aws.requests[-1]["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    result, printed = _replay(aws, gpus_per_host=2)
    assert result.status == "Completed", printed[-4000:]
    assert "smddprun" in printed and "mpirun" in printed
    worlds = _worlds(aws, result, tmp_path)
    _assert_one_world(worlds, size=4, per_host=2)
    assert {w["note"] for w in worlds} == {"a b; $(id)"}  # one argument, never run by a shell
    assert result.model_artifacts == f"{est.output_path.rstrip('/')}/twin-smddp-sdk/output/model.tar.gz"
    with tarfile.open(aws.download(result.model_artifacts, str(tmp_path / "model.tar.gz"))) as archive:
        assert "weights.npy" in archive.getnames()


def _mwms_replay(aws: Aws, image: str, tmp_path: Path, job_name: str, expect: int, *, extra: dict[str, Any],
                 options: list[str], **kwargs: Any) -> dict[str, Any]:
    """A 2-host MWMS request built by the estimator (``extra`` members added), replayed by ``smddp local --backend
    docker --request FILE OPTIONS``."""
    est = _estimator(aws, image, instance_type=CPU_TYPE,
                     distribution={"multi_worker_mirrored_strategy": {"enabled": True}}, **kwargs)
    est.fit(wait=False, job_name=job_name)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({**aws.requests[-1], **extra}))
    return _cli(["--backend", "docker", "--request", str(request), "--output", str(tmp_path / "out"), *options],
                expect=expect)


def test_keras3_fit_under_mwms_gets_tf_config_from_the_toolkit_and_trains_in_the_image(
    aws: Aws, kit_image: str, tmp_path: Path
) -> None:
    """A user's plain Keras 3 ``fit`` under 2-worker MWMS, replayed from the estimator's request as SageMaker starts
    the image: the toolkit's TF_CONFIG makes one cluster of two tasks, the image's ``train`` arms the kit's Keras 3
    adaptation, and both workers end with the same weights (only this test runs Keras 3's trainer in the image).
    The request's own ``MlflowConfig`` (SageMaker's managed MLflow, an ARN) replayed with ``--mlflow URI``: the run
    is made at URI under the request's experiment and run name (only this test replays a request's MlflowConfig)."""
    from mlflow import MlflowClient

    from tests.mlflow_server import MlflowServer

    server = MlflowServer(tmp_path / "mlflow").start()
    try:
        config = {"MlflowResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-twin",
                  "MlflowExperimentName": "replayed-experiment", "MlflowRunName": "keras3-fit-run"}
        described = _mwms_replay(aws, kit_image, tmp_path, "twin-keras3-fit", 0, entry_point="plain_keras_fit.py",
                                 extra={"MlflowConfig": config}, options=["--mlflow", server.uri])
        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("replayed-experiment")
        [run] = client.search_runs([experiment.experiment_id])
    finally:
        server.stop()
    assert described["TrainingJobStatus"] == "Completed"
    assert described["TrainingJobName"].startswith("twin-keras3-fit-replay-")  # a replay runs under a name of its own
    assert (run.info.run_name, run.info.status) == ("keras3-fit-run", "FINISHED")
    assert described["MlflowDetails"] == {"MlflowExperimentId": experiment.experiment_id, "MlflowRunId": run.info.run_id}
    assert described["MlflowConfig"]["MlflowResourceArn"] == server.uri
    warnings = described["Twin"]["Warnings"]
    assert not any(line.startswith("MlflowConfig:") for line in warnings), warnings  # tracked: no "not connected"
    output = described["ModelArtifacts"]["S3ModelArtifacts"].replace("model.tar.gz", "output.tar.gz")
    with tarfile.open(output) as archive:
        records = [json.loads(archive.extractfile(m).read()) for m in archive.getmembers()  # type: ignore[union-attr]
                   if m.isfile() and Path(m.name).name.startswith("fit-")]
    assert sorted(r["task"] for r in records) == [0, 1] and {r["keras"] for r in records} == {"keras-3"}, records
    assert records[0]["weights"] == records[1]["weights"]


def _cli(argv: list[str], expect: int) -> dict[str, Any]:
    """``smddp local ARGV`` in a subprocess; returns the DescribeTrainingJob answer it prints."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", "local", *argv],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == expect, done.stderr[-4000:]
    return json.loads(done.stdout)


def test_dtensor_builds_the_whole_mesh(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    est = _estimator(aws, kit_image, entry_point="dtensor_sum.py", instance_type=CPU_TYPE,
                     distribution={"dtensor": {"enabled": True, "mesh": {"batch": 4}, "devices_per_process": 2}})
    est.fit(wait=False, job_name="twin-dtensor")
    result, printed = _replay(aws)
    assert result.status == "Completed", printed[-4000:]
    path = aws.download(result.output_artifacts, str(tmp_path / "output.tar.gz"))
    with tarfile.open(path) as archive:
        records = [json.loads(archive.extractfile(m).read()) for m in archive.getmembers()  # type: ignore[union-attr]
                   if m.isfile() and Path(m.name).name.startswith("dtensor-")]
    assert sorted(r["client"] for r in records) == [0, 1], records
    assert {(r["clients"], r["devices"], r["local_devices"], r["sum"]) for r in records} == {(2, 4, 2, 12.0)}


def _wheel(tmp_path: Path) -> Path:
    """A tiny wheel built here (no index is reachable from the containers): ``twin_probe_dependency``."""
    import subprocess
    import sys

    project = tmp_path / "dependency"
    (project / "twin_probe_dependency").mkdir(parents=True)
    (project / "twin_probe_dependency" / "__init__.py").write_text('MARKER = "installed from requirements.txt"\n')
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "twin-probe-dependency"\nversion = "1.0"\n'
    )
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(project)], check=True, timeout=300)
    return next(wheels.glob("*.whl"))


def test_s3_source_with_requirements_and_an_s3_channel(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "deps").mkdir(parents=True)
    (source / "requirements_probe.py").write_bytes((SCRIPTS / "requirements_probe.py").read_bytes())
    wheel = _wheel(tmp_path)
    (source / "deps" / wheel.name).write_bytes(wheel.read_bytes())
    (source / "requirements.txt").write_text(f"--no-index\n./deps/{wheel.name}\n")
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="twin-data")
    s3.put_object(Bucket="twin-data", Key="mnist/train/data.txt", Body=b"channel data from S3")
    est = _estimator(aws, kit_image, entry_point="requirements_probe.py", source_dir=str(source),
                     instance_type=CPU_TYPE)
    est.fit({"train": "s3://twin-data/mnist/train"}, wait=False, job_name="twin-none")
    submitted = json.loads(aws.requests[-1]["HyperParameters"]["sagemaker_submit_directory"])
    assert submitted.startswith("s3://")  # the toolkit in the container downloads it from the twin's S3
    # Read back with DescribeTrainingJob; the replay writes to the S3 prefix it is told to, never the job's own.
    described = _cli(["--backend", "docker", "--job", "twin-none", "--output", "s3://twin-data/replays"], expect=0)
    assert described["TrainingJobStatus"] == "Completed"
    assert described["TrainingJobName"].startswith("twin-none-replay-")
    output = described["ModelArtifacts"]["S3ModelArtifacts"].replace("model.tar.gz", "output.tar.gz")
    assert output == f"s3://twin-data/replays/{described['TrainingJobName']}/output/output.tar.gz"
    real_job_output = f"{est.output_path.rstrip('/')[len('s3://'):]}/twin-none/output/".split("/", 1)
    assert not s3.list_objects_v2(Bucket=real_job_output[0], Prefix=real_job_output[1]).get("KeyCount")
    path = aws.download(output, str(tmp_path / "output.tar.gz"))
    with tarfile.open(path) as archive:
        probes = [json.loads(archive.extractfile(m).read()) for m in archive.getmembers()  # type: ignore[union-attr]
                  if m.isfile() and m.name.startswith("probe-")]
    assert sorted(p["host"] for p in probes) == ["algo-1", "algo-2"]
    assert {(p["marker"], p["data"]) for p in probes} == {("installed from requirements.txt", "channel data from S3")}


@contextlib.contextmanager
def _running(twin: SageMakerTwin) -> Iterator[tuple[threading.Thread, dict[str, Any]]]:
    """Runs the twin's job in a thread; whatever happens in the block, the job is stopped and joined at the end."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        outcome["result"] = twin.run()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield thread, outcome
    finally:
        if thread.is_alive():
            twin.stop()
            thread.join(300)


def test_kill_9_of_a_rank_on_algo_2_fails_the_job_naming_the_host(aws: Aws, kit_image: str, docker_engine: Any) -> None:
    from smddp_compat.image.commands import capture

    est = _estimator(aws, kit_image, distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
                     hyperparameters={"kind": "smddp", "hold": 300})
    est.fit(wait=False, job_name="twin-kill")
    log = io.StringIO()
    request = TrainingJobRequest.from_params(aws.requests[-1])
    twin = SageMakerTwin(request, gpus_per_host=2, stream=log, **_as_the_service(request))
    with _running(twin) as (thread, outcome):
        deadline = time.monotonic() + 600
        while log.getvalue().count("holding for") < 4:
            assert time.monotonic() < deadline and thread.is_alive(), log.getvalue()[-4000:]
            time.sleep(0.5)
        # One rank process on algo-2 (started there by mpirun's orted over ssh), killed with SIGKILL from inside.
        finder = ("import os, psutil, sys\n"
                  "ranks = [p for p in psutil.process_iter(['cmdline', 'name']) if p.info['name'].startswith('python')"
                  " and p.pid != os.getpid() and 'world_probe.py' in ' '.join(p.info['cmdline'] or [])]\n"
                  "print([' '.join(p.info['cmdline'] or []) for p in psutil.process_iter(['cmdline'])] if not ranks else '')\n"
                  "os.kill(ranks[0].pid, 9) if ranks else sys.exit(1)\n")
        code, listing = capture([docker_engine.docker, "exec", twin.container("algo-2"), "python", "-c", finder],
                                timeout=60)
        killed = time.monotonic()
        assert code == 0, f"no rank process found on algo-2: {listing}"
        thread.join(120)
    ended = time.monotonic() - killed
    result = outcome["result"]
    assert result.status == "Failed", log.getvalue()[-4000:]
    assert ended < 15, f"the job took {ended:.1f} s to fail after the kill"
    assert "algo-2" in result.failure_reason and "signal 9" in result.failure_reason, result.failure_reason


SDK3_PYTHON = Path(__file__).resolve().parents[2] / ".venv-sdk3" / "bin" / "python"


def test_sdk_v3_model_trainer_smddp_plug_in(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    """SDK v3's ModelTrainer with SMDDPCompat (its request built in .venv-sdk3), replayed on 2 hosts: the only SDK v3
    SMDDP job in the image (its DTensor plug-in runs in SDK v3's own local container, test_sagemaker_local_mode)."""
    import os
    import subprocess

    if not SDK3_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{SDK3_PYTHON} is missing: CI builds it with estimators/sdk3/setup_venv.sh")
        pytest.skip(f"{SDK3_PYTHON} is missing (bash estimators/sdk3/setup_venv.sh)")
    out = tmp_path / "request.json"
    done = subprocess.run([str(SDK3_PYTHON), str(Path(__file__).with_name("sdk3_request.py")), str(out), kit_image,
                           str(SCRIPTS), "world_probe.py"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    request = TrainingJobRequest.from_file(out)
    assert request.entrypoint  # SDK v3 starts its own driver script, not `train`
    stream = io.StringIO()
    result = SageMakerTwin(request, stream=stream, gpus_per_host=2, **_as_the_service(request)).run()
    assert result.status == "Completed", stream.getvalue()[-4000:]
    path = aws.download(result.output_artifacts, str(tmp_path / "output.tar.gz"))
    with tarfile.open(path) as archive:
        records = [json.loads(archive.extractfile(m).read()) for m in archive.getmembers()  # type: ignore[union-attr]
                   if m.isfile() and Path(m.name).name.startswith("world-")]
    _assert_one_world(records, size=4, per_host=2)
