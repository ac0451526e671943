"""Importing local_mode (and its CLI) stays light: no TensorFlow, Horovod, boto3 or SageMaker SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "horovod", "boto3", "botocore", "sagemaker", "keras", "numpy")


@pytest.mark.processes
def test_import_does_not_load_heavy_packages() -> None:
    probe = (
        "import json, sys; import smddp_compat.local_mode, smddp_compat.commands.local_cli, smddp_compat.local_mode.runner; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(done.stdout))
    assert not loaded & set(HEAVY), f"importing local_mode loaded {sorted(loaded & set(HEAVY))}"


def test_public_api() -> None:
    from smddp_compat import local_mode
    assert set(local_mode.__all__) >= {"JobSpec", "Distribution", "run", "JobResult", "ConfigurationError", "JobFailedError"}
    for name in local_mode.__all__:
        assert getattr(local_mode, name) is not None
