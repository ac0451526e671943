"""SDK v1 argument names (``train_instance_type``, ``distributions``...): the kit's estimator renames them as SDK v2
renames them, before its own checks, so an estimator cell written for SDK v1 behaves as one with the new names."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap

import pytest

from tests.estimators.conftest import ROLE, tar_members

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}
#: new name -> a value the base arguments below do not already hold
VALUES = {
    "instance_count": 2,
    "instance_type": "ml.c5.4xlarge",
    "max_run": 3600,
    "use_spot_instances": True,
    "max_wait": 7200,
    "volume_size": 50,
    "volume_kms_key": "arn:aws:kms:us-east-1:123456789012:key/smddp-test",
    "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:other",
    "distribution": {"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-x A=1"}},
}


def _sdk_renames() -> dict[str, str]:
    """old -> new for every ``renamed_kwargs("old", "new", ...)`` call in the constructors the kit's estimator runs."""
    from sagemaker.estimator import EstimatorBase, Framework
    from sagemaker.tensorflow import TensorFlow as SdkTensorFlow

    renames = {}
    for init in (EstimatorBase.__init__, Framework.__init__, SdkTensorFlow.__init__):
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(init)))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "renamed_kwargs":
                renames[node.args[0].value] = node.args[1].value
    return renames


SDK_RENAMES = _sdk_renames()


def _base(aws, tiny_script, without: str) -> dict:
    base = dict(entry_point=tiny_script, role=ROLE, instance_type="ml.c5.2xlarge", instance_count=1,
                image_uri=IMAGE, framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session())
    base.pop(without, None)
    return base


def test_the_table_is_every_rename_of_the_sdk():
    from smddp_compat.estimators._tensorflow_estimator import SDK_V1_ARGUMENT_NAMES

    assert SDK_V1_ARGUMENT_NAMES == SDK_RENAMES
    assert set(VALUES) == set(SDK_RENAMES.values())  # every rename is tested below


@pytest.mark.parametrize("old", sorted(SDK_RENAMES))
def test_old_name_gives_what_the_sdk_gives(aws, tiny_script, old):
    from sagemaker.tensorflow import TensorFlow as SdkTensorFlow

    from smddp_compat.estimators import TensorFlow

    new = SDK_RENAMES[old]
    value = VALUES[new]
    # The kit's default model_dir (a folder its image's TensorFlow can save to) given to the SDK's estimator too.
    sdk = SdkTensorFlow(**_base(aws, tiny_script, new), model_dir="/opt/ml/model", **{old: value})
    with pytest.warns(DeprecationWarning, match=f"{old} has been renamed"):  # the SDK's own notice
        kit = TensorFlow(**_base(aws, tiny_script, new), **{old: value})
    kit_new_name = TensorFlow(**_base(aws, tiny_script, new), **{new: value})
    assert getattr(sdk, new) == value
    if new != "distribution":  # the kit keeps its checked distribution, every default filled in
        assert getattr(kit, new) == getattr(sdk, new) == getattr(kit_new_name, new)
    assert kit.hyperparameters() == sdk.hyperparameters() == kit_new_name.hyperparameters()
    assert kit.distribution == kit_new_name.distribution
    assert kit.compat_distribution == kit_new_name.compat_distribution


def test_old_and_new_name_together_the_old_one_wins_as_in_the_sdk(aws, tiny_script):
    from sagemaker.tensorflow import TensorFlow as SdkTensorFlow

    from smddp_compat.estimators import TensorFlow

    both = dict(instance_count=1, train_instance_count=2, distribution=SMDDP, distributions=VALUES["distribution"])
    sdk = SdkTensorFlow(**_base(aws, tiny_script, "instance_count"), model_dir="/opt/ml/model", **both)
    kit = TensorFlow(**_base(aws, tiny_script, "instance_count"), **both)
    assert kit.instance_count == sdk.instance_count == 2
    assert kit.distribution_plan.kind == "mpi" and kit.hyperparameters() == sdk.hyperparameters()


def test_checks_see_the_old_names(aws, tiny_script):
    from smddp_compat.estimators import ConfigurationError, TensorFlow, UnknownInstanceTypeError

    base = _base(aws, tiny_script, "instance_type")
    with pytest.raises(UnknownInstanceTypeError, match="ml.zz9.huge"):
        TensorFlow(**base, train_instance_type="ml.zz9.huge")
    with pytest.raises(ConfigurationError, match="processes_per_host"):
        TensorFlow(**base, train_instance_type="ml.c5.xlarge",
                   distributions={"mpi": {"enabled": True, "processes_per_host": 5}})
    with pytest.raises(ConfigurationError, match="max_run"):
        TensorFlow(**base, instance_type="ml.c5.xlarge", train_max_run=0)


def test_smdistributed_under_old_names_ships_the_kit(aws, tiny_script, tmp_path):
    """The issue's case: ``train_instance_type='ml.p4d.24xlarge', distributions={'smdistributed': ...}`` is the
    kit's SMDDP launch, its bundle carrying smddp_compat and the smdistributed alias, as with the new names."""
    from smddp_compat.estimators import TensorFlow

    requests = {}
    for names in (("train_instance_type", "train_instance_count", "distributions"),
                  ("instance_type", "instance_count", "distribution")):
        base = _base(aws, tiny_script, "instance_type")
        del base["instance_count"]
        est = TensorFlow(**base, **dict(zip(names, ("ml.p4d.24xlarge", 2, SMDDP))))
        assert est.distribution_plan.kind == "smddp"
        est.fit({"train": "s3://smddp-test-input/train"}, wait=False, job_name=f"v1-names-{len(requests)}")
        request = aws.requests[-1]
        uri = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
        members = tar_members(aws.download(uri, str(tmp_path / f"source-{len(requests)}.tar.gz")))
        assert "smddp_compat/__init__.py" in members
        assert "smdistributed/dataparallel/tensorflow/__init__.py" in members
        requests[names[0]] = request
    old, new = requests["train_instance_type"], requests["instance_type"]
    for request in (old, new):  # what names the job (and its S3 prefix) differs
        del request["TrainingJobName"]
        for key in ("sagemaker_job_name", "sagemaker_submit_directory", "model_dir"):
            del request["HyperParameters"][key]
    assert old == new
    assert new["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert new["Environment"]["SMDDP_COMPAT_DISTRIBUTION"] == "smddp"
    assert new["ResourceConfig"]["InstanceCount"] == 2
