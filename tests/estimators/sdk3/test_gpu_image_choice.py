"""SDK v3 plug-ins: ``check(instance_type, count, training_image=...)`` warns about a GPU type given an image without
CUDA (ModelTrainer has no hook of its own; ``check`` is called before ``train()``, so before any upload)."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


@pytest.mark.parametrize("plug_in", ["SMDDPCompat", "Horovod", "MultiWorkerMirrored", "DTensor", "ParameterServer"])
def test_check_warns_about_a_cpu_image_on_a_gpu_type(plug_in: str) -> None:
    from smddp_compat.estimators import CpuImageWarning
    from smddp_compat.estimators import sdk3

    config = getattr(sdk3, plug_in)()
    with pytest.warns(CpuImageWarning, match=r"smddp-compat:tf2.21' has no CUDA: ranks 0-15 .*smddp image --gpu"):
        config.check("ml.p4d.24xlarge", 2, training_image=f"{ECR}/smddp-compat:tf2.21")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CpuImageWarning)
        config.check("ml.p4d.24xlarge", 2, training_image=f"{ECR}/smddp-compat-gpu:tf2.21")
        config.check("ml.p4d.24xlarge", 2)  # no image given: nothing to say
