"""After a local_process fit(), the estimator shows the job as the SDK shows a SageMaker job: model_data,
latest_training_job (describe, wait, name), logs(), training_job_analytics, attach(job, local_output=...), and the
job's MLflow run (``mlflow=URI``) read back from a real server; and a local_process run prints none of the SDK v2
notices the kit's wrapping causes and attempts no telemetry."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
from datetime import datetime

import pytest

pytestmark = pytest.mark.processes

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METRICS = [{"Name": "loss", "Regex": r"loss=([0-9.]+)"}, {"Name": "acc", "Regex": r"acc=([0-9.]+)"}]
# A TF-free job: 3 "epochs" of metric lines on every rank, a model file per host, a line only rank 0 prints.
SCRIPT = """\
import argparse, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--model_dir")  # the SDK's hyperparameter, which SageMaker and local_process pass
args = parser.parse_args()
host = os.environ["SM_CURRENT_HOST"]
print(f"starting on {host}", flush=True)
for epoch in range(args.epochs):
    print(f"epoch {epoch} loss={1.0 / (epoch + 1):.4f} acc={0.5 + epoch / 10:.2f}", flush=True)
    time.sleep(0.2)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"weights-{host}.txt"), "w") as f:
    f.write("trained")
if os.environ.get("FAIL_AT_END"):
    raise SystemExit(5)
