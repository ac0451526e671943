"""smddp_compat.estimators.sdk3 (every config) in ModelTrainer, against moto's server. Runs in .venv-sdk3 only:

    bash estimators/sdk3/setup_venv.sh && .venv-sdk3/bin/python -m pytest tests/estimators/sdk3 -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.estimators.conftest import REPO, ROLE, SECRET_KEY, tar_members

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"


def _session():
    import boto3
    from sagemaker.core.helper.session_helper import Session

    return Session(boto_session=boto3.Session(region_name="us-east-1"))


def _trainer(code_dir, distributed, **kwargs):
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import Compute, SourceCode

    from smddp_compat.estimators.sdk3 import SOURCE_IGNORE_PATTERNS

    return ModelTrainer(
        training_image=IMAGE,
        role=ROLE,
        sagemaker_session=_session(),
        source_code=SourceCode(source_dir=code_dir, entry_script="train.py", ignore_patterns=SOURCE_IGNORE_PATTERNS),
        compute=Compute(instance_type=kwargs.pop("instance_type", "ml.p4d.24xlarge"),
                        instance_count=kwargs.pop("instance_count", 2)),
        distributed=distributed,
        hyperparameters={"epochs": 3},
        base_job_name="sdk3",
        **kwargs,
    )


def _channel_files(aws, job, channel):
    """Every object of one input channel of a job, relative to the channel's prefix, with content."""
    description = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    (config,) = [c for c in description["InputDataConfig"] if c["ChannelName"] == channel]
    uri = config["DataSource"]["S3DataSource"]["S3Uri"].rstrip("/")
    bucket, prefix = uri[5:].split("/", 1)
    s3 = aws.client("s3")
    out = {}
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", []):
        out[obj["Key"][len(prefix) + 1:]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def _only_job(aws):
    jobs = aws.training_jobs()
    assert len(jobs) == 1, jobs
    return jobs[0]


@pytest.mark.processes
def test_module_imports_only_sdk3_and_no_tensorflow():
    code = "import sys, smddp_compat.estimators.sdk3; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_smddp_compat_job_ships_its_driver_and_compat(aws, tiny_script):
    from smddp_compat.estimators.sdk3 import SMDDPCompat

    code_dir = os.path.dirname(tiny_script)
    with open(os.path.join(code_dir, ".env"), "w") as handle:
        handle.write(f"AWS_SECRET_ACCESS_KEY={SECRET_KEY}\n")
    os.makedirs(os.path.join(code_dir, ".aws"))
    with open(os.path.join(code_dir, ".aws", "credentials"), "w") as handle:
        handle.write(f"aws_secret_access_key = {SECRET_KEY}\n")
    with open(os.path.join(code_dir, "deploy.pem"), "w") as handle:
        handle.write(SECRET_KEY)
    config = SMDDPCompat(custom_mpi_options="; touch /tmp/pwned-sdk3")
    _trainer(code_dir, config).train(wait=False)
    job = _only_job(aws)
    description = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert description["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert description["ResourceConfig"]["InstanceCount"] == 2
    assert description["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"

    drivers = _channel_files(aws, job, "sm_drivers")
    assert "distributed_drivers/smddp_driver.py" in drivers
    assert "distributed_drivers/hyperparameter_args.py" in drivers
    assert "distributed_drivers/smddp_compat/__init__.py" in drivers
    assert "distributed_drivers/smddp_compat/_shim_root/smdistributed/dataparallel/tensorflow/__init__.py" in drivers
    assert not any("__pycache__" in name for name in drivers if "smddp_compat/" in name)  # ours are clean
    assert b"distributed_drivers/smddp_driver.py" in drivers["sm_train.sh"]
    # the options travel to the driver unchanged (what it does with them: tests/estimators/test_job_drivers.py)
    assert json.loads(drivers["distributed.json"]) == {
        "processes_per_host": None, "custom_mpi_options": "; touch /tmp/pwned-sdk3"}

    code = _channel_files(aws, job, "code")
    assert "train.py" in code
    assert not [name for name in code if name.startswith((".env", ".aws")) or name.endswith(".pem")], sorted(code)
    for name, content in {**code, **drivers}.items():
        assert SECRET_KEY.encode() not in content, name


def test_dtensor_job_ships_its_driver(aws, tiny_script):
    from smddp_compat.estimators.sdk3 import DTensor

    _trainer(os.path.dirname(tiny_script), DTensor(mesh={"batch": 16})).train(wait=False)
    job = _only_job(aws)
    drivers = _channel_files(aws, job, "sm_drivers")
    for name in ("dtensor_driver.py", "dtensor_launch.py", "hyperparameter_args.py"):
        assert f"distributed_drivers/{name}" in drivers
    assert b"distributed_drivers/dtensor_driver.py" in drivers["sm_train.sh"]
    assert json.loads(drivers["distributed.json"])["mesh"] == {"batch": 16}


def test_configs_are_checked(aws):
    from pydantic import ValidationError

    from smddp_compat.estimators import ConfigurationError
    from smddp_compat.estimators.sdk3 import DTensor, SMDDPCompat

    with pytest.raises(ValidationError, match="processes_per_host"):
        SMDDPCompat(processes_per_host=0)
    with pytest.raises(ValidationError, match="extra"):
        SMDDPCompat(procesess_per_host=2)
    with pytest.raises(ValidationError, match="mesh"):
        DTensor(mesh={"batch": 0})
    with pytest.raises(ConfigurationError, match="product of the mesh sizes 16"):
        DTensor(mesh={"batch": 6}).check("ml.p4d.24xlarge", 2)
    with pytest.raises(ConfigurationError, match="<= 8"):
        SMDDPCompat(processes_per_host=9).check("ml.p4d.24xlarge")
    DTensor(mesh={"batch": 16}).check("ml.p4d.24xlarge", 2)
    assert aws.training_jobs() == []


# (config, its fields, the driver and the scripts shipped beside it, SM_DISTRIBUTED_CONFIG, its SDK v2 distribution)
KIT_CONFIGS = [
    ("Horovod", {"processes_per_host": 4}, ("horovod_driver.py", "smddp_driver.py"),
     {"processes_per_host": 4, "custom_mpi_options": None}, {"mpi": {"enabled": True, "processes_per_host": 4}}),
    ("MultiWorkerMirrored", {}, ("mwms_driver.py",), {}, {"multi_worker_mirrored_strategy": {"enabled": True}}),
    ("ParameterServer", {}, ("ps_driver.py",), {}, {"parameter_server": {"enabled": True}}),
]


@pytest.mark.parametrize("name, fields, scripts, sm_distributed_config, v2_distribution", KIT_CONFIGS,
                         ids=[c[0] for c in KIT_CONFIGS])
def test_kit_config_request(aws, tiny_script, name, fields, scripts, sm_distributed_config, v2_distribution):
    """The request each config makes ModelTrainer send: the code and the driver channels, the kit's driver run by
    sm_train.sh with ``smddp_compat/`` beside it, the config's fields as SM_DISTRIBUTED_CONFIG, the hyperparameters."""
    from smddp_compat.estimators import sdk3

    config = getattr(sdk3, name)(**fields)
    assert config.distribution_config().to_sdk_dict() == v2_distribution
    config.check("ml.c5.xlarge", 2)
    _trainer(os.path.dirname(tiny_script), config, instance_type="ml.c5.xlarge").train(wait=False)
    job = _only_job(aws)
    description = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert sorted(c["ChannelName"] for c in description["InputDataConfig"]) == ["code", "sm_drivers"]
    assert description["HyperParameters"] == {"epochs": "3"}
    assert description["ResourceConfig"]["InstanceCount"] == 2
    drivers = _channel_files(aws, job, "sm_drivers")
    for script in (*scripts, "hyperparameter_args.py", "smddp_compat/cluster.py"):
        assert f"distributed_drivers/{script}" in drivers, script
    assert f"/opt/ml/input/data/sm_drivers/distributed_drivers/{scripts[0]}".encode() in drivers["sm_train.sh"]
    assert json.loads(drivers["distributed.json"]) == sm_distributed_config  # the container's SM_DISTRIBUTED_CONFIG
    assert "train.py" in _channel_files(aws, job, "code")


def test_no_distribution_is_sdk3s_own_script_driver(aws, tiny_script):
    """SDK v2 without ``distribution`` runs the script once per host; so does ModelTrainer without ``distributed``
    (its basic script driver): no config of the kit's is needed."""
    _trainer(os.path.dirname(tiny_script), None, instance_type="ml.c5.xlarge").train(wait=False)
    drivers = _channel_files(aws, _only_job(aws), "sm_drivers")
    assert b"sm_drivers/distributed_drivers/basic_script_driver.py" in drivers["sm_train.sh"]
    assert json.loads(drivers["distributed.json"]) == {}
    assert not any("smddp_compat" in name for name in drivers)
