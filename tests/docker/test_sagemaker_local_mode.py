"""The SageMaker Python SDK's own local modes run the kit's image on 2 hosts: v2's (``instance_type="local"``) for
the toolkit's MPI launch (``mpi``, the Horovod face, 2 processes a host), v3's ``Mode.LOCAL_CONTAINER`` for
TensorFlow's own strategies (MWMS, DTensor, parameter servers): each SDK writes its docker-compose file, starts every
host with ``train``, and collects ``model.tar.gz`` / ``output.tar.gz`` into a local output path. No registry, no AWS
call. Each strategy goes through one SDK's door only: what the image does with the request is the same whichever SDK
wrote it (the twin's tests replay both SDKs' requests; SMDDP's own launch, mpirun with ``smddprun`` per rank, is the
twin's test of the plain SDK v2 estimator's request, test_twin.py), and every one of these jobs holds the one
``sagemaker-local`` network, one after the other.

The SDK's compose file puts the hosts on a network named ``sagemaker-local``; the test creates it first as an
internal network of its own engine (so the hosts reach only each other) and removes it afterwards."""

from __future__ import annotations

import json
import re
import tarfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.image import Engine
from smddp_compat.image.commands import capture
from tests.tiers import one_at_a_time

# One network name for every SDK local-mode job (sagemaker-local): its tests hold one lock (sdk_network).
pytestmark = [pytest.mark.timeout(900)]

SCRIPTS = Path(__file__).resolve().parent / "scripts"
#: docker compose's containers (the SDK's; the twin's are not compose's), and those of them on ``sagemaker-local``.
COMPOSE = ("ps", "--all", "--quiet", "--filter", "label=com.docker.compose.project")
ON_THE_NETWORK = (*COMPOSE, "--filter", "network=sagemaker-local")


@pytest.fixture
def sdk_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline SDK settings: region, fake credentials, telemetry off, no v2 deprecation noise."""
    config = tmp_path / "sagemaker-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(config))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sdk_network(docker_engine: Engine) -> Iterator[None]:
    """``sagemaker-local`` as an internal network, held by one test at a time; the SDK's (docker compose) containers
    and the network removed after.

    The SDK hard-codes the network's name, so every test here holds one lock (:func:`tests.tiers.one_at_a_time`),
    whichever pytest-xdist worker runs it. Compose containers still on the network when the lock is taken are a
    previous holder's leftovers and are removed first."""

    def listing(*what: str) -> set[str]:
        code, output = capture([docker_engine.docker, *what], timeout=60)
        assert code == 0, output
        return set(output.split())

    def remove(containers: set[str]) -> None:
        if containers:
            capture([docker_engine.docker, "rm", "--force", *sorted(containers)], timeout=120)

    def remove_network() -> None:
        # The engine may still be detaching the last job's containers: try again for a while.
        deadline = time.monotonic() + 60
        while capture([docker_engine.docker, "network", "rm", "sagemaker-local"], timeout=60)[0] != 0:
            if "sagemaker-local" not in listing("network", "ls", "--format", "{{.Name}}"):
                return
            remove(listing(*ON_THE_NETWORK))
            assert time.monotonic() < deadline, "the sagemaker-local network could not be removed within 60 s"
            time.sleep(1)

    with one_at_a_time("sagemaker-local"):
        leftovers = listing(*ON_THE_NETWORK)
        if leftovers or "sagemaker-local" in listing("network", "ls", "--format", "{{.Name}}"):
            # Said, not failed: which job leaves them is still to be found (seen twice in CI, never alone).
            code, names = capture([docker_engine.docker, "ps", "--all", "--filter", "network=sagemaker-local",
                                   "--format", "{{.Names}} {{.Status}} {{.Label \"com.docker.compose.project\"}}"],
                                  timeout=60)
            warnings.warn(f"sagemaker-local was still there at the start, with {names.strip() or 'no container'}",
                          stacklevel=1)
        remove(leftovers)
        remove_network()
        before = listing(*COMPOSE)
        code, output = capture([docker_engine.docker, "network", "create", "--internal", "sagemaker-local"], timeout=60)
        assert code == 0, output
        try:
            yield
        finally:
            new = listing(*COMPOSE) - before
            remove(new)
            remove_network()
        left = listing(*COMPOSE) & new
        assert not left, f"the SDK's containers could not be removed: {sorted(left)}"


def _probe_records(tarball: Path) -> list[dict[str, Any]]:
    """The ``world-*.json`` / ``dtensor-*.json`` records the job's processes left in ``output.tar.gz``."""
    with tarfile.open(tarball) as archive:
        return [json.loads(archive.extractfile(member).read())  # type: ignore[union-attr]
                for member in archive.getmembers()
                if member.isfile() and Path(member.name).name.startswith(("world-", "dtensor-"))]


def _assert_one_world(records: list[dict[str, Any]], *, dtensor: bool) -> None:
    """The two hosts' processes trained as one job: DTensor's 2 clients over a 4-device mesh, or 2 ranks whose
    all-reduce summed both and whose weights agree."""
    if dtensor:
        assert sorted(r["client"] for r in records) == [0, 1], records
        assert {(r["clients"], r["devices"], r["sum"]) for r in records} == {(2, 4, 12.0)}
    else:
        assert sorted(r["rank"] for r in records) == [0, 1], records
        assert {r["size"] for r in records} == {2} and {r["allreduce_sum"] for r in records} == {2.0}
        assert records[0]["weights"] == pytest.approx(records[1]["weights"], abs=1e-6)


