"""smddp_compat.estimators.TensorFlow (SDK v2) against moto's server: the uploaded code and the CreateTrainingJob request."""

from __future__ import annotations

import json
import os

import pytest

import smddp_compat

from tests.estimators.conftest import ACCESS_KEY, ROLE, SECRET_KEY, tar_members

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}


def _estimator(aws, entry_point, **kwargs):
    from smddp_compat.estimators import TensorFlow

    defaults = dict(
        entry_point=entry_point,
        role=ROLE,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        image_uri=IMAGE,
        framework_version="2.21",
        py_version="py311",
        sagemaker_session=aws.sagemaker_session(),
    )
    defaults.update(kwargs)
    return TensorFlow(**defaults)


def _source_tarball(aws, estimator, tmp_path):
    uri = json.loads(estimator.latest_training_job.describe()["HyperParameters"]["sagemaker_submit_directory"])
    return tar_members(aws.download(uri, str(tmp_path / "sourcedir.tar.gz")))


def test_smdistributed_is_sagemakers_smddp_launch_with_compat_shipped(aws, tiny_script, tmp_path):
    est = _estimator(aws, tiny_script, distribution={
        "smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-x NCCL_DEBUG=INFO"}}
    }, hyperparameters={"epochs": 3, "model": "mlp"})
    est.fit({"train": "s3://smddp-test-input/train"}, wait=False, job_name="smddp-job-1")

    request = aws.requests[-1]
    assert request["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert request["RoleArn"] == ROLE
    assert request["Environment"]["SMDDP_COMPAT_DISTRIBUTION"] == "smddp"
    hps = request["HyperParameters"]
    # The hyperparameters the SDK sends for SMDDP on TF 2.11: the toolkit starts one process per GPU itself.
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert json.loads(hps["sagemaker_instance_type"]) == "ml.p4d.24xlarge"
    assert json.loads(hps["sagemaker_distributed_dataparallel_custom_mpi_options"]) == "-x NCCL_DEBUG=INFO"
    assert json.loads(hps["sagemaker_program"]) == "train.py"
    # Not the SDK's s3:// default, which TensorFlow 2.21 cannot save to: the host's model folder (model.tar.gz).
    assert json.loads(hps["model_dir"]) == "/opt/ml/model"
    assert hps["epochs"] == "3" and json.loads(hps["model"]) == "mlp"
    assert not any(k.startswith("sagemaker_mpi") for k in hps)

    described = aws.client("sagemaker").describe_training_job(TrainingJobName="smddp-job-1")
    assert described["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert described["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert "smddp-job-1" in aws.training_jobs()

    members = _source_tarball(aws, est, tmp_path)
    assert "train.py" in members
    assert "smddp_compat/__init__.py" in members
    assert "smddp_compat/tensorflow/__init__.py" in members
    assert "smdistributed/dataparallel/tensorflow/__init__.py" in members
    assert b"smddp_compat.tensorflow" in members["smdistributed/dataparallel/tensorflow/__init__.py"]
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in members)
    # Only the runtime travels: no command module (the smddp CLI, doctor) and none of the kit's other parts.
    shipped = {name.split("/")[1].removesuffix(".py") for name in members if name.startswith("smddp_compat/")}
    assert "launcher" in shipped and "contract" in shipped, sorted(shipped)
    assert not shipped & set(smddp_compat.NAMESPACE_PARTS), sorted(shipped)
    # The estimator's own fields are restored after fit (the staged directory is gone).
    assert est.entry_point == tiny_script and est.source_dir is None


def test_cpu_instance_leaves_the_process_count_to_the_toolkit(aws, tiny_script):
    est = _estimator(aws, tiny_script, instance_type="ml.c5.2xlarge", instance_count=1, distribution=SMDDP)
    est.fit(wait=False, job_name="smddp-cpu")
    hps = aws.requests[-1]["HyperParameters"]
    assert json.loads(hps["sagemaker_instance_type"]) == "ml.c5.2xlarge"
    assert "sagemaker_mpi_num_of_processes_per_host" not in hps  # the toolkit: one process per host on CPU types


def test_processes_per_host_override(aws, tiny_script):
    est = _estimator(aws, tiny_script, distribution={
        "smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 4}}})
    est.fit(wait=False, job_name="smddp-pph")
    assert aws.requests[-1]["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] == "4"


def test_custom_mpi_options_with_shell_metacharacters_pass_literally(aws, tiny_script, tmp_path):
    options = "; touch /tmp/pwned-smddp-estimator $(id) `id`"
    est = _estimator(aws, tiny_script, distribution={
        "smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": options}}})
    est.fit(wait=False, job_name="smddp-metachar")
    hps = aws.client("sagemaker").describe_training_job(TrainingJobName="smddp-metachar")["HyperParameters"]
    # Submitting runs nothing here: what can be checked is that the string travels to SageMaker unchanged. What the
    # container does with it is tested where it is used (the drivers' and the twin's tests).
    assert json.loads(hps["sagemaker_distributed_dataparallel_custom_mpi_options"]) == options


def test_dtensor_ships_launcher_as_entry_point(aws, tiny_script, tmp_path):
    est = _estimator(aws, tiny_script, instance_type="ml.p3.8xlarge", distribution={
        "dtensor": {"enabled": True, "mesh": {"batch": 4, "model": 2}, "processes_per_host": 2}})
    est.fit(wait=False, job_name="dtensor-job")
    hps = aws.requests[-1]["HyperParameters"]
    assert json.loads(hps["sagemaker_program"]) == "smddp_compat_dtensor_launch.py"
    assert "sagemaker_mpi_enabled" not in hps
    assert aws.requests[-1]["Environment"]["SMDDP_COMPAT_DISTRIBUTION"] == "dtensor"
    members = _source_tarball(aws, est, tmp_path)
    assert {"train.py", "smddp_compat_dtensor_launch.py", "smddp_compat_dtensor.json"} <= set(members)
    config = json.loads(members["smddp_compat_dtensor.json"])
    assert config["entry_point"] == "train.py"
    assert config["dtensor"] == {
        "processes_per_host": 2, "devices_per_process": 2, "device_type": "GPU",
        "mesh": [["batch", 4], ["model", 2]], "port": 9970, "job_name": "worker",
    }


@pytest.mark.parametrize(
    "distribution, expected",
    [
        ({"mpi": {"enabled": True, "processes_per_host": 4, "custom_mpi_options": "-verbose"}},
         {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "4",
          "sagemaker_mpi_custom_mpi_options": '"-verbose"'}),
        ({"multi_worker_mirrored_strategy": {"enabled": True}},
         {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}),
        ({"parameter_server": {"enabled": True}}, {"sagemaker_parameter_server_enabled": "true"}),
    ],
)
def test_sdk_distributions_pass_through(aws, tiny_script, distribution, expected):
    est = _estimator(aws, tiny_script, distribution=distribution)
    est.fit(wait=False, job_name="passthrough")
    hps = aws.requests[-1]["HyperParameters"]
    for key, value in expected.items():
        assert hps[key] == value


def test_source_dir_secrets_are_left_out(aws, tmp_path, monkeypatch):
    source = tmp_path / "project"
    (source / "pkg").mkdir(parents=True)
    (source / "train.py").write_text("print('hi')\n")
    (source / "pkg" / "model.py").write_text("X = 1\n")
    secrets = {
        ".aws/credentials": f"[default]\naws_secret_access_key = {SECRET_KEY}\n",
        ".env": f"AWS_SECRET_ACCESS_KEY={SECRET_KEY}\n",
        "deploy.pem": "-----BEGIN PRIVATE KEY-----\n",
        "pkg/credentials": SECRET_KEY,
        ".git/config": "[core]\n",
        ".venv/bin/python": "",
        "pkg/__pycache__/model.cpython-311.pyc": "",
        ".ssh/id_rsa": "key",
        "id_rsa": "key",
        ".netrc": f"machine example.com password {SECRET_KEY}\n",
        "x.key": "key",
        ".config/gcloud/application_default_credentials.json": SECRET_KEY,
        ".kube/config": SECRET_KEY,
        ".npmrc": f"//registry.npmjs.org/:_authToken={SECRET_KEY}\n",
        ".pypirc": f"[pypi]\npassword = {SECRET_KEY}\n",
        ".cache/huggingface/token": SECRET_KEY,
        ".bash_history": f"export AWS_SECRET_ACCESS_KEY={SECRET_KEY}\n",
        "service-account.json": SECRET_KEY,
        "server.key.bak": SECRET_KEY,
    }
    for rel, text in secrets.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    outside = tmp_path / "outside-secret.txt"
    outside.write_text(SECRET_KEY)
    (source / "innocent.txt").symlink_to(outside)

    est = _estimator(aws, "train.py", source_dir=str(source), distribution=SMDDP,
                     hyperparameters={"lr": 0.1}, environment={"MY_SETTING": "1"})
    est.fit(wait=False, job_name="no-secrets")
    members = _source_tarball(aws, est, tmp_path)
    assert {"train.py", "pkg/model.py"} <= set(members)
    for rel in list(secrets) + ["innocent.txt"]:
        assert rel not in members, rel
    for name, content in members.items():
        assert SECRET_KEY.encode() not in content, name
        assert ACCESS_KEY.encode() not in content, name
    request = json.dumps(aws.requests[-1])
    assert SECRET_KEY not in request and ACCESS_KEY not in request
    assert aws.requests[-1]["Environment"] == {"MY_SETTING": "1", "SMDDP_COMPAT_DISTRIBUTION": "smddp"}


def test_aws_image_is_resolved_for_published_versions(aws, tiny_script):
    from sagemaker import image_uris

    est = _estimator(aws, tiny_script, image_uri=None, framework_version="2.16", py_version="py310",
                     distribution=SMDDP)
    est.fit(wait=False, job_name="aws-image")
    expected = image_uris.retrieve("tensorflow", "us-east-1", version="2.16", py_version="py310",
                                   instance_type="ml.p4d.24xlarge", image_scope="training")
    assert aws.requests[-1]["AlgorithmSpecification"]["TrainingImage"] == expected
    assert "tensorflow-training:2.16-gpu-py310" in expected


def _complete_moto_description(parsed, **_):
    # moto's DescribeTrainingJob leaves out OutputDataConfig.KmsKeyId, which real SageMaker always returns
    # (empty when unset) and the SDK's attach() reads. Test-side fix of moto's response only.
    if isinstance(parsed, dict) and "OutputDataConfig" in parsed:
        parsed["OutputDataConfig"].setdefault("KmsKeyId", "")


def test_attach_and_listing(aws, tiny_script):
    from smddp_compat.estimators import TensorFlow

    est = _estimator(aws, tiny_script, distribution=SMDDP)
    est.fit(wait=False, job_name="attach-me")
    session = aws.sagemaker_session()
    session.sagemaker_client.meta.events.register("after-call.sagemaker.DescribeTrainingJob",
                                                  lambda parsed, **kw: _complete_moto_description(parsed))
    attached = TensorFlow.attach("attach-me", sagemaker_session=session)
    assert isinstance(attached, TensorFlow)
    assert attached.instance_count == 2 and attached.instance_type == "ml.p4d.24xlarge"
    assert attached.image_uri == IMAGE
    assert attached.latest_training_job.name == "attach-me"
    summaries = aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in summaries] == ["attach-me"]


def test_docker_local_mode_keeps_the_sdk_local_session(aws, tiny_script):
    """instance_type="local" stays the SDK's Docker local mode; the hosts share this machine's CPUs."""
    from sagemaker.local import LocalSession

    from smddp_compat.estimators import TensorFlow

    est = TensorFlow(entry_point=tiny_script, instance_type="local", instance_count=2, image_uri="smddp-compat:local",
                     framework_version="2.21", py_version="py311", distribution=SMDDP)
    assert isinstance(est.sagemaker_session, LocalSession)
    hyperparameters = est.hyperparameters()
    assert hyperparameters["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert json.loads(hyperparameters["sagemaker_instance_type"]) == "local"
    assert est.role.startswith("arn:aws:iam::") and aws.requests == []
