"""A ``local_process`` job runs on this machine's TensorFlow and Python: a ``framework_version`` or ``py_version``
it cannot honour is named in one warning line (asked, what runs, what to do)."""

from __future__ import annotations

import sys
import warnings
from importlib.metadata import version

import pytest

from tests.estimators.conftest import ROLE

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

HERE_TF = version("tensorflow")
HERE_PY = f"py{sys.version_info.major}{sys.version_info.minor}"
HERE_TF_MINOR = ".".join(HERE_TF.split(".")[:2])


def _local_estimator(tiny_script, **versions):
    from smddp_compat.estimators import TensorFlow

    return TensorFlow(entry_point=tiny_script, instance_type="local_process", **versions)


def test_an_old_version_is_named_with_the_one_that_runs_and_the_fix(aws, tiny_script):
    from smddp_compat.estimators import LocalVersionWarning

    with pytest.warns(LocalVersionWarning) as caught:
        _local_estimator(tiny_script, framework_version="2.4.1", py_version="py37")
    assert len(caught) == 1 and caught[0].filename == __file__  # said at the user's line
    message = str(caught[0].message)
    assert "\n" not in message
    assert "framework_version='2.4.1'" in message and "py_version='py37'" in message
    assert f"TensorFlow {HERE_TF} on Python {sys.version_info.major}.{sys.version_info.minor}" in message
    assert f"pass framework_version='{HERE_TF_MINOR}', py_version='{HERE_PY}'" in message


@pytest.mark.parametrize("versions, named", [
    ({"framework_version": HERE_TF_MINOR, "py_version": "py37"}, "py_version='py37'"),
    ({"framework_version": "2.16", "py_version": HERE_PY}, "framework_version='2.16'"),
    ({"framework_version": f"{HERE_TF_MINOR}.99", "py_version": HERE_PY}, f"framework_version='{HERE_TF_MINOR}.99'"),
])
def test_either_version_alone_is_named(aws, tiny_script, versions, named):
    from smddp_compat.estimators import LocalVersionWarning

    with pytest.warns(LocalVersionWarning, match=named) as caught:
        _local_estimator(tiny_script, **versions)
    assert len(caught) == 1


@pytest.mark.parametrize("versions", [
    {"framework_version": HERE_TF_MINOR, "py_version": HERE_PY},
    {"framework_version": HERE_TF, "py_version": f"py{sys.version_info.major}"},
])
def test_this_machines_versions_are_not_warned_about(aws, tiny_script, versions):
    from smddp_compat.estimators import LocalVersionWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalVersionWarning)
        _local_estimator(tiny_script, **versions)


def test_sagemaker_jobs_run_the_version_asked_and_are_not_warned_about(aws, tiny_script):
    from smddp_compat.estimators import LocalVersionWarning, TensorFlow

    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalVersionWarning)
        TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.c5.xlarge", framework_version="2.4.1",
                   py_version="py37", image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/tf:2.4.1",
                   sagemaker_session=aws.sagemaker_session())
