"""With no SageMaker SDK at all, the core kit works (smddprun, smddp local, the runtime), and each SDK API of the
estimators says which SDK it needs and the install, for either SDK (a child process in which ``sagemaker`` does not
import and no distribution of it is found)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from smddp_compat.estimators import errors
from tests.estimators.conftest import REPO

pytestmark = pytest.mark.processes

_NO_SDK = """
import sys
class NoSdk:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "sagemaker":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoSdk())
import smddp_compat.estimators.errors as errors
errors.installed_sdk = lambda: None
"""


def _without_sdk(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _NO_SDK + code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_core_kit_runs_without_an_sdk():
    done = _without_sdk(
        "from smddp_compat.commands.cli import main\n"
        "from smddp_compat.launcher import main as smddprun\n"
        "for run, command in ((smddprun, ['--help']), (main, ['local', '--help']), (main, ['submit', '--help']),\n"
        "                     (main, ['doctor', '--help'])):\n"
        "    try:\n"
        "        assert not run(command), command\n"
        "    except SystemExit as exc:\n"
        "        assert not exc.code, (command, exc.code)\n"
        "print('sagemaker' in sys.modules)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_each_sdk_api_says_which_sdk_it_needs_and_the_installs():
    done = _without_sdk("from smddp_compat.estimators import TensorFlow\n")
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("smddp_compat.estimators.errors.MissingDependencyError: smddp_compat.estimators.TensorFlow")
    for words in ("needs the SageMaker Python SDK v2", "no SageMaker SDK is installed", "pip install 'smddp-compat[sdk2]'",
                  "pip install 'smddp-compat[sdk3]'", "smddp_compat.estimators.sdk3"):
        assert words in said, said
    done = _without_sdk("import smddp_compat.estimators.sdk3\n")
    assert "MissingDependencyError" in done.stderr and "smddp-compat[sdk3]" in done.stderr, done.stderr


@pytest.mark.parametrize("found, major, words", [
    ("3.27.0", 2, ("and this environment has sagemaker 3.27.0", "'smddp-compat[sdk2]' in an environment of its own",
                   "With SDK v3 use smddp_compat.estimators.sdk3")),
    ("2.257.7", 3, ("and this environment has sagemaker 2.257.7", "'smddp-compat[sdk3]' in an environment of its own",
                    "With SDK v2 use smddp_compat.estimators.TensorFlow")),
    ("2.257.7", 2, ("sagemaker 2.257.7 is installed but does not import", "reinstall it")),
])
def test_the_wrong_sdk_says_which_is_here_and_what_it_enables(monkeypatch, found, major, words):
    monkeypatch.setattr(errors, "installed_sdk", lambda: found)
    said = str(errors.missing_sdk_error(major, ImportError("No module named 'sagemaker.x'\nmore lines")))
    assert f"needs the SageMaker Python SDK v{major}" in said and "more lines" not in said
    for text in words:
        assert text in said, said
