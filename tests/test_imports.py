"""Importing the light packages must not pull in heavy ones (checked in fresh interpreters)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes

CASES = [
    ("smddp_compat", ["tensorflow", "boto3", "sagemaker", "horovod"]),
    ("smddp_compat.launcher", ["tensorflow", "boto3", "sagemaker"]),
    ("smddp_compat.strategies", ["tensorflow", "horovod", "boto3", "sagemaker"]),
    ("smddp_compat.contract", ["tensorflow", "horovod", "boto3", "sagemaker"]),
    ("smddp_compat.commands.cli", ["tensorflow", "boto3", "sagemaker"]),
    ("smddp_compat.tensorflow", ["boto3", "sagemaker"]),
    # the image's build and its `train` stand on their own: not the twin, not local mode
    ("smddp_compat.image", ["tensorflow", "boto3", "sagemaker", "smddp_compat.local_mode"]),
    ("smddp_compat.image.train", ["tensorflow", "boto3", "sagemaker", "smddp_compat.local_mode"]),
]


@pytest.mark.parametrize("module, forbidden", CASES)
def test_import_is_light(module, forbidden):
    code = f"import sys, {module}; print(sorted(m for m in {forbidden!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