def test_sdk_local_mode_runs_the_horovod_face_on_two_hosts_of_two_processes(
    tmp_path: Path, kit_image: str, sdk_environment: None, sdk_network: None
) -> None:
    """SDK v2's own local mode runs the kit's estimator's ``mpi`` job (2 processes a host) in the kit's image: the
    toolkit's mpirun over the hosts' sshd starts 4 ranks of the Horovod face, 2 on each host, as one world whose
    weights end identical (the only 2-processes-a-host ``mpi`` launch of the suite)."""
    from sagemaker.local import LocalSession

    from smddp_compat.estimators import TensorFlow

    session = LocalSession()
    session.config = {"local": {"local_code": True}}  # source_dir mounted at /opt/ml/code, nothing uploaded
    estimator = TensorFlow(
        entry_point="world_probe.py", source_dir=str(SCRIPTS), image_uri=kit_image,
        role="arn:aws:iam::111111111111:role/SageMakerRole", instance_count=2, instance_type="local",
        framework_version="2.21", py_version="py311", sagemaker_session=session,
        output_path=f"file://{tmp_path / 'out'}", hyperparameters={"kind": "horovod"},
        distribution={"mpi": {"enabled": True, "processes_per_host": 2}}, model_dir=False,
        base_job_name="sdk-local-mpi",
    )
    estimator.fit(wait=True, logs="All")  # raises when the job fails
    description = session.sagemaker_client.describe_training_job(estimator.latest_training_job.name)
    assert description["TrainingJobStatus"] == "Completed"
    records = _probe_records(tmp_path / "out" / "output.tar.gz")
    assert sorted(r["rank"] for r in records) == [0, 1, 2, 3], records
    assert {r["size"] for r in records} == {4} and {r["allreduce_sum"] for r in records} == {4.0}
    by_host: dict[str, list[int]] = {}
    for record in records:
        by_host.setdefault(record["host"], []).append(record["local_rank"])
    assert len(by_host) == 2 and all(sorted(ranks) == [0, 1] for ranks in by_host.values()), records
    assert {r["local_size"] for r in records} == {2}
    for record in records[1:]:
        assert record["weights"] == pytest.approx(records[0]["weights"], abs=1e-6), "the ranks' weights differ"


SDK3_PYTHON = Path(__file__).resolve().parents[2] / ".venv-sdk3" / "bin" / "python"
ENTRY_POINTS = Path(__file__).resolve().parents[2] / "entry_points"
#: SDK v3 ``ModelTrainer`` jobs: the source folder, the script, the kit config (class name and fields) and the
#: script's hyperparameters.
SDK3_CASES = {
    "MultiWorkerMirrored": (SCRIPTS, "world_probe.py", ["MultiWorkerMirrored", {}], {"kind": "mwms"}),
    "DTensor": (SCRIPTS, "dtensor_sum.py", ["DTensor", {"mesh": {"batch": 4}, "devices_per_process": 2}], {}),
    # The bundled entry point, training through the servers (a script that never uses them: the probe's
    # parameter_server job in test_one_command.py).
    "ParameterServer": (ENTRY_POINTS, "parameter_server_mnist.py", ["ParameterServer", {}], {"epochs": 2}),
}


@pytest.mark.parametrize("case", sorted(SDK3_CASES))
def test_sdk3_local_container_two_hosts(
    case: str, tmp_path: Path, kit_image: str, sdk_environment: None, sdk_network: None
) -> None:
    """SDK v3's own ``Mode.LOCAL_CONTAINER`` runs the kit's image with each kit config on 2 hosts (the job built and
    started in .venv-sdk3 by the matrix's SDK v3 runner, as a user's ModelTrainer code does). ParameterServer: the
    kit's driver starts the toolkit's layout on each host and the bundled entry point trains through the servers to
    its target (only this test runs SDK v3's parameter-server driver with a script that uses them)."""
    import os
    import subprocess

    if not SDK3_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{SDK3_PYTHON} is missing: CI builds it with estimators/sdk3/setup_venv.sh")
        pytest.skip(f"{SDK3_PYTHON} is missing (bash estimators/sdk3/setup_venv.sh)")
    source_dir, entry_point, distributed, hyperparameters = SDK3_CASES[case]
    spec = {"entry_point": entry_point, "source_dir": str(source_dir), "hosts": 2, "distributed": distributed,
            "hyperparameters": hyperparameters, "environment": {}, "image": kit_image, "output": str(tmp_path / "out"),
            "job_name": f"sdk3-local-{case.lower()}", "max_run": 600}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([str(SDK3_PYTHON), "-m", "smddp_compat.bench._matrix_sdk3", "sdk3-container", "--spec",
                           str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=800,
                          cwd=tmp_path, env=dict(os.environ))
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-6000:]
    if case == "ParameterServer":
        assert "parameter server 1 and the worker's script" in printed, printed[-6000:]
        accuracy = [float(value) for value in re.findall(r"test_accuracy=([0-9.]+);", printed)]
        assert accuracy and accuracy[-1] >= 0.90, printed[-3000:]
    else:
        _assert_one_world(_probe_records(tmp_path / "out" / "output.tar.gz"), dtensor=case == "DTensor")
