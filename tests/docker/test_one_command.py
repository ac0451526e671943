"""``smddp local SCRIPT --backend docker``: a script run as SageMaker runs it, in one command.

The job's options become the request the kit's estimator sends (built against a private moto server the command
starts on loopback, with none of the user's AWS settings), replayed by the twin in the kit's image. One 2-host job
runs through the command line (a shell entry point whose shebang is Python: it records what each host saw); the
refusals, the request building and the S3 helpers need no Docker engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from smddp_compat.launcher import usable_cores
from smddp_compat.commands import local_cli as cli
from smddp_compat.local_mode.docker.twin import SHORT_WAITS_WARNING
from tests.fake_aws import Aws
from tests.mlflow_server import MlflowServer

REPO = Path(__file__).resolve().parents[2]

#: A shell entry point (SageMaker's toolkit runs a .sh as a command: its shebang picks the interpreter) that records
#: what its host saw: the cluster, its arguments (the hyperparameters), a channel, the environment. It writes
#: SageMaker's paths literally too (/opt/ml/...): each host's own tree in both backends.
PROBE = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, os, pathlib, sys
    # The host's own resource config (under mpirun every rank has the leader's SM_CURRENT_HOST, as SageMaker's
    # toolkit exports it).
    host = json.loads(pathlib.Path("/opt/ml/input/config/resourceconfig.json").read_text())["current_host"]
    channel = pathlib.Path(os.environ["SM_CHANNEL_TRAIN"])
    seen = {
        "host": host, "hosts": json.loads(os.environ["SM_HOSTS"]), "argv": sys.argv[1:],
        "interpreter": sys.executable, "program": os.path.basename(sys.argv[0]),
        "channel": {p.name: p.read_text() for p in sorted(channel.iterdir())},
        "probe_env": os.environ.get("PROBE_ENV"),
        "base": os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"),
        "sm": {name: value for name, value in os.environ.items() if name.startswith("SM_")},
    }
    out = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"])
    (out / f"seen-{host}.json").write_text(json.dumps(seen))
    (pathlib.Path(os.environ["SM_MODEL_DIR"]) / f"model-{host}.txt").write_text("trained")
    pathlib.Path(f"/opt/ml/model/literal-{host}.txt").write_text("written to /opt/ml/model")
    if host == "algo-1":
        pathlib.Path("/opt/ml/checkpoints").mkdir(exist_ok=True)
        pathlib.Path("/opt/ml/checkpoints/step-1.txt").write_text("checkpoint")
    print(f"probe on {host}: probe-loss=0.5", flush=True)
""")


def _probe_source(tmp_path: Path) -> tuple[Path, Path]:
    source, data = tmp_path / "src", tmp_path / "data"
    source.mkdir()
    data.mkdir()
    (source / "probe.sh").write_text(PROBE)
    (data / "part-0.txt").write_text("channel data")
    return source, data


def _smddp_local(argv: list[str], env: dict[str, str], timeout: float,
                 command: str = "local") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", command, *argv], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=str(REPO))


