"""The right image for the instance type: a GPU type given an image without CUDA is warned about, by name, before any
upload (estimators.TensorFlow, ``smddp submit``, the twin); the rule that tells a CUDA image from a CPU-only one.

No Docker: the v2 estimator and ``smddp submit`` run against moto's server, the twin's check against a stand-in
``docker`` command.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

import pytest

from smddp_compat.estimators import CpuImageWarning, check_image_for_instance_type, image_cuda
from tests.estimators.conftest import ROLE

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
CPU_IMAGE = f"{ECR}/smddp-compat:tf2.21"
GPU_IMAGE = f"{ECR}/smddp-compat-gpu:tf2.21"


@pytest.mark.parametrize(
    "image, expected",
    [
        ("smddp-compat:latest", "none"),  # the kit's CPU image, local tag
        ("smddp-compat:7f1bb1d263adada8", "none"),
        (CPU_IMAGE, "none"),  # the CPU image pushed under its own name
        ("localhost:5000/smddp-compat:x", "none"),  # a registry with a port is not the tag
        ("smddp-compat-gpu:latest", "cuda"),
        (GPU_IMAGE, "cuda"),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.19.0-gpu-py312-cu125-ubuntu22.04-sagemaker",
         "cuda"),  # AWS's own GPU image
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.19.0-cpu-py312-ubuntu22.04-sagemaker",
         "none"),  # AWS's own CPU image
        (f"{ECR}/team/trainer:cu124-v3", "cuda"),
        (f"{ECR}/team/trainer:v3", "unknown"),  # a name that says nothing: nothing is said
        ("gpu.example.com/trainer:v3", "unknown"),  # the registry's host name does not count
        (f"{ECR}/smddp-compat@sha256:{'0' * 64}", "none"),
    ],
)
def test_the_name_rule(image: str, expected: str) -> None:
    assert image_cuda(image) == expected


def test_the_label_wins_over_the_name() -> None:
    assert image_cuda("my-trainer:v1", {"org.smddp-compat.cuda": "12"}) == "cuda"
    assert image_cuda("my-trainer:gpu", {"org.smddp-compat.cuda": "none"}) == "none"
    assert image_cuda("smddp-compat:latest", {"other": "x"}) == "none"  # no label of ours: the name decides


def test_the_message_names_the_image_the_ranks_and_the_fix() -> None:
    with pytest.warns(CpuImageWarning) as said:
        message = check_image_for_instance_type(CPU_IMAGE, "ml.p4d.24xlarge", 2)
    assert message is not None and str(said[0].message) == message
    assert f"image '{CPU_IMAGE}' has no CUDA: ranks 0-15 (2 x ml.p4d.24xlarge, 8 GPU(s) each)" in message
    assert "would train on the CPU" in message and "smddp image --gpu" in message
    single = check_image_for_instance_type("smddp-compat:latest", "ml.g5.xlarge", 1, warn=False)
    assert single is not None and "rank 0 (1 x ml.g5.xlarge" in single


@pytest.mark.parametrize(
    "image, instance_type",
    [(GPU_IMAGE, "ml.p4d.24xlarge"), (CPU_IMAGE, "ml.c5.xlarge"), (f"{ECR}/trainer:v3", "ml.p5.48xlarge"),
     (None, "ml.p4d.24xlarge")],
)
def test_nothing_is_said_when_the_image_fits_or_cannot_be_told(image: str | None, instance_type: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CpuImageWarning)
        assert check_image_for_instance_type(image, instance_type, 2) is None


# -- estimators.TensorFlow (SDK v2) and smddp submit -------------------------------------------------------------------


def _v2_kwargs(aws, tiny_script, **overrides):
    kwargs = dict(
        entry_point=tiny_script, role=ROLE, instance_type="ml.p4d.24xlarge", instance_count=2, image_uri=CPU_IMAGE,
        framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session(),
        distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
    )
    kwargs.update(overrides)
    return kwargs


def test_v2_estimator_warns_before_any_upload(aws, tiny_script) -> None:
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.estimators import TensorFlow

    with warnings.catch_warnings():
        warnings.simplefilter("error", CpuImageWarning)  # the user's way to make it a refusal
        with pytest.raises(CpuImageWarning, match=r"smddp-compat:tf2.21' has no CUDA: ranks 0-15 .*smddp image --gpu"):
            TensorFlow(**_v2_kwargs(aws, tiny_script)).fit(wait=False, job_name="must-not-start")
    assert aws.all_objects() == [] and aws.training_jobs() == [] and aws.requests == []


def test_v2_estimator_is_quiet_with_the_gpu_image(aws, tiny_script) -> None:
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.estimators import TensorFlow

    with warnings.catch_warnings():
        warnings.simplefilter("error", CpuImageWarning)
        TensorFlow(**_v2_kwargs(aws, tiny_script, image_uri=GPU_IMAGE))
        TensorFlow(**_v2_kwargs(aws, tiny_script, instance_type="ml.c5.xlarge", distribution=None))


def test_smddp_submit_says_it_before_uploading(aws, tiny_script, capsys) -> None:
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.commands.submit_cli import main

    argv = ["submit", tiny_script, "--instance-type", "ml.p3.16xlarge", "--instance-count", "2", "--role", ROLE,
            "--image-uri", CPU_IMAGE, "--region", "us-east-1", "--job-name", "cpu-image-on-gpu"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    said = f"smddp submit: warning: image '{CPU_IMAGE}' has no CUDA: ranks 0-15 (2 x ml.p3.16xlarge"
    assert said in err and "smddp image --gpu" in err, err
    upload = err.find("uploaded")
    assert upload == -1 or err.find(said) < upload, err
    assert aws.training_jobs() == ["cpu-image-on-gpu"]  # a warning, not a refusal: the job still starts


# -- the twin ------------------------------------------------------------------------------------------------------------


def _docker_stand_in(tmp_path: Path, labels_json: str) -> str:
    script = tmp_path / "docker"
    script.write_text(f"#!/bin/sh\necho '{labels_json}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


class _Engine:
    def __init__(self, docker: str) -> None:
        self.docker = docker


class _Request:
    def __init__(self, image: str, instance_type: str, instance_count: int = 2) -> None:
        self.image, self.instance_type, self.instance_count = image, instance_type, instance_count


@pytest.mark.processes
@pytest.mark.parametrize(
    "labels, image, instance_type, said",
    [
        ('{"org.smddp-compat.cuda":"none"}', "my-image:v1", "ml.p4d.24xlarge", True),  # label: CPU image
        ('{"org.smddp-compat.cuda":"12"}', "smddp-compat:latest", "ml.p4d.24xlarge", False),  # label: GPU image
        ("null", "smddp-compat:latest", "ml.p4d.24xlarge", True),  # no labels: the name decides
        ("null", "smddp-compat-gpu:latest", "ml.p4d.24xlarge", False),
        ('{"org.smddp-compat.cuda":"none"}', "smddp-compat:latest", "ml.c5.xlarge", False),  # a CPU type
    ],
)
def test_the_twin_reads_the_label_then_the_name(tmp_path, labels, image, instance_type, said) -> None:
    from smddp_compat.local_mode.docker.twin import _cpu_image_on_gpu

    problems = _cpu_image_on_gpu(_Engine(_docker_stand_in(tmp_path, labels)), _Request(image, instance_type))
    if said:
        (line,) = problems
        assert line.startswith(f"on SageMaker, image '{image}' has no CUDA: ranks 0-15 (2 x {instance_type}")
        assert line.endswith("here every host runs on the CPU anyway, with stand-in GPUs")
    else:
        assert problems == []
    assert os.path.exists(tmp_path / "docker")
