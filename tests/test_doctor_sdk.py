"""``smddp doctor``'s SDK, MLflow and Horovod-build checks, in-process: which SageMaker SDK this environment has and
which of the kit's APIs it enables (required only in setup.sh's .venv, which needs SDK v2), MLflow's client here and
its server apart, and a Horovod built for another TensorFlow than the one installed (setup.sh's build stamp), each
with its fix."""

from __future__ import annotations

import sys

import pytest

from smddp_compat.commands import doctor

STACK = {"tensorflow": "2.21.0", "horovod": "0.28.1", "gloo": True, "mpi": True, "nccl": 0}


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch):
    """Sets the SDK version the doctor finds (None: none) and whether this is setup.sh's .venv."""
    def found(version: str | None, setup_venv: bool = False) -> doctor.Check:
        monkeypatch.setattr(doctor, "installed_sdk", lambda: version)
        monkeypatch.setattr(doctor, "_in_setup_venv", lambda: setup_venv)
        return doctor._sdk_check()
    return found


def test_each_sdk_names_the_api_it_enables_and_the_one_it_does_not(sdk):
    v2 = sdk("2.257.7", setup_venv=True)
    assert v2.status == doctor.OK and "sagemaker 2.257.7 (SDK v2)" in v2.detail
    assert "enables smddp_compat.estimators.TensorFlow" in v2.detail and "estimators.sdk3" in v2.detail
    v3 = sdk("3.27.0")
    assert v3.status == doctor.OK and not v3.required and "sagemaker 3.27.0 (SDK v3)" in v3.detail
    assert "enables smddp_compat.estimators.sdk3" in v3.detail and "TensorFlow (the estimator" in v3.detail


def test_no_sdk_is_a_warning_with_both_installs_except_in_setup_venv(sdk):
    none = sdk(None)
    assert none.status == doctor.WARN and "core kit" in none.detail
    assert "smddp-compat[sdk3]" in none.fix and "smddp-compat[sdk2]" in none.fix
    assert sdk(None, setup_venv=True).status == doctor.FAIL
    wrong = sdk("3.27.0", setup_venv=True)
    assert wrong.status == doctor.FAIL and "setup.sh" in wrong.fix and "setup_venv.sh" in wrong.fix


def test_horovod_built_for_another_tensorflow_fails_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert doctor._horovod_built_for() is None and doctor._horovod_check(STACK).status == doctor.OK
    (tmp_path / doctor.HOROVOD_STAMP).write_text("horovod-0.28.1-tf-2.20.0-gloo-mpi-py311\n")
    assert doctor._horovod_built_for() == "2.20.0"
    check = doctor._horovod_check(STACK)
    assert check.status == doctor.FAIL
    assert "built for TensorFlow 2.20.0, but TensorFlow 2.21.0 is installed" in check.detail
    assert "pip install tensorflow==2.20.0" in check.fix and "`smddp install-horovod`" in check.fix
    (tmp_path / doctor.HOROVOD_STAMP).write_text("horovod-0.28.1-tf-2.21.0-gloo-mpi-py311\n")
    assert doctor._horovod_check(STACK).status == doctor.OK


def test_mlflow_client_here_server_apart_and_the_full_package_here_is_a_warning(monkeypatch, tmp_path):
    """The jobs' environment has MLflow's client; the full package (the server's, bringing scikit-learn, which Keras 3
    imports in every rank) there is a warning naming what it costs and how to move it."""
    versions = {"mlflow-skinny": "3.17.2"}
    monkeypatch.setattr(doctor, "_version", versions.get)
    monkeypatch.setattr(doctor, "_in_setup_venv", lambda: True)
    monkeypatch.setattr(doctor, "mlflow_server_executable", lambda: tmp_path / "bin" / "mlflow")
    assert doctor._mlflow_check().status == doctor.FAIL  # setup.sh's .venv without its server environment
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mlflow").touch()
    assert doctor._mlflow_check().status == doctor.OK
    versions["mlflow"] = "3.17.2"
    full = doctor._mlflow_check()
    assert full.status == doctor.WARN and "scikit-learn" in full.detail and "pip uninstall mlflow" in full.fix
    del versions["mlflow"], versions["mlflow-skinny"]
    monkeypatch.setattr(doctor, "_in_setup_venv", lambda: False)
    missing = doctor._mlflow_check()
    assert missing.status == doctor.WARN and "smddp-compat[mlflow]" in missing.fix