"""


def _estimator(tmp_path, **kwargs):
    from smddp_compat.estimators import TensorFlow

    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    settings = dict(
        entry_point="train.py", source_dir=str(code), instance_type="local_process", instance_count=2,
        framework_version="2.21", py_version="py311", output_path=str(tmp_path / "out"),
        hyperparameters={"epochs": 3}, metric_definitions=METRICS,
    )
    settings.update(kwargs)
    return TensorFlow(**settings)


def test_fit_shows_the_job_as_the_sdk_does_and_attach_reads_it_back(tmp_path, capsys, mlflow_server):
    from mlflow import MlflowClient
    from smddp_compat.estimators import ConfigurationError, EstimatorError, JobError, TensorFlow
    from sagemaker.estimator import _TrainingJob

    est = _estimator(tmp_path, mlflow=mlflow_server.uri)
    with pytest.raises(EstimatorError, match=r"model_data: .*no training job yet.*fit\(\) first"):
        est.model_data  # noqa: B018 - before fit: a clear error, not the SDK's TypeError
    est.fit(job_name="sdk-view")
    capsys.readouterr()

    # model_data: the job's model.tar.gz, holding both hosts' files
    assert os.path.isabs(est.model_data) and est.model_data.endswith("sdk-view/output/model.tar.gz")
    with tarfile.open(est.model_data) as tar:
        assert sorted(tar.getnames()) == ["weights-algo-1.txt", "weights-algo-2.txt"]

    # latest_training_job: the SDK's _TrainingJob, DescribeTrainingJob-shaped
    job = est.latest_training_job
    assert isinstance(job, _TrainingJob) and job.name == job.job_name == "sdk-view"
    described = job.describe()
    assert described["TrainingJobName"] == "sdk-view"
    assert described["TrainingJobStatus"] == described["SecondaryStatus"] == "Completed"
    assert "FailureReason" not in described
    assert described["ModelArtifacts"]["S3ModelArtifacts"] == est.model_data
    assert described["OutputDataConfig"]["S3OutputPath"] == str(tmp_path / "out")
    # the user's and the SDK's model_dir, local_process's own (the host's model folder; SageMaker: an s3:// URI)
    assert described["HyperParameters"] == {"epochs": "3", "model_dir": '"/opt/ml/model"'}
    assert described["AlgorithmSpecification"]["MetricDefinitions"] == METRICS
    assert described["ResourceConfig"]["InstanceCount"] == 2
    start, end = described["TrainingStartTime"], described["TrainingEndTime"]
    assert isinstance(start, datetime) and start.tzinfo is not None and start <= end
    assert {m["MetricName"]: m["Value"] for m in described["FinalMetricDataList"]} == {
        "loss": pytest.approx(0.3333), "acc": pytest.approx(0.7)}
    assert [t["Status"] for t in described["SecondaryStatusTransitions"]] == [
        "Starting", "Downloading", "Training", "Uploading", "Completed"]
    job.wait(logs="None")  # ended: returns at once
    with pytest.raises(JobError, match="already ended"):
        job.stop()

    # logs(): every host's lines, told apart by host
    est.logs()
    printed = capsys.readouterr().out
    for host in ("algo-1", "algo-2"):
        assert f"[{host}] starting on {host}" in printed
        assert f"[{host}] epoch 2 loss=0.3333 acc=0.70" in printed

    # training_job_analytics: the SDK's columns, each printed value once per rank, in print order
    frame = est.training_job_analytics.dataframe()
    assert list(frame.columns) == ["timestamp", "metric_name", "value"]
    assert sorted(set(frame["metric_name"])) == ["acc", "loss"]
    assert sorted(frame[frame.metric_name == "loss"]["value"]) == pytest.approx([0.3333] * 2 + [0.5] * 2 + [1.0] * 2)
    first = frame[frame.metric_name == "loss"]
    assert first["timestamp"].iloc[0] == 0 and first["timestamp"].is_monotonic_increasing
    assert first["timestamp"].iloc[-1] > 0.2  # the epochs were 0.2 s apart: real times, not line numbers
    with pytest.raises(ConfigurationError, match="metric_names"):
        type(est.training_job_analytics)(job, metric_names=["los"])

    # mlflow=URI: the job is a run, as SageMaker's managed MLflow tracks one (MlflowConfig and MlflowDetails)
    assert described["MlflowConfig"] == {"MlflowResourceArn": mlflow_server.uri}
    client = MlflowClient(mlflow_server.uri)
    run = client.get_run(described["MlflowDetails"]["MlflowRunId"])
    assert run.info.experiment_id == described["MlflowDetails"]["MlflowExperimentId"] == \
        client.get_experiment_by_name("sdk-view").experiment_id  # the job's name less its timestamp
    assert (run.info.run_name, run.info.status) == ("sdk-view", "FINISHED")
    assert run.data.params == {"epochs": "3", "model_dir": "/opt/ml/model"}
    history = client.get_metric_history(run.info.run_id, "loss")  # every value printed, in print order
    assert [point.step for point in history] == list(range(6))
    assert sorted(point.value for point in history) == sorted(frame[frame.metric_name == "loss"]["value"])
    assert run.data.tags["sagemaker.model_artifacts"] == est.model_data

    # attach: another estimator, from the record the fit saved beside the artifacts
    attached = TensorFlow.attach("sdk-view", local_output=str(tmp_path / "out"))
    assert attached.instance_type == "local_process" and attached.latest_training_job.name == "sdk-view"
    assert attached.model_data == est.model_data
    assert attached.latest_training_job.describe() == described
    assert attached.training_job_analytics.dataframe().equals(frame)
    assert attached.hyperparameters()["epochs"] == "3" and attached.metric_definitions == METRICS
    attached.logs()
    assert "[algo-2] epoch 0 loss=1.0000 acc=0.50" in capsys.readouterr().out

    # attach refuses what it cannot honour, naming it
    with pytest.raises(ConfigurationError, match="no local_process record"):
        TensorFlow.attach("never-ran", local_output=str(tmp_path / "out"))
    with pytest.raises(ConfigurationError):
        TensorFlow.attach("../sdk-view", local_output=str(tmp_path / "out"))
    os.rename(tmp_path / "code", tmp_path / "moved")
    with pytest.raises(ConfigurationError, match="attached job 'sdk-view'"):
        TensorFlow.attach("sdk-view", local_output=str(tmp_path / "out"))


def test_failed_job_is_described_and_attachable(tmp_path, capsys):
    from smddp_compat.estimators import JobError, TensorFlow

    est = _estimator(tmp_path, instance_count=1, environment={"FAIL_AT_END": "1"})
    with pytest.raises(JobError):
        est.fit(job_name="sdk-view-fails")
    described = est.latest_training_job.describe()
    assert described["TrainingJobStatus"] == "Failed"
    assert "exited with code 5" in described["FailureReason"]
    assert described["FinalMetricDataList"][0]["MetricName"] == "loss"  # what it printed before failing counts
    capsys.readouterr()
    with pytest.raises(JobError, match="ended Failed"):
        est.latest_training_job.wait()  # prints the logs, then raises as the SDK's wait does
    assert "starting on algo-1" in capsys.readouterr().out
    attached = TensorFlow.attach("sdk-view-fails", local_output=str(tmp_path / "out"))
    assert attached.latest_training_job.describe()["FailureReason"] == described["FailureReason"]


def test_a_local_process_run_prints_no_sdk_v2_notice_and_attempts_no_telemetry(tmp_path):
    """In a fresh interpreter (the notices fire once per process), without the test session's own
    SAGEMAKER_SUPPRESS_V2_WARNING: the kit's import, constructor and fit print none of the SDK's v2 notices, leave
    the SDK's switch unset, send no telemetry; the user's own direct use of SDK v2 still warns."""
    (tmp_path / "train.py").write_text("print('trained')\n")
    program = textwrap.dedent(f"""
        import os, sys
        sent = []
        from smddp_compat.estimators import TensorFlow
        from sagemaker.telemetry import telemetry_logging
        telemetry_logging._send_telemetry_request = lambda *a, **k: sent.append(a)
        telemetry_logging._requests_helper = lambda *a, **k: sent.append(a)
        est = TensorFlow(entry_point={str(tmp_path / 'train.py')!r}, instance_type="local_process",
                         framework_version="2.21", py_version="py311", output_path={str(tmp_path / 'out')!r})
        est.fit(job_name="quiet")
        from sagemaker.config.config_schema import TELEMETRY_OPT_OUT_PATH
        from sagemaker.utils import resolve_value_from_config
        opted_out = resolve_value_from_config(None, TELEMETRY_OPT_OUT_PATH, False, est.sagemaker_session)
        print("KIT-DONE", "switch-left-set" if "SAGEMAKER_SUPPRESS_V2_WARNING" in os.environ else "switch-unset",
              f"telemetry-calls={{len(sent)}}", f"opted-out={{opted_out}}", flush=True)
        import sagemaker.tensorflow, sagemaker.deprecations
        assert sagemaker.deprecations.SUPPRESS_V2_WARNING_ENV_VAR == "SAGEMAKER_SUPPRESS_V2_WARNING"
        sagemaker.tensorflow.TensorFlow(entry_point={str(tmp_path / 'train.py')!r}, role="arn:aws:iam::1:role/r",
            instance_type="ml.c5.xlarge", instance_count=1, framework_version="2.11", py_version="py39",
            sagemaker_session=est.sagemaker_session)
    """)
    env = {k: v for k, v in os.environ.items() if k != "SAGEMAKER_SUPPRESS_V2_WARNING"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # stderr: what the kit's import, constructor and fit printed, then the user's own estimator's notice
    kit_part = done.stdout.split("KIT-DONE", 1)[0] + done.stderr.split("TensorFlow is part of", 1)[0]
    user_part = done.stderr
    assert "on path of deprecation" not in kit_part, output
    assert "KIT-DONE switch-unset telemetry-calls=0 opted-out=True" in done.stdout, output
    # the user's own SDK v2 estimator: the SDK's notice, as the SDK prints it (warning + log line)
    assert user_part.count("TensorFlow is part of the SageMaker Python SDK v2") == 2, output


def test_s3_output_job_is_shown_and_attached_from_s3(aws, tmp_path, capsys):
    """An s3:// output_path (moto's S3 over HTTP): model_data is the S3 URI, logs() and attach read S3."""
    from smddp_compat.estimators import TensorFlow

    aws.client("s3").create_bucket(Bucket="sdk-view-bucket")
    est = _estimator(tmp_path, instance_count=1, hyperparameters={"epochs": 1}, output_path="s3://sdk-view-bucket/jobs")
    est.fit(job_name="sdk-view-s3")
    assert est.model_data == "s3://sdk-view-bucket/jobs/sdk-view-s3/output/model.tar.gz"
    keys = {key for _, key in aws.all_objects()}
    assert {"jobs/sdk-view-s3/output/model.tar.gz", "jobs/sdk-view-s3/training-job.json"} <= keys
    capsys.readouterr()
    attached = TensorFlow.attach("sdk-view-s3", local_output="s3://sdk-view-bucket/jobs")
    assert attached.model_data == est.model_data
    attached.logs()  # one host: its lines as written, read from S3
    assert "epoch 0 loss=1.0000 acc=0.50" in capsys.readouterr().out
    assert list(attached.training_job_analytics.dataframe()["metric_name"]) == ["loss", "acc"]


def test_the_readme_example_runs_as_written(tmp_path):
    """estimators/README.md's local_process example (fit, model_data, describe, logs, metrics, attach), as written."""
    with open(os.path.join(REPO, "estimators", "README.md"), encoding="utf-8") as readme:
        text = readme.read()
    section = text.split("### After a `local_process` fit", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Completed [{'MetricName': 'loss', 'Value': 0.3333" in done.stdout
    assert "[algo-2] epoch 2 loss=0.3333" in done.stdout and "metric_name" in done.stdout
    assert len(list((tmp_path / "smddp_local_output").glob("*/output/model.tar.gz"))) == 1
