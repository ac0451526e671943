"""``smddp submit|status|logs|wait|fetch`` (estimators.cli.main) against moto's server."""

from __future__ import annotations

import io
import json
import os
import tarfile
import time

import pytest

from tests.estimators.conftest import ROLE, SECRET_KEY

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

from smddp_compat.commands.submit_cli import main  # noqa: E402

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"


def _submit_args(script, *extra):
    return ["submit", script, "--instance-type", "ml.p3.16xlarge", "--instance-count", "2", "--role", ROLE,
            "--image-uri", IMAGE, *extra]


def _model_tarball(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


MLFLOW_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-CLI"


def _sent_bodies(monkeypatch) -> dict[str, list[dict]]:
    """The JSON bodies this process sends over HTTP, by their ``X-Amz-Target`` (``SageMaker.CreateTrainingJob``)."""
    import urllib3

    bodies: dict[str, list[dict]] = {}
    original = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def urlopen(pool, method, url, *args, **kwargs):
        target = (kwargs.get("headers") or {}).get("X-Amz-Target")
        if target:
            body = kwargs.get("body")
            bodies.setdefault(target.decode() if isinstance(target, bytes) else target, []).append(json.loads(body))
        return original(pool, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", urlopen)
    return bodies


def test_submit_uploads_channels_and_waits(aws, tiny_script, tmp_path, capsys, monkeypatch):
    """... and sends --mlflow ARN (with the experiment and run names) as the request's MlflowConfig, over HTTP."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.npz").write_bytes(b"not really numpy")
    sent = _sent_bodies(monkeypatch)
    code = main(_submit_args(
        tiny_script, "--distribution", "smddp", "--channel", f"train={data}", "--channel", "test=s3://bucket/test",
        "--hyperparameters", "epochs=3", "optimizer=adam", "note=a=b  c", "--job-name", "cli-job", "--max-run", "600",
        "--mlflow", MLFLOW_ARN, "--mlflow-experiment", "cli-experiment", "--mlflow-run-name", "cli-run",
        "--wait", "--poll", "0.1", "--timeout", "60",
    ))
    out = capsys.readouterr()
    assert code == 0, out.err
    [request] = sent["SageMaker.CreateTrainingJob"]
    assert request["MlflowConfig"] == {"MlflowResourceArn": MLFLOW_ARN, "MlflowExperimentName": "cli-experiment",
                                       "MlflowRunName": "cli-run"}
    assert "cli-job" in out.out and "Completed" in out.out
    described = aws.client("sagemaker").describe_training_job(TrainingJobName="cli-job")
    hps = described["HyperParameters"]
    assert hps["epochs"] == "3" and json.loads(hps["optimizer"]) == "adam"
    assert json.loads(hps["note"]) == "a=b  c"  # the value is everything after the first '=', as written
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 600
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in described["InputDataConfig"]}
    assert channels["test"] == "s3://bucket/test"
    assert channels["train"].endswith("cli-job/input/train")
    assert any(key.endswith("cli-job/input/train/train.npz") for _, key in aws.all_objects())
    assert SECRET_KEY not in json.dumps(described, default=str)


def test_status_logs_wait(aws, tiny_script, capsys):
    assert main(_submit_args(tiny_script, "--distribution", "dtensor", "--job-name", "life")) == 0
    logs = aws.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    logs.create_log_group(logGroupName=group)
    now = int(time.time() * 1000)
    for host in ("algo-1", "algo-2"):
        stream = f"life/{host}-1700000000"
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
            {"timestamp": now + i, "message": f"{host} step {i} loss=0.{9 - i}"} for i in range(3)])
    logs.create_log_stream(logGroupName=group, logStreamName="other-job/algo-1-1")
    logs.put_log_events(logGroupName=group, logStreamName="other-job/algo-1-1",
                        logEvents=[{"timestamp": now, "message": "not this job"}])
    capsys.readouterr()

    assert main(["status", "life"]) == 0
    status = capsys.readouterr().out
    assert "status:    Completed" in status and "2 x ml.p3.16xlarge" in status and "model.tar.gz" in status

    assert main(["logs", "life"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[algo-1-1700000000] algo-1 step 0 loss=0.9"
    assert len(lines) == 6 and not any("not this job" in line for line in lines)

    assert main(["wait", "life", "--timeout", "30", "--poll", "0.1"]) == 0
    captured = capsys.readouterr()
    assert "life: Completed" in captured.err and "Completed" in captured.out


def test_fetch_extracts_the_model(aws, tiny_script, tmp_path, capsys):
    aws.client("s3").create_bucket(Bucket="artifacts")
    assert main(_submit_args(tiny_script, "--job-name", "fetch-me", "--output", "s3://artifacts/jobs")) == 0
    archive = _model_tarball(str(tmp_path / "model.tar.gz"), {"1/saved_model.pb": b"pb", "1/variables/v": b"v"})
    aws.client("s3").upload_file(archive, "artifacts", "jobs/fetch-me/output/model.tar.gz")
    dest = tmp_path / "model"
    assert main(["fetch", "fetch-me", str(dest)]) == 0
    assert (dest / "1" / "saved_model.pb").read_bytes() == b"pb"
    assert (dest / "1" / "variables" / "v").read_bytes() == b"v"
    # A second fetch into the same, now full, directory is refused.
    assert main(["fetch", "fetch-me", str(dest)]) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_fetch_refuses_a_path_traversal_archive(aws, tiny_script, tmp_path, capsys):
    aws.client("s3").create_bucket(Bucket="artifacts")
    assert main(_submit_args(tiny_script, "--job-name", "evil", "--output", "s3://artifacts/jobs")) == 0
    archive = _model_tarball(str(tmp_path / "evil.tar.gz"), {"ok.txt": b"ok", "../escaped.txt": b"x"})
    aws.client("s3").upload_file(archive, "artifacts", "jobs/evil/output/model.tar.gz")
    dest = tmp_path / "model"
    assert main(["fetch", "evil", str(dest)]) == 1
    assert "outside the destination" in capsys.readouterr().err
    assert not dest.exists() and not (tmp_path / "escaped.txt").exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".smddp-fetch")] == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--distribution", "horovod"], "not a distribution of this kit: Horovod is distribution 'mpi'"),
        (["--distribution", "hvd"], "unknown distribution"),
        (["--channel", "train"], "NAME=VALUE"),
        (["--channel", "train=/no/such/dir"], "no such file"),
        (["--processes-per-host", "2"], "one process per host"),
        (["--distribution", "mwms", "--processes-per-host", "2"], "multi_worker_mirrored_strategy runs one process"),
        (["--distribution", "dtensor", "--mesh", "batch=4", "batch=2"], "dimension name 'batch' is given twice"),
        (["--instance-count", "0"], "instance_count"),
        (["--distribution", "smddp", "--mesh", "batch=4"], "only used with distribution 'dtensor'"),
        (["--distribution", "dtensor", "--mesh", "batch=3"], "product of the mesh sizes"),
        (["--hyperparameters", "epochs=1", "epochs=2"], "given twice"),
        (["--hyperparameters", "=1"], "--hyperparameters='=1': is not NAME=VALUE: the name before '=' is empty"),
        (["--channel", "=s3://bucket/x"], "--channel='=s3://bucket/x': is not NAME=VALUE"),
        (["--distribution", "dtensor", "--mesh", "=8"], "--mesh='=8': dimension name '' is not an ASCII identifier"),
        (["--role", "not-an-arn"], "role"),
        (["--mlflow", "http://127.0.0.1:5000"], "--mlflow='http://127.0.0.1:5000': is not SageMaker's MLflow"),
        (["--mlflow", MLFLOW_ARN, "--mlflow-optional"], "--mlflow-optional=True: applies to a job run here"),
        (["--mlflow-experiment", "x"], "--mlflow-experiment='x': was given without --mlflow"),
    ],
)
def test_bad_submit_exits_2_before_any_upload(aws, tiny_script, capsys, args, words):
    argv = _submit_args(tiny_script, *args)
    if "--role" in args:  # replace the good role
        index = argv.index("--role")
        del argv[index:index + 2]
    assert main(argv) == 2
    assert words in capsys.readouterr().err
    assert aws.all_objects() == [] and aws.training_jobs() == []


def test_aws_error_is_reported_not_raised(aws, tiny_script, capsys):
    assert main(_submit_args(tiny_script, "--job-name", "nobucket", "--output", "s3://missing-bucket/jobs")) == 1
    err = capsys.readouterr().err
    assert "AWS call failed" in err and "NoSuchBucket" in err and "Traceback" not in err


def test_unknown_job(aws, capsys):
    assert main(["status", "no-such-job"]) == 1
    assert "no-such-job" in capsys.readouterr().err
    assert main(["logs", "no-such-job"]) == 0  # no log group yet: nothing to print


def test_wait_times_out_and_reports_progress():
    """The timeout path, with a scripted DescribeTrainingJob (moto completes every job at once)."""
    from smddp_compat.estimators import JobTimeoutError
    from smddp_compat.estimators._jobs import wait_for_job

    class Client:
        calls = 0

        def describe_training_job(self, TrainingJobName):
            Client.calls += 1
            secondary = "Starting" if Client.calls < 3 else "Training"
            return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": "InProgress",
                    "SecondaryStatus": secondary}

    now = [0.0]
    stream = io.StringIO()
    with pytest.raises(JobTimeoutError) as info:
        wait_for_job(Client(), "slow", timeout=100, poll=30, stream=stream, clock=lambda: now[0],
                     sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert info.value.status == "InProgress"
    assert stream.getvalue().count("\n") == 2  # one line per change: Starting, then Training
    assert "InProgress / Training" in stream.getvalue()
