"""The SageMaker Python SDK's own local mode (v2, ``instance_type="local"``) runs one of our entry points in the kit's
image: the SDK writes its docker-compose file, runs the container with ``train`` (the image's SageMaker command),
and collects ``model.tar.gz`` / ``output.tar.gz`` into a local output path. No registry, no AWS call."""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docker.docker_job_helpers import ENTRY_POINTS

from local_mode.docker import DockerBackend, Engine
from local_mode.docker._commands import capture

pytestmark = pytest.mark.timeout(1800)  # may build the image first


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
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sdk_leftovers(docker_engine: Engine) -> Iterator[None]:
    """The SDK leaves its stopped container and its ``sagemaker-local`` network behind: removed after the test."""
    def listing(*what: str) -> set[str]:
        code, output = capture([docker_engine.docker, *what], timeout=60)
        assert code == 0, output
        return set(output.split())

    containers = listing("ps", "--all", "--quiet")
    networks = listing("network", "ls", "--quiet", "--filter", "name=sagemaker-local")
    yield
    new = sorted(listing("ps", "--all", "--quiet") - containers)
    if new:
        capture([docker_engine.docker, "rm", "--force", *new], timeout=120)
    if not networks:
        capture([docker_engine.docker, "network", "rm", "sagemaker-local"], timeout=60)
    assert listing("ps", "--all", "--quiet") == containers


def test_sdk_local_mode_trains_an_entry_point_in_the_kits_image(
    tmp_path: Path,
    docker_backend: DockerBackend,
    sdk_environment: None,
    sdk_leftovers: None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from sagemaker.local import LocalSession
    from sagemaker.tensorflow import TensorFlow

    session = LocalSession()
    session.config = {"local": {"local_code": True}}  # source_dir mounted at /opt/ml/code, nothing uploaded
    estimator = TensorFlow(
        entry_point="smddp_mnist.py",
        source_dir=str(ENTRY_POINTS),
        image_uri=docker_backend.image.tag,
        role="arn:aws:iam::111111111111:role/SageMakerRole",
        instance_count=1,
        instance_type="local",
        sagemaker_session=session,
        output_path=f"file://{tmp_path / 'out'}",
        hyperparameters={"epochs": 1, "max-steps": 8, "log-steps": 4},
        model_dir=False,  # our scripts take the model folder from SM_MODEL_DIR, as the toolkit documents
        base_job_name="sdk-local",
    )
    estimator.fit(wait=True, logs="All")

    job_name = estimator.latest_training_job.name
    # The SDK's local mode copies the artifacts straight into a file:// output path (no job-name folder).
    model = tmp_path / "out" / "model.tar.gz"
    output = tmp_path / "out" / "output.tar.gz"
    assert model.is_file() and output.is_file(), sorted(str(p) for p in (tmp_path / "out").rglob("*"))
    with tarfile.open(model) as archive:
        names = archive.getnames()
    assert any(name.endswith("saved_model.pb") for name in names), names  # rank 0's SavedModel from /opt/ml/model
    assert estimator.model_data.endswith("model.tar.gz")
    description = session.sagemaker_client.describe_training_job(job_name)
    assert description["TrainingJobStatus"] == "Completed"
    printed = capfd.readouterr().out
    # The compose service is the SDK's (algo-1-xxxxx); the script ran under the image's `train` with SM_* variables.
    assert re.search(r"algo-1-\w+ +\|.*smddp_mnist: 1 rank\(s\)", printed), printed[-3000:]
    assert "model saved to /opt/ml/model" in printed
