"""The SDK v3 environment (``estimators/sdk3/setup_venv.sh``): the kit installed beside sagemaker 3 kept the SDK's
version, pip check finds nothing broken, the installed kit imports with nothing of the checkout on ``sys.path``, and its
files are this checkout's (``bash tests/run-sdk3`` tests the installed kit: a stale one would test old code).
Runs in .venv-sdk3 only (``.ci/run`` does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import distribution, version
from pathlib import Path

import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[3]
RERUN = "re-run `bash estimators/sdk3/setup_venv.sh`"


def _outside_the_checkout(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_installing_the_kit_kept_the_pinned_sdk_and_pip_check_passes():
    pins = (REPO / "constraints-sdk3.txt").read_text(encoding="utf-8").splitlines()
    (pinned,) = [line.split("==", 1)[1] for line in pins if line.startswith("sagemaker==")]
    assert version("sagemaker") == pinned == "3.27.0"
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_kit_is_installed_and_imports_with_sdk3_alone(tmp_path):
    direct_url = json.loads(distribution("smddp-compat").read_text("direct_url.json") or "{}")
    assert not direct_url.get("dir_info", {}).get("editable"), direct_url
    done = _outside_the_checkout(
        "import smddp_compat.estimators.sdk3 as sdk3\n"
        "print(sdk3.__file__)\n"
        "try:\n"
        "    from smddp_compat.estimators import TensorFlow\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n", tmp_path)
    assert done.returncode == 0, done.stderr
    where, said = done.stdout.splitlines()[:2]
    assert "site-packages" in where and not where.startswith(str(REPO) + "/estimators"), where
    # The v2 estimator says which SDK it needs, which is here, the install, and the API this SDK enables.
    assert said.startswith("MissingDependencyError smddp_compat.estimators.TensorFlow"), said
    for words in ("SDK v2", f"sagemaker {version('sagemaker')}", "pip install 'smddp-compat[sdk2]'",
                  "smddp_compat.estimators.sdk3"):
        assert words in said, said


def test_the_installed_files_are_this_checkouts():
    import smddp_compat

    installed = {}
    for file in distribution("smddp-compat").files or []:
        if file.parts[0] == "smddp_compat" and file.suffix == ".py":
            inner = Path(*file.parts[1:])
            source = REPO / inner if inner.parts[0] in smddp_compat.NAMESPACE_PARTS else REPO / "smddp_compat" / inner
            installed[source] = Path(file.locate())
    in_checkout = {path for part in ("smddp_compat", *smddp_compat.NAMESPACE_PARTS)
                   for path in (REPO / part).rglob("*.py")
                   if "__pycache__" not in path.parts and path.parent.joinpath("__init__.py").exists()}
    assert sorted(map(str, in_checkout - set(installed))) == [], f"not installed: {RERUN}"
    changed = [str(source) for source, copy in installed.items()
               if not source.exists() or source.read_bytes() != copy.read_bytes()]
    assert changed == [], f"the installed kit differs from the checkout: {RERUN}"