def _without_aws_credentials(tmp_path: Path) -> dict[str, str]:
    """This environment with no AWS credentials, configuration or endpoint: the docker backend needs none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SAGEMAKER_"))}
    env.update({"AWS_CONFIG_FILE": str(tmp_path / "no-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"), "PYTHONUNBUFFERED": "1"})
    return env


# -- one job through the command line --------------------------------------------------------------------------------

#: A tuning trial (smddp tune, one trial of a plain job), and a job of each distribution (smddp local).
_SHAPES = ("tuning-trial", "smddp", "mpi", "mwms", "parameter_server", "dtensor")
#: Distributions the toolkit launches through mpirun, after which its leader sleeps 30 s (cut here, and said).
_MPI_LAUNCHED = ("smddp", "mpi")


def _probe_job(backend: str, shape: str, source: Path, data: Path, tmp_path: Path, mlflow: str = "") -> tuple[
    subprocess.CompletedProcess[str], Path
]:
    """probe.sh on 2 hosts in ``shape`` (:data:`_SHAPES`) with ``--backend BACKEND``: the command's run (smddp
    local with the twin prints DescribeTrainingJob's answer) and the job's (the trial's) folder. A tuning trial is
    tracked in MLflow at ``mlflow`` (experiment ``probe-BACKEND``)."""
    output = tmp_path / backend / "out"
    job = ["probe.sh", "--source-dir", str(source), "--instance-count", "2", "--backend", backend,
           "--hyperparameters", "epochs=3", "note=a b", "--channel", f"train={data}", "--env", "PROBE_ENV=yes",
           "--output", str(output), "--max-run", "600"]
    env = _without_aws_credentials(tmp_path)
    if shape == "tuning-trial":
        done = _smddp_local([*job, "--job-name", "probe-tune", "--metric", "loss=probe-loss=([0-9.]+)",
                             "--objective", "loss", "--objective-type", "Minimize", "--categorical", "lr=0.1",
                             "--strategy", "Random", "--max-jobs", "1", "--mlflow", mlflow,
                             "--mlflow-experiment", f"probe-{backend}"], env, timeout=800, command="tune")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        trials = json.loads((output / "probe-tune" / "training-jobs.json").read_text())["TrainingJobSummaries"]
        assert [t["TrainingJobStatus"] for t in trials] == ["Completed"], trials
        return done, output / "probe-tune" / trials[0]["TrainingJobName"]
    # The option beats the environment's switch, both ways (the faithful way: test_short_toolkit_waits_...).
    env["SMDDP_TWIN_SHORT_TOOLKIT_WAITS"] = "0"
    extra = ["--mesh", "batch=4", "--devices-per-process", "2"] if shape == "dtensor" else []
    done = _smddp_local([*job, *extra, "--distribution", shape, "--job-name", "one-command-probe",
                         "--checkpoint-dir", str(tmp_path / backend / "checkpoints"), "--stop-grace", "10",
                         *(["--short-toolkit-waits"] if backend == "docker" else [])], env, timeout=800)
    assert done.returncode == 0, done.stderr[-5000:]
    return done, output / "one-command-probe"


def _seen(job: Path) -> dict[str, dict[str, Any]]:
    """What each host's probe recorded, from the job's output.tar.gz, by host."""
    with tarfile.open(job / "output" / "output.tar.gz") as archive:
        records = [json.loads(archive.extractfile(m).read())  # type: ignore[union-attr]
                   for m in archive.getmembers() if m.isfile() and Path(m.name).name.startswith("seen-")]
    return {record["host"]: record for record in records}


def _as_in_the_container(record: dict[str, Any]) -> dict[str, Any]:
    """A host's arguments and SM_* variables with its tree's root written /opt/ml (path prefixes aside) and its
    instance type (the twin's ml.c5.xlarge, the process backend's "local") written TYPE where the framework
    parameters name it (SMDDP's sagemaker_instance_type)."""
    base, instance_type = record["base"], record["sm"]["SM_CURRENT_INSTANCE_TYPE"]

    def unrooted(text: str) -> str:
        return text.replace(base, "/opt/ml").replace(f'"sagemaker_instance_type":"{instance_type}"',
                                                     '"sagemaker_instance_type":"TYPE"')

    return {"argv": [unrooted(word) for word in record["argv"]],
            "sm": {name: unrooted(value) for name, value in record["sm"].items()}}


#: SM_* variables whose values say where the job runs, not what it is: the instance type (the twin's ml.c5.xlarge,
#: the process backend's "local", also inside the resource config and the training environment), the network
#: interface (eth0, lo), the code's origin (the toolkit names the uploaded tarball), the CPUs a container is given.
_WHERE_IT_RUNS = ("SM_CURRENT_INSTANCE_TYPE", "SM_INSTANCE_GROUPS_DICT", "SM_RESOURCE_CONFIG", "SM_TRAINING_ENV",
                  "SM_NETWORK_INTERFACE_NAME", "SM_MODULE_DIR", "SM_NUM_CPUS")


def _tracked_trial(uri: str, experiment: str) -> dict[str, Any]:
    """The MLflow runs of a tracked tuning job with one trial, as both backends must make them: the tuning job's
    run and its trial's (params, metric series, status)."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    [parent] = client.search_runs([experiment_id], "attributes.run_name = 'probe-tune'")
    [trial] = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    loss = [m.value for m in client.get_metric_history(trial.info.run_id, "loss")]
    return {"statuses": (parent.info.status, trial.info.status), "params": trial.data.params, "loss": loss,
            "best": parent.data.tags["sagemaker.best_run_id"] == trial.info.run_id}


def _check_job(job: Path, shape: str) -> dict[str, dict[str, Any]]:
    """What both backends must have made of the probe's job: a record per host (by its resource config), its
    hyperparameters as arguments, ``--model_dir`` the host's model folder, its channel, its environment, each host's
    model files (also those written to /opt/ml/model literally) in model.tar.gz, a log per host; the records."""
    seen = _seen(job)
    assert sorted(seen) == ["algo-1", "algo-2"], seen
    for record in seen.values():
        assert record["hosts"] == ["algo-1", "algo-2"], record
        argv = record["argv"]
        assert argv[argv.index("--epochs") + 1] == "3" and argv[argv.index("--note") + 1] == "a b", argv
        assert argv[argv.index("--model_dir") + 1] == f"{record['base']}/model", argv  # not an s3:// TF cannot write
        assert record["channel"] == {"part-0.txt": "channel data"}, record
        assert record["probe_env"] == "yes"
        assert record["program"] == "probe.sh" and "python" in record["interpreter"]  # the shebang, not sh
        if shape == "tuning-trial":
            assert argv[argv.index("--lr") + 1] == "0.1" and "_tuning_objective_metric" not in " ".join(argv), argv
            assert "_tuning_objective_metric" not in record["sm"]["SM_HPS"], record["sm"]["SM_HPS"]
    with tarfile.open(job / "output" / "model.tar.gz") as model:
        assert sorted(model.getnames()) == sorted(f"{kind}-{host}.txt" for kind in ("model", "literal")
                                                  for host in seen), model.getnames()
    assert sorted(p.name for p in (job / "logs").iterdir()) == ["algo-1.log", "algo-2.log"]
    return seen


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("no_leftovers")
@pytest.mark.parametrize("shape", _SHAPES)
def test_a_script_gets_the_same_arguments_and_sm_variables_in_both_backends(
    shape: str, kit_image: str, tmp_path: Path
) -> None:
    """One command runs a script on 2 hosts in the kit's image (as SageMaker runs it) and with the process backend,
    as a tuning trial and in each distribution: the script gets the same arguments (``--model_dir`` its host's model
    folder; no toolkit parameter) and the same SM_* variables, path prefixes aside; SageMaker's paths written
    literally land in each host's own tree (its /opt/ml/model, its /opt/ml/checkpoints) in both."""
    source, data = _probe_source(tmp_path)
    server = MlflowServer(tmp_path / "mlflow").start() if shape == "tuning-trial" else None
    try:
        done, job = _probe_job("docker", shape, source, data, tmp_path, server.uri if server else "")
        in_docker = _check_job(job, shape)
        if server is not None:  # the trial's run, as the process backend's below
            _, process_job = _probe_job("process", shape, source, data, tmp_path, server.uri)
            tracked = _tracked_trial(server.uri, "probe-docker")
            assert tracked == _tracked_trial(server.uri, "probe-process")
            assert tracked["statuses"] == ("FINISHED", "FINISHED") and tracked["loss"] == [0.5, 0.5], tracked
            assert tracked["params"]["lr"] == "0.1" and tracked["params"]["note"] == "a b" and tracked["best"]
    finally:
        if server is not None:
            server.stop()
    if shape != "tuning-trial":
        assert f"the kit's image: {kit_image}" in done.stderr  # the image was checked (and reused) on the way
        described = json.loads(done.stdout)  # the twin prints DescribeTrainingJob's answer
        assert "2 x ml.c5.xlarge" in done.stderr
        assert (described["TrainingJobName"], described["TrainingJobStatus"]) == ("one-command-probe", "Completed")
        assert described["ModelArtifacts"]["S3ModelArtifacts"] == str(job / "output" / "model.tar.gz")
        assert SHORT_WAITS_WARNING in described["Twin"]["Warnings"]  # the twin's choice, said whatever the job
        leader = (job / "logs" / "algo-1.log").read_text()
        stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in leader.splitlines()
                  if "status file from leader node" in line]
        assert len(stamps) == (2 if shape in _MPI_LAUNCHED else 0), leader[-3000:]
        assert not stamps or (stamps[1] - stamps[0]).total_seconds() < 10, stamps  # the option beat the switch

    if shape != "tuning-trial":
        _, process_job = _probe_job("process", shape, source, data, tmp_path)
    in_processes = _check_job(process_job, shape)
    if shape != "tuning-trial":
        for backend in ("docker", "process"):
            assert (tmp_path / backend / "checkpoints" / "step-1.txt").read_text() == "checkpoint"
    if shape == "mpi":  # the toolkit's mpirun gives every rank the leader's SM_*; the process backend does too
        assert {record["sm"]["SM_CURRENT_HOST"] for record in in_processes.values()} == {"algo-1"}
    for host in in_docker:
        container, local = _as_in_the_container(in_docker[host]), _as_in_the_container(in_processes[host])
        assert local["argv"] == container["argv"], (local["argv"], container["argv"])
        assert sorted(local["sm"]) == sorted(container["sm"]), set(local["sm"]) ^ set(container["sm"])
        differ = {name for name in container["sm"] if local["sm"][name] != container["sm"][name]}
        assert differ <= set(_WHERE_IT_RUNS), {n: (local["sm"][n], container["sm"][n]) for n in differ
                                               if n not in _WHERE_IT_RUNS}


@pytest.mark.timeout(900)
@pytest.mark.faithful_toolkit_waits  # the environment's switch is set below
@pytest.mark.usefixtures("no_leftovers")
def test_without_short_toolkit_waits_the_leader_waits_its_30_s_whatever_the_environment_says(
    kit_image: str, tmp_path: Path
) -> None:
    """A 2-host SMDDP job with --no-short-toolkit-waits keeps the toolkit leader's 30 s between writing the workers'
    status files and finishing, even with SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1 in the environment, and Twin.Warnings
    says nothing of it (the cut, and the option beating the switch the other way: the probe test above)."""
    output = tmp_path / "out"
    done = _smddp_local(
        ["allreduce.py", "--source-dir", str(REPO / "tests" / "local_mode" / "scripts"), "--instance-count", "2",
         "--distribution", "smddp", "--backend", "docker", "--no-short-toolkit-waits", "--output", str(output),
         "--job-name", "toolkit-waits", "--max-run", "600", "--stop-grace", "10"],
        env={**_without_aws_credentials(tmp_path), "SMDDP_TWIN_SHORT_TOOLKIT_WAITS": "1"}, timeout=800,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    described = json.loads(done.stdout)
    assert described["TrainingJobStatus"] == "Completed"
    assert SHORT_WAITS_WARNING not in described["Twin"]["Warnings"]
    assert f"warning: {SHORT_WAITS_WARNING}" not in done.stderr
    leader = (output / "toolkit-waits" / "logs" / "algo-1.log").read_text()
    stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in leader.splitlines()
              if "status file from leader node" in line]
    assert len(stamps) == 2, leader[-3000:]  # "Begin writing ..." and "Finished writing ..."
    assert (stamps[1] - stamps[0]).total_seconds() >= 29, stamps


# -- refusals: before anything starts ------------------------------------------------------------------------------

@pytest.fixture
def nothing_may_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the command reaches Docker or starts its private server."""
    from smddp_compat import image
    from smddp_compat.estimators import replay as _from_spec

    def started(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("something started before the options were refused")

    monkeypatch.setattr(image, "find_engine", started)
    monkeypatch.setattr(_from_spec.PrivateSageMaker, "__enter__", started)


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(argv)
    error = capsys.readouterr().err
    assert code == 2, error
    return error


@pytest.mark.parametrize("options", [
    ["--instance-count", "0"],
    ["--distribution", "horovod"],
    ["--channel", "train=/nonexistent/mnist"],
    ["--job-name", "bad_name"],
    ["--hyperparameters", "sagemaker_program=x"],
], ids=["instance-count", "distribution", "channel", "job-name", "hyperparameter"])
@pytest.mark.usefixtures("nothing_may_start")
def test_refusals_are_the_process_backends(options: list[str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never runs')\n")
    output = ["--output", str(tmp_path / "out")]
    process = _refusal([str(script), *options, *output], capsys)
    docker = _refusal([str(script), *options, *output, "--backend", "docker"], capsys)
    assert docker == process
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options, words", [
    (["--max-run", "1.5"], ["max_run=1.5: must be an integer >= 1", "give a whole number"]),
    pytest.param(["--distribution", "mwms", "--processes-per-host", "2"],
                 ["processes_per_host=2: SageMaker's multi_worker_mirrored_strategy runs one process per host"],
                 marks=pytest.mark.skipif(usable_cores() < 2, reason="JobSpec refuses 2 processes on 1 core first")),
    (["--work-dir", "/tmp/w"], ["--work-dir='/tmp/w': only applies to the process backend"]),
    (["--gpus-per-host", "2"], ["--gpus-per-host=2", "set the processes per host with --processes-per-host"]),
], ids=["max-run-fraction", "mwms-two-per-host", "work-dir", "gpus-per-host"])
@pytest.mark.usefixtures("nothing_may_start")
def test_refusals_of_the_estimator_and_the_twin(options: list[str], words: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never runs')\n")
    error = _refusal([str(script), *options, "--backend", "docker", "--output", str(tmp_path / "out")], capsys)
    for expected in words:
        assert expected in error
    assert not (tmp_path / "out").exists()


# -- the request, built against the private server ------------------------------------------------------------------

class _Recorder(BaseHTTPRequestHandler):
    """Stands for the user's AWS endpoint and proxy: records every request and fails it."""

    seen: list[str] = []

    def _record(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _record

    def log_message(self, *_args: object) -> None:
        pass


_BUILD = """
import json, sys
from smddp_compat.local_mode import JobSpec
from smddp_compat.estimators.replay import PrivateSageMaker, build_request, check_with_estimator
spec = JobSpec("probe.sh", source_dir=sys.argv[1], instance_count=2, distribution="smddp",
               hyperparameters={"epochs": 3, "note": "a b"}, channels={"train": sys.argv[2]},
               output_path=sys.argv[3], job_name="built-privately", checkpoint_path=sys.argv[4],
               metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}])
job = check_with_estimator(spec)
with PrivateSageMaker() as aws:
    request = build_request(job, aws, image="smddp-compat:test", checkpoint_s3=True)
    objects = sorted(o["Key"] for o in aws.s3_client().list_objects_v2(Bucket="smddp-local")["Contents"])
print(json.dumps({"objects": objects, "metrics": request.params["AlgorithmSpecification"].get("MetricDefinitions"),
                  "image": request.image, "hosts": request.hosts, "instance_type": request.instance_type,
                  "hyperparameters": request.hyperparameters, "environment": dict(request.environment),
                  "channels": [[c.name, c.source.uri] for c in request.channels],
                  "checkpoint_s3": request.checkpoint_s3.uri if request.checkpoint_s3 else None}))
"""


def test_the_request_is_built_privately_whatever_the_users_aws_settings(tmp_path: Path) -> None:
    """A profile that does not exist, config and credentials files naming another endpoint and region, an endpoint
    and a proxy that record every request, an SDK config that would add to the request: none is used."""
    source, data = _probe_source(tmp_path)
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    Thread(target=server.serve_forever, daemon=True).start()
    recorder = f"http://127.0.0.1:{server.server_address[1]}"
    aws_config = tmp_path / "aws-config"
    aws_config.write_text(f"[default]\nregion = eu-nowhere-1\nendpoint_url = {recorder}\n"
                          "aws_access_key_id = AKIAUSERSOWNKEY00000\naws_secret_access_key = users-own-secret\n")
    sdk_config = tmp_path / "sdk-config.yaml"
    sdk_config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    Environment:\n      LEAKED: 'yes'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SAGEMAKER_"))}
    env.update({
        "AWS_PROFILE": "no-such-profile", "AWS_CONFIG_FILE": str(aws_config),
        "AWS_SHARED_CREDENTIALS_FILE": str(aws_config), "AWS_ENDPOINT_URL": recorder, "AWS_DEFAULT_REGION": "xx-1",
        "HTTP_PROXY": recorder, "http_proxy": recorder, "SAGEMAKER_USER_CONFIG_OVERRIDE": str(sdk_config),
    })
    try:
        done = subprocess.run([sys.executable, "-c", _BUILD, str(source), str(data), str(tmp_path / "out"),
                               str(tmp_path / "checkpoints")], env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr[-4000:]
    assert _Recorder.seen == [], "a request went to the user's endpoint or proxy"
    assert "v3 is the actively developed" not in done.stderr  # the SDK's notice concerns code the user did not write
    built = json.loads(done.stdout.strip().splitlines()[-1])
    assert built["image"] == "smddp-compat:test"
    assert (built["hosts"], built["instance_type"]) == (["algo-1", "algo-2"], "ml.c5.xlarge")
    hyperparameters = built["hyperparameters"]
    assert (hyperparameters["epochs"], hyperparameters["note"]) == ("3", '"a b"')  # JSON, as the SDK encodes them
    assert hyperparameters["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert hyperparameters["sagemaker_mpi_num_of_processes_per_host"] == "1"
    assert built["channels"] == [["train", "s3://smddp-local/built-privately/input/train"]]
    assert "built-privately/input/train/part-0.txt" in built["objects"]
    assert "built-privately/source/sourcedir.tar.gz" in built["objects"]
    assert built["checkpoint_s3"] == "s3://smddp-local/built-privately/checkpoints"
    assert "LEAKED" not in built["environment"]
    assert built["metrics"] == [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]


# -- the user's S3: s3:// channels in, s3:// output out ---------------------------------------------------------------

class _Target:
    """A private S3 that records what is copied into it."""

    def __init__(self) -> None:
        self.buckets: list[str] = []
        self.objects: dict[tuple[str, str], bytes] = {}

    def create_bucket(self, Bucket: str) -> None:  # boto3 names it Bucket
        self.buckets.append(Bucket)

    def upload_fileobj(self, data: Any, bucket: str, key: str) -> None:
        self.objects[(bucket, key)] = data.read()


def test_an_s3_channel_is_copied_under_the_same_uri(aws: Aws) -> None:
    from smddp_compat.local_mode.s3 import parse_s3_uri
    from smddp_compat.local_mode.channels import copy_s3_prefix
    from smddp_compat.local_mode.errors import ChannelError

    s3 = aws.client("s3")
    s3.create_bucket(Bucket="users-data")
    for key in ("mnist/train/a.npz", "mnist/train/sub/b.npz", "mnist/train.csv", "mnist/test/c.npz"):
        s3.put_object(Bucket="users-data", Key=key, Body=key.encode())
    target = _Target()
    count = copy_s3_prefix(parse_s3_uri("s3://users-data/mnist/train", "c"), s3, target, channel="train")
    # SageMaker's S3Prefix reads every key that starts with the prefix: train.csv too, not test/
    assert count == 3 and target.buckets == ["users-data"]
    assert target.objects == {("users-data", k): k.encode()
                              for k in ("mnist/train.csv", "mnist/train/a.npz", "mnist/train/sub/b.npz")}
    with pytest.raises(ChannelError, match="no object exists under this prefix"):
        copy_s3_prefix(parse_s3_uri("s3://users-data/nothing/", "c"), s3, _Target(), channel="train")


def test_results_staged_for_an_s3_output_are_uploaded_and_named(aws: Aws, tmp_path: Path) -> None:
    from smddp_compat.estimators.replay import upload_results
    from smddp_compat.local_mode.artifacts import ArtifactPaths
    from smddp_compat.local_mode.outcome import JobResult
    from smddp_compat.local_mode.s3 import parse_s3_uri

    job = tmp_path / "job-1"
    for relative in ("output/model.tar.gz", "output/output.tar.gz", "logs/algo-1.log"):
        (job / relative).parent.mkdir(parents=True, exist_ok=True)
        (job / relative).write_text(relative)
    aws.client("s3").create_bucket(Bucket="users-results")
    staged = JobResult(job_name="job-1", status="Completed", secondary_status="Completed", failure_reason=None,
                       exit_code=0, artifacts=ArtifactPaths(model=str(job / "output/model.tar.gz"),
                                                            output=str(job / "output/output.tar.gz"),
                                                            logs={"algo-1": str(job / "logs/algo-1.log")}))
    result = upload_results(job, parse_s3_uri("s3://users-results/runs/job-1", "o"), staged, client=aws.client("s3"))
    assert result.model_artifacts == "s3://users-results/runs/job-1/output/model.tar.gz"
    assert result.output_artifacts == "s3://users-results/runs/job-1/output/output.tar.gz"
    assert result.logs == {"algo-1": "s3://users-results/runs/job-1/logs/algo-1.log"}
    assert sorted(key for bucket, key in aws.all_objects()) == [
        "runs/job-1/logs/algo-1.log", "runs/job-1/output/model.tar.gz", "runs/job-1/output/output.tar.gz"]


@pytest.mark.usefixtures("nothing_may_start")
def test_a_channel_holding_a_fifo_is_refused_before_anything_starts(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The private server's upload would wait forever on the FIFO: the estimator's checks refuse it first, as the
    process backend's copy does."""
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never runs')\n")
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "pipe")
    code = cli.main([str(script), "--channel", f"train={data}", "--backend", "docker", "--output", str(tmp_path / "o")])
    error = capsys.readouterr().err
    assert code == 1 and "pipe is not a regular file (a FIFO, socket or device)" in error, error
    assert not (tmp_path / "o").exists()
