"""A fake AWS for the tests: moto in server mode on loopback (real HTTP), fake credentials, the SDK's quirks.

Imported by the conftest files of the tests that talk to AWS (estimators, the SageMaker twin).

The two SageMaker SDK quirks (FACTS.md) are handled here, in the test set-up only:
- the SDK builds its STS client with an explicit regional endpoint, ignoring AWS_ENDPOINT_URL: the function that
  returns it is patched to return moto's URL (v2: ``sagemaker.session.sts_regional_endpoint``; v3:
  ``sagemaker.core.helper.session_helper.sts_regional_endpoint``);
- the SDK sends telemetry unless a user config opts out: ``SAGEMAKER_USER_CONFIG_OVERRIDE`` names one that does.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from smddp_compat.estimators._sdk_config_validation import check_each_configuration_once  # noqa: E402

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
# Recognisable fake credentials: tests assert they never reach a tarball, a hyperparameter or a request.
ACCESS_KEY = "AKIASMDDPCOMPATTEST1"
SECRET_KEY = "smddpCompatSecretKeyThatMustNeverLeak0001"

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_url() -> Any:
    """A moto server on 127.0.0.1 and a free port for the whole session."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class Aws:
    """The fake AWS of one test."""

    url: str
    region: str = REGION
    requests: list[dict[str, Any]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, region_name=self.region)

    def all_objects(self) -> list[tuple[str, str]]:
        s3 = self.client("s3")
        out = []
        for bucket in s3.list_buckets().get("Buckets", []):
            for obj in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", []):
                out.append((bucket["Name"], obj["Key"]))
        return out

    def training_jobs(self) -> list[str]:
        return [j["TrainingJobName"] for j in self.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]

    def download(self, uri: str, path: str) -> str:
        bucket, key = uri[5:].split("/", 1)
        self.client("s3").download_file(bucket, key, path)
        return path

    def sagemaker_session(self) -> Any:
        """An SDK v2 session whose CreateTrainingJob requests are recorded in ``self.requests``."""
        import boto3
        import sagemaker

        session = sagemaker.Session(boto_session=boto3.Session(region_name=self.region))
        session.sagemaker_client.meta.events.register(
            "provide-client-params.sagemaker.CreateTrainingJob",
            lambda params, **_: self.requests.append(json.loads(json.dumps(params, default=str))),
        )
        return session


def _patch_sts(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    for module_name in ("sagemaker.session", "sagemaker.core.helper.session_helper"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "sts_regional_endpoint"):
            monkeypatch.setattr(module, "sts_regional_endpoint", lambda region: url)


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Aws:
    """A freshly reset moto, the environment pointing at it, and the SDK quirks handled."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=30).read()
    config = tmp_path / "sagemaker-user-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    for name, value in {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
        "SAGEMAKER_VALIDATE_ROLE": "false",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    _patch_sts(monkeypatch, moto_url)
    check_each_configuration_once()  # as the kit's estimator does (the tests' SDK sessions too)
    return Aws(moto_url)
