"""``instance_type="local_process"`` gives the script what SageMaker gives it: the arguments, ``SM_HPS``,
``hyperparameters.json`` and the job's environment of the request the estimator sends for the same job, ``model_dir``
included, each path of the container's tree (``/opt/ml/...``) in the host's own tree and an ``s3://`` model_dir the
host's model folder."""

from __future__ import annotations

import glob
import json
import os
import tarfile

import pytest

from smddp_compat.contract import SAGEMAKER_PREFIX, cmd_args
from tests.estimators.conftest import ROLE

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

pytestmark = pytest.mark.processes

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
PROBE = """\
import json, os, sys
config = os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")
name = os.environ.get("HOROVOD_RANK") or os.environ["SM_CURRENT_HOST"]
with open(os.path.join(os.environ["PROBE_DIR"], f"probe-{name}.json"), "w") as out:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "file": json.load(open(config))}, out)
"""
#: case -> the estimator's arguments besides the common ones
CASES = {
    "mpi-default": {"distribution": {"mpi": {"enabled": True}}, "instance_count": 2},  # SDK: /opt/ml/model
    "single-default": {},  # the SDK: s3://<bucket>/<job>/model; the kit: /opt/ml/model (TF 2.21 writes no S3)
    "given-s3": {"model_dir": "s3://smddp-test-models/run-1"},
    "given-container-path": {"model_dir": "/opt/ml/model/export", "distribution": {"mpi": {"enabled": True}}},
    "off": {"model_dir": False},
}


def _on_host(value, model_dir):
    """A request's value as the host whose SM_MODEL_DIR is ``model_dir`` must see it."""
    if isinstance(value, str) and value.startswith("s3://"):
        return model_dir
    if isinstance(value, str) and value.startswith("/opt/ml/"):
        return os.path.join(os.path.dirname(model_dir), value[len("/opt/ml/"):])
    return value


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_sees_the_request_with_paths_on_its_host(aws, tmp_path, case):
    from smddp_compat.estimators import TensorFlow

    script = tmp_path / "code" / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    probes = tmp_path / "probes"
    probes.mkdir()
    common = dict(entry_point=str(script), role=ROLE, framework_version="2.21", py_version="py311",
                  hyperparameters={"epochs": 3, "learning-rate": 0.01, "optimizer": "adam", "layers": [64, 32]},
                  environment={"PROBE_DIR": str(probes)}, **CASES[case])
    TensorFlow(instance_type="ml.c5.2xlarge", image_uri=IMAGE, sagemaker_session=aws.sagemaker_session(),
               **common).fit(wait=False, job_name=f"model-dir-{case}")
    request = aws.requests[-1]
    TensorFlow(instance_type="local_process", output_path=str(tmp_path / "out"), **common).fit(
        job_name=f"model-dir-{case}")

    sent = {name: json.loads(value) for name, value in request["HyperParameters"].items()
            if not name.startswith(SAGEMAKER_PREFIX)}
    assert ("model_dir" in sent) == (case != "off")
    seen = [json.load(open(path)) for path in sorted(glob.glob(str(probes / "probe-*.json")))]
    assert len(seen) == common.get("instance_count", 1)
    for probe in seen:
        env = probe["env"]
        expected = {name: _on_host(value, env["SM_MODEL_DIR"]) for name, value in sent.items()}
        assert probe["argv"] == cmd_args(expected)  # the toolkit's arguments of the request's hyperparameters
        assert json.loads(env["SM_USER_ARGS"]) == probe["argv"]
        assert json.loads(env["SM_HPS"]) == expected
        assert {n: json.loads(v) for n, v in probe["file"].items() if not n.startswith(SAGEMAKER_PREFIX)} == expected
        assert {name: env[name] for name in request["Environment"]} == request["Environment"]
        if case != "off":
            assert env["SM_HP_MODEL_DIR"] == expected["model_dir"]
            assert expected["model_dir"].startswith(env["SM_MODEL_DIR"])  # the host's own model folder
    assert len({probe["env"]["SM_MODEL_DIR"] for probe in seen}) == len(seen)  # each host its own folder


HOROVOD_NOTEBOOK_SCRIPT = """\
import argparse, json, os

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", type=str)  # no default: SageMaker always passes it
parser.add_argument("--epochs", type=int, default=1)
args, _ = parser.parse_known_args()
if os.environ.get("HOROVOD_RANK", "0") == "0":  # the chief saves, as Horovod scripts do
    with open(os.path.join(args.model_dir, "weights.json"), "w") as out:
        json.dump({"epochs": args.epochs}, out)
"""


def test_an_sdk_v1_estimator_cell_runs_a_script_that_saves_into_model_dir(tmp_path):
    """The shape of SageMaker's Horovod examples: an estimator cell written for SDK v1 (``train_instance_type``,
    ``train_instance_count``, ``distributions``) and a script that saves to ``os.path.join(args.model_dir, ...)``."""
    from smddp_compat.estimators import TensorFlow

    script = tmp_path / "mnist_hvd.py"
    script.write_text(HOROVOD_NOTEBOOK_SCRIPT)
    with pytest.warns(DeprecationWarning, match="train_instance_type has been renamed"):
        estimator = TensorFlow(entry_point=str(script), role=ROLE, framework_version="2.21", py_version="py311",
                               train_instance_count=2, train_instance_type="local_process",
                               distributions={"mpi": {"enabled": True, "processes_per_host": 1}},
                               hyperparameters={"epochs": 2}, output_path=str(tmp_path / "out"))
    result = estimator.fit(job_name="hvd-v1-cell")
    assert result.ok and estimator.distribution_plan.kind == "mpi"
    with tarfile.open(estimator.model_data) as model:
        assert json.load(model.extractfile("weights.json")) == {"epochs": 2}


def test_smddp_local_gives_the_script_the_model_dir_the_estimator_gives_it(tmp_path):
    """The same script run by ``smddp local --distribution mpi`` (AWS's Horovod example's shape): it gets
    ``--model_dir`` (its host's model folder) and saves there, as the estimator's job does; ``--model-dir none``
    sends none, as ``model_dir=False`` does."""
    from smddp_compat.commands.local_cli import main

    script = tmp_path / "mnist_hvd.py"
    script.write_text(HOROVOD_NOTEBOOK_SCRIPT)
    common = [str(script), "--distribution", "mpi", "--instance-count", "2", "--hyperparameters", "epochs=2",
              "--output", str(tmp_path / "out")]
    assert main([*common, "--job-name", "hvd-cli"]) == 0
    with tarfile.open(tmp_path / "out" / "hvd-cli" / "output" / "model.tar.gz") as model:
        assert json.load(model.extractfile("weights.json")) == {"epochs": 2}
    assert main([*common, "--job-name", "hvd-cli-none", "--model-dir", "none"]) == 1  # os.path.join(None, ...)
