"""Bad inputs to estimators.TensorFlow: each fails at construction, naming the field and the fix, before any upload.

Every case runs against moto's server and then checks that no S3 object and no training job exist.
"""

from __future__ import annotations

import pytest

from tests.estimators.conftest import ROLE

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}

# (case id, overrides of the good arguments, field named in the error, words of the fix)
BAD_INPUTS = [
    ("unknown-instance-type", {"instance_type": "ml.zz9.huge"}, "instance_type", "smddp_compat.estimators.known_instance_types()"),
    ("instance-type-without-ml", {"instance_type": "p3.16xlarge"}, "instance_type", "'ml.p3.16xlarge'"),
    ("instance-type-typo", {"instance_type": "ml.p4d.24xlarg"}, "instance_type", "did you mean 'ml.p4d.24xlarge'"),
    ("instance-count-0", {"instance_count": 0}, "instance_count", "instance_count=1"),
    ("instance-count-bool", {"instance_count": True}, "instance_count", "integer"),
    ("role-bare-name", {"role": "SageMakerRole"}, "role", "arn:aws:iam::"),
    ("role-malformed-arn", {"role": "arn:aws:iam::12:role/x"}, "role", "arn:aws:iam::"),
    ("role-missing", {"role": None}, "role", "arn:aws:iam::"),
    ("unknown-distribution", {"distribution": {"horovod": {"enabled": True}}}, "distribution", "smdistributed"),
    ("two-distributions", {"distribution": {**SMDDP, "mpi": {"enabled": True}}}, "distribution", "exactly one"),
    ("smp-model-parallel", {"distribution": {"smdistributed": {"modelparallel": {"enabled": True}}}},
     "distribution['smdistributed']", "dtensor"),
    ("dataparallel-typo-key",
     {"distribution": {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_option": "-v"}}}},
     "distribution['smdistributed']['dataparallel']", "custom_mpi_options"),
    ("enabled-not-bool", {"distribution": {"smdistributed": {"dataparallel": {"enabled": "yes"}}}},
     "distribution['smdistributed']['dataparallel']['enabled']", "bool"),
    ("mpi-options-not-str",
     {"distribution": {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": ["-v"]}}}},
     "custom_mpi_options", "one string"),
    ("processes-per-host-0", {"distribution": {"mpi": {"enabled": True, "processes_per_host": 0}}},
     "processes_per_host", "positive integer"),
    ("processes-exceed-gpus", {"distribution": {"mpi": {"enabled": True, "processes_per_host": 9}}},
     "processes_per_host", "<= 8"),
    ("smddp-processes-exceed-vcpus",
     {"instance_type": "ml.c5.xlarge",
      "distribution": {"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 5}}}},
     "processes_per_host", "<= 4"),
    ("dtensor-mesh-does-not-fill",
     {"distribution": {"dtensor": {"enabled": True, "mesh": {"batch": 6}}}}, "distribution['dtensor']['mesh']",
     "product of the mesh sizes 16"),
    ("dtensor-mesh-bad-size", {"distribution": {"dtensor": {"enabled": True, "mesh": {"batch": 0}}}},
     "distribution['dtensor']['mesh']", ">= 1"),
    ("dtensor-clients-do-not-share-gpus",
     {"distribution": {"dtensor": {"enabled": True, "processes_per_host": 3}}},
     "distribution['dtensor']['processes_per_host']", "divisor of 8"),
    ("dtensor-gpu-on-cpu-type",
     {"instance_type": "ml.c5.2xlarge", "distribution": {"dtensor": {"enabled": True, "device_type": "GPU"}}},
     "distribution['dtensor']['device_type']", "device_type='CPU'"),
    ("dtensor-bad-port", {"distribution": {"dtensor": {"enabled": True, "port": 80}}},
     "distribution['dtensor']['port']", "9970"),
    ("no-image-for-tf-2.21", {"image_uri": None}, "framework_version", "image_uri="),
    ("no-py-version", {"image_uri": None, "framework_version": "2.16", "py_version": None}, "py_version",
     "py_version='py310'"),
    ("missing-entry-point", {"entry_point": "does_not_exist.py"}, "entry_point", "existing training script"),
    ("missing-source-dir", {"source_dir": "/nonexistent/code", "entry_point": "train.py"}, "source_dir",
     "directory holding your code"),
    ("s3-entry-point", {"entry_point": "s3://bucket/train.py"}, "entry_point", "local path"),
    ("hyperparameter-not-json", {"hyperparameters": {"optimizer": object()}}, "hyperparameters['optimizer']",
     "str, int, float"),
    ("hyperparameters-not-dict", {"hyperparameters": ["epochs", 3]}, "hyperparameters", "dictionary"),
    ("s3-source-dir-with-smddp", {"source_dir": "s3://bucket/code.tar.gz", "entry_point": "train.py"},
     "source_dir", "local source_dir"),
    ("git-config", {"git_config": {"repo": "https://example.invalid/r.git"}}, "git_config", "clone"),
]


@pytest.mark.parametrize("overrides, field, fix", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_fails_before_any_upload(aws, tiny_script, overrides, field, fix):
    from smddp_compat.estimators import ConfigurationError, TensorFlow

    kwargs = dict(
        entry_point=tiny_script, role=ROLE, instance_type="ml.p4d.24xlarge", instance_count=2, image_uri=IMAGE,
        framework_version="2.21", py_version="py311", distribution=SMDDP, sagemaker_session=aws.sagemaker_session(),
    )
    kwargs.update(overrides)
    with pytest.raises(ConfigurationError) as info:
        est = TensorFlow(**kwargs)
        est.fit(wait=False, job_name="must-not-start")  # reached only if construction wrongly succeeded
    message = str(info.value)
    assert info.value.field.startswith(field) or field in info.value.field, message
    assert "Fix:" in message and fix in message, message
    assert aws.all_objects() == []
    assert aws.training_jobs() == []
    assert aws.requests == []


def test_good_input_is_accepted_and_uploads(aws, tiny_script):
    """The baseline of the table: the same arguments without a mistake do start a job."""
    from smddp_compat.estimators import TensorFlow

    TensorFlow(
        entry_point=tiny_script, role=ROLE, instance_type="ml.p4d.24xlarge", instance_count=2, image_uri=IMAGE,
        framework_version="2.21", py_version="py311", distribution=SMDDP, sagemaker_session=aws.sagemaker_session(),
    ).fit(wait=False, job_name="good-job")
    assert aws.training_jobs() == ["good-job"]
    assert any(key.endswith("sourcedir.tar.gz") for _, key in aws.all_objects())


def test_errors_share_one_base_class():
    from smddp_compat import errors
    from smddp_compat.estimators import (ConfigurationError, EstimatorError, JobError, NoPublishedImageError,
                                         UnknownInstanceTypeError)

    # The user's mistakes are the kit's one ConfigurationError (a ValueError); the estimators' own failures
    # EstimatorErrors; both SmddpErrors.
    assert ConfigurationError is errors.ConfigurationError and issubclass(ConfigurationError, ValueError)
    assert issubclass(NoPublishedImageError, ConfigurationError)
    assert issubclass(UnknownInstanceTypeError, ConfigurationError)
    assert issubclass(JobError, EstimatorError) and issubclass(EstimatorError, errors.SmddpError)
