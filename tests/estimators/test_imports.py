"""Importing the estimators package is light: no TensorFlow (nor the SDK until TensorFlow is used)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.estimators.conftest import REPO

pytestmark = pytest.mark.processes


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_import_estimators_imports_neither_tensorflow_nor_sagemaker():
    out = _run("import sys, smddp_compat.estimators, smddp_compat.commands.submit_cli; "
               "print(sorted(m for m in ('tensorflow', 'sagemaker', 'horovod') if m in sys.modules))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_estimator_class_does_not_import_tensorflow():
    out = _run("import sys; from smddp_compat.estimators import TensorFlow; print('tensorflow' in sys.modules)")
    if "MissingDependencyError" in out.stdout + out.stderr:  # the SDK v3 environment has no estimators.TensorFlow
        assert "pip install" in out.stdout + out.stderr
        return
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"  # the SDK logs config lines before it


def test_sdk3_module_needs_sdk3():
    out = _run("import sagemaker, sys; v3 = hasattr(__import__('importlib').import_module('sagemaker'), 'train') "
               "or __import__('importlib').util.find_spec('sagemaker.train') is not None; print(v3)")
    has_v3 = out.stdout.strip().endswith("True")
    out = _run("import smddp_compat.estimators.sdk3")
    if has_v3:
        assert out.returncode == 0, out.stderr
    else:
        text = out.stdout + out.stderr  # SDK v2 installs a traceback printer that writes to stdout
        assert out.returncode != 0
        assert "MissingDependencyError" in text and "smddp-compat[sdk3]" in text
