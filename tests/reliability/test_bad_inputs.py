"""The table of bad inputs: the command lines (``smddprun``, ``smddp local``, ``smddp submit``) and the Python APIs
(``smddp_compat.local_mode.JobSpec``, ``smddp_compat.estimators.TensorFlow``, ``smddp_compat.tensorflow``; the SDK v3 plug-ins' rows are in
``tests/estimators/sdk3/test_bad_inputs.py``, run in ``.venv-sdk3``).

Every row checks what the README promises:
- the error names the bad value and the fix (both asserted, as separate words);
- a command line exits 2 with no traceback; a Python API raises the named error class, the kit's one
  ``ConfigurationError`` (or a subclass) whichever package refuses the value, with its field, problem and fix;
- nothing started: the training script, which writes a marker file the moment it runs, never ran; no child process
  appeared under the command; no request reached the AWS endpoint (one that records every request); no collective
  was entered (smddp_compat's stall watchdog counts every eager collective it enters);
- no artifact: the working folder holds only ``train.py`` and the private temporary folder stays empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from smddp_compat.errors import ConfigurationError

from tests.fake_aws import _patch_sts as patch_sts
from tests.reliability.conftest import PROGRAMS, REPO, alive, launch, quiet_env, smddp, smddprun

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
SUBMIT = ("submit", "train.py", "--role", ROLE, "--image-uri", IMAGE)
CORES = len(os.sched_getaffinity(0))
MARKER = "STARTED"  # written by train.py the moment it runs
TRAIN_SCRIPT = "import pathlib\npathlib.Path({marker!r}).write_text('started')\nprint('training')\n"


@dataclass(frozen=True)
class Bad:
    """One bad input on a command line: its arguments, the words naming the value and the fix, the exit code."""

    case: str
    tool: str  # smddprun | local (smddp local) | submit (smddp submit, in-process)
    args: tuple[str, ...]
    value: tuple[str, ...]
    fix: tuple[str, ...]
    exit_code: int = 2
    env: tuple[tuple[str, str], ...] = ()  # the launcher's environment variables


CLI_CASES = [
    # smddprun
    Bad("smddprun-np-0", "smddprun", ("-np", "0", "python3", "train.py"),
        ("-np must be at least 1, got 0",), ("give the number of ranks",)),
    Bad("smddprun-malformed-hosts", "smddprun", ("-np", "2", "-H", "localhost:x", "python3", "train.py"),
        ("'localhost:x'",), ("expected host:slots",)),
    Bad("smddprun-duplicate-host", "smddprun", ("-np", "2", "-H", "localhost:1,localhost:1", "python3", "train.py"),
        ("'localhost' appears more than once",), ("list each host once",)),
    Bad("smddprun-foreign-host", "smddprun", ("-np", "2", "-H", "trainer.invalid:2", "python3", "train.py"),
        ("'trainer.invalid'",), ("Use localhost",)),
    Bad("smddprun-more-ranks-than-slots", "smddprun", ("-np", "3", "-H", "localhost:2", "python3", "train.py"),
        ("-np 3 asks for more ranks than the 2 slots",), ("add slots or lower -np",)),
    Bad("smddprun-negative-timeout", "smddprun", ("-np", "1", "--timeout", "-5", "python3", "train.py"),
        ("--timeout", "got '-5'"), ("expected a positive number of seconds",)),
    Bad("smddprun-zero-grace", "smddprun", ("-np", "1", "--grace", "0", "python3", "train.py"),
        ("--grace", "got '0'"), ("expected a positive number of seconds",)),
    Bad("smddprun-gloo-timeout-not-a-number", "smddprun", ("-np", "1", "--gloo-timeout", "soon", "python3", "train.py"),
        ("--gloo-timeout", "got 'soon'"), ("expected a number of seconds",)),
    Bad("smddprun-stall-shutdown-before-check", "smddprun",
        ("-np", "1", "--stall-check-seconds", "10", "--stall-shutdown-seconds", "5", "python3", "train.py"),
        ("--stall-shutdown-seconds 5 is shorter than --stall-check-seconds 10",), ("raise --stall-shutdown-seconds",)),
    Bad("smddprun-missing-program", "smddprun", ("-np", "1", "/nonexistent/python9", "train.py"),
        ("/nonexistent/python9",), ("Check that the program exists",)),
    Bad("smddprun-no-command", "smddprun", ("-np", "2"), ("needs a command to run",), ("smddprun -np 2 python",)),
    # smddp local
    Bad("local-instance-count-0", "local", ("local", "train.py", "--instance-count", "0"),
        ("instance_count=0",), ("give instance_count >= 1",)),
    Bad("local-processes-per-host-beyond-the-cores", "local",
        ("local", "train.py", "--distribution", "smddp", "--processes-per-host", "100"),
        ("processes_per_host=100", f"this machine (shared by every local host) has only {CORES} CPU core(s)"),
        (f"use processes_per_host <= {CORES}",)),
    Bad("local-unknown-distribution", "local", ("local", "train.py", "--distribution", "hvd"),
        ("distribution='hvd'",), ("use one of: none, smddp, mpi, mwms, dtensor",)),
    Bad("local-missing-entry-point", "local", ("local", "trian.py"),
        ("entry_point='trian.py'",), ("check the path to the training script",)),
    Bad("local-missing-channel", "local", ("local", "train.py", "--channel", "train=/nonexistent/mnist"),
        ("channels['train']='/nonexistent/mnist'",), ("give an existing folder",)),
    Bad("local-hyperparameter-nested-100000-deep", "local",
        ("local", "train.py", "--hyperparameters", "a=" + "[" * 50_000 + "]" * 50_000),
        ("hyperparameters['a']",), ("pass large inputs through a channel",)),
    Bad("local-hyperparameter-not-name-value", "local", ("local", "train.py", "--hyperparameters", "lr"),
        ("--hyperparameters='lr'", "is not NAME=VALUE"), ("write --hyperparameters NAME=VALUE",)),
    Bad("local-hyperparameter-name-with-a-space", "local", ("local", "train.py", "--hyperparameters", "my lr=1"),
        ("hyperparameters='my lr'", "is not a usable hyperparameter name"), ("use letters, digits",)),
    Bad("local-dtensor-mesh-does-not-divide", "local",
        ("local", "train.py", "--distribution", "dtensor", "--instance-count", "2", "--mesh", "batch=3"),
        ("batch=3", "cannot be split evenly over 2 clients"), ("multiple of 2",)),
    Bad("local-reserved-environment", "local", ("local", "train.py", "--env", "SM_HOSTS=[\"algo-9\"]"),
        ("environment['SM_HOSTS']",), ("leave it out",)),
    Bad("local-output-under-a-file", "local", ("local", "train.py", "--output", "train.py/out"),
        ("train.py/out': cannot be written",), ("choose a writable directory",)),
    Bad("local-output-in-proc", "local", ("local", "train.py", "--output", "/proc/x"),
        ("output_path='/proc/x': cannot be written",), ("choose a writable directory",)),
    # smddp tune (its job options are smddp local's, checked by the same rows above)
    Bad("tune-range-form", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective", "v",
                                     "--continuous", "lr=0.1"),
        ("--continuous='lr=0.1'", "is not NAME=MIN:MAX[:SCALING]"), ("--continuous lr=0.001:0.1:Logarithmic",)),
    Bad("tune-objective-without-metric", "local", ("tune", "train.py", "--objective", "acc", "--categorical", "lr=0.1"),
        ("--objective='acc'", "has no metric definition"), ("add --metric 'acc=REGEX'",)),
    Bad("tune-no-range", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective", "v"),
        ("nothing to tune",), ("give --continuous, --integer or --categorical",)),
    Bad("tune-logarithmic-from-0", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective", "v",
                                             "--continuous", "lr=0:1:Logarithmic"),
        ("hyperparameter_ranges['lr']", "logarithmic with values not above 0"), ("give MinValue > 0",)),
    Bad("tune-job-name", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective", "v",
                                   "--categorical", "lr=0.1", "--job-name", "a_very_long_tuning_job_name_over_32"),
        ("--job-name='a_very_long_tuning_job_name_over_32'", "1 to 32"), ("use e.g. lr-sweep-1",)),
    Bad("tune-resource-without-hyperband", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective",
                                                     "v", "--categorical", "lr=0.1", "--max-resource", "3"),
        ("--max-resource/--min-resource", "are Hyperband's"), ("add --strategy Hyperband",)),
    Bad("tune-hyperband-without-epochs", "local", ("tune", "train.py", "--metric", "v=v=([0-9.]+)", "--objective", "v",
                                                   "--continuous", "lr=0.01:0.1", "--strategy", "Hyperband"),
        ("HyperbandStrategyConfig.MaxResource", "cannot be read from the static hyperparameters"),
        ("HyperbandStrategyConfig(max_resource=...) (smddp tune: --max-resource)",)),
    Bad("local-job-network", "local", ("local", "train.py"), ("SMDDP_JOB_NETWORK='bogus'",), ("'private'", "'host'"),
        env=(("SMDDP_JOB_NETWORK", "bogus"),)),
    Bad("smddprun-job-network", "smddprun", ("-np", "2", "python3", "train.py"), ("SMDDP_JOB_NETWORK='bogus'",),
        ("'private'", "'host'"), env=(("SMDDP_JOB_NETWORK", "bogus"),)),
    Bad("local-max-run-0", "local", ("local", "train.py", "--max-run", "0"), ("max_run=0",), ("e.g. max_run=3600",)),
    Bad("local-max-run-over-a-year", "local", ("local", "train.py", "--max-run", "31536001"), ("max_run=31536001",),
        ("more than one year",)),
    Bad("local-max-run-1e308", "local", ("local", "train.py", "--max-run", "1e308"), ("max_run=1e+308",),
        ("more than one year",)),
    Bad("local-instance-count-100000", "local", ("local", "train.py", "--instance-count", "100000"),
        ("instance_count=100000",), ("give at most 64",)),
    Bad("local-docker-backend-instance-count-0", "local", ("local", "train.py", "--backend", "docker",
        "--instance-count", "0"), ("instance_count=0",), ("give instance_count >= 1",)),  # the process backend's
    Bad("local-docker-backend-max-run-not-whole", "local", ("local", "train.py", "--backend", "docker",
        "--max-run", "1.5"), ("max_run=1.5",), ("give a whole number",)),  # the estimator's, before any server
    Bad("local-request-without-docker-backend", "local", ("local", "--request", "request.json"),
        ("--request needs --backend docker",), ("Use `smddp local --backend docker --request ...` alone",)),
    Bad("local-unknown-backend", "local", ("local", "train.py", "--backend", "kubernetes"),
        ("invalid choice: 'kubernetes'",), ("choose from", "process", "docker")),
    # smddp submit (estimators)
    Bad("submit-unknown-instance-type", "submit", (*SUBMIT, "--instance-type", "ml.zz9.huge"),
        ("instance_type='ml.zz9.huge'",), ("smddp_compat.estimators.known_instance_types()",)),
    Bad("submit-instance-type-typo", "submit", (*SUBMIT, "--instance-type", "ml.p4d.24xlarg"),
        ("instance_type='ml.p4d.24xlarg'",), ("did you mean 'ml.p4d.24xlarge'",)),
    Bad("submit-instance-count-0", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--instance-count", "0"),
        ("instance_count=0",), ("instance_count=1",)),
    Bad("submit-processes-per-host-beyond-the-gpus", "submit",
        (*SUBMIT, "--instance-type", "ml.p4d.24xlarge", "--distribution", "smddp", "--processes-per-host", "9"),
        ("processes_per_host']=9", "at most 8 processes per host fit"), ("use processes_per_host <= 8",)),
    Bad("submit-local-process-beyond-the-cores", "submit",
        ("submit", "train.py", "--instance-type", "local_process", "--distribution", "smddp",
         "--processes-per-host", "100"),
        ("processes_per_host']=100",), (f"use processes_per_host <= {CORES}",)),
    Bad("submit-bad-role-arn", "submit",
        ("submit", "train.py", "--role", "SageMakerRole", "--image-uri", IMAGE, "--instance-type", "ml.c5.xlarge"),
        ("role='SageMakerRole'",), ("arn:aws:iam::",)),
    Bad("submit-unknown-distribution", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--distribution", "ps"),
        ("--distribution='ps'",), ("use one of: none, smddp, mpi, mwms, dtensor",)),
    Bad("submit-mpi-options-with-shell-metacharacters-on-no-mpi", "submit",
        (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--custom-mpi-options", "; touch pwned"),
        ("--custom-mpi-options='; touch pwned'",), ("drop the option",)),
    Bad("submit-dtensor-mesh-does-not-fill", "submit",
        (*SUBMIT, "--instance-type", "ml.p4d.24xlarge", "--instance-count", "2", "--distribution", "dtensor",
         "--mesh", "batch=6"), ("{'batch': 6}",), ("make the product of the mesh sizes 16",)),
    Bad("submit-missing-channel", "submit", (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--channel", "train=data"),
        ("--channel train='data'",), ("give an existing path or an s3:// URI",)),
    Bad("submit-local-process-hyperparameter-name-with-a-space", "submit",
        ("submit", "train.py", "--instance-type", "local_process", "--hyperparameters", "my lr=1"),
        ("hyperparameters='my lr'", "is not a usable hyperparameter name"), ("use letters, digits",)),
    Bad("submit-hyperparameter-not-name-value", "submit",
        (*SUBMIT, "--instance-type", "ml.c5.xlarge", "--hyperparameters", "lr"),
        ("--hyperparameters='lr'", "is not NAME=VALUE"), ("write --hyperparameters NAME=VALUE",)),  # one parser
]


def assert_no_half_written_artifacts(root: Path) -> None:
    """Nothing half-written under ``root``: no temporary file, and a model.tar.gz there (SageMaker stores a failed
    job's model too) is a whole archive."""
    import tarfile

    for path in root.rglob("*"):
        assert not path.name.endswith(".tmp") and not path.name.startswith("."), path
        if path.name == "model.tar.gz":
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        archive.extractfile(member).read()  # type: ignore[union-attr]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding a TF-free train.py that writes ``MARKER`` when it runs, made the current directory."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN_SCRIPT.format(marker=str(work / MARKER)))
    monkeypatch.chdir(work)
    return work


def assert_nothing_started_and_nothing_left(workdir: Path, private_tmp: Path) -> None:
    """The script never ran, and nothing was written: the working folder holds train.py alone, temp is empty."""
    assert not (workdir / MARKER).exists(), "the training script ran"
    assert sorted(p.name for p in workdir.iterdir()) == ["train.py"]
    assert sorted(p.name for p in private_tmp.iterdir()) == []


class _RecordingEndpoint(BaseHTTPRequestHandler):
    """An AWS endpoint that records every request and fails it."""

    requests: list[str]

    def _record(self) -> None:
        self.requests.append(f"{self.command} {self.path}")
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _record

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def aws_requests(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """AWS settings whose endpoint records every request (and fails it); yields the list of requests."""
    requests: list[str] = []
    handler = type("Handler", (_RecordingEndpoint,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config_dir = tmp_path_factory.mktemp("aws-config")
    config = config_dir / "sagemaker-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "not-a-real-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(config_dir / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(config_dir / "none"),
        "AWS_MAX_ATTEMPTS": "1",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
        "SAGEMAKER_VALIDATE_ROLE": "false",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }.items():
        monkeypatch.setenv(name, value)
    # The SageMaker SDK sends STS calls to a regional endpoint of its own, not to AWS_ENDPOINT_URL: point it here too.
    patch_sts(monkeypatch, os.environ["AWS_ENDPOINT_URL"])
    try:
        yield requests
    finally:
        server.shutdown()
        server.server_close()


def _assert_names_value_and_fix(message: str, value: tuple[str, ...], fix: tuple[str, ...]) -> None:
    for words in value:
        assert words in message, f"the value ({words!r}) is not named in: {message}"
    for words in fix:
        assert words in message, f"the fix ({words!r}) is not named in: {message}"


@pytest.mark.processes
@pytest.mark.parametrize("bad", CLI_CASES, ids=[b.case for b in CLI_CASES])
def test_bad_command_line_input(bad: Bad, workdir: Path, aws_requests: list[str], private_tmp: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    if bad.tool == "submit":
        pytest.importorskip("sagemaker.tensorflow", reason="smddp submit needs the SageMaker SDK v2")
        from smddp_compat.commands.cli import main

        code = main(list(bad.args))
        error = capsys.readouterr().err
        assert aws_requests == [], "an AWS request was sent before the input was checked"
    else:
        argv = smddprun(*bad.args) if bad.tool == "smddprun" else smddp(*bad.args)
        ran = launch(argv, env=quiet_env(**dict(bad.env)), cwd=str(workdir), timeout=120)
        code, error = ran.returncode, ran.stderr
        if bad.case == "smddprun-missing-program":
            # The launcher forks, and the fork's exec of the missing program fails: a watcher on a loaded machine may
            # see that fork for a moment. What counts is that nothing ran and nothing is left.
            assert not alive(ran.descendants), f"processes were left: {ran.descendants}"
        else:
            assert ran.descendants == set(), f"processes were started: {ran.descendants}"
        assert "Traceback" not in error  # (in-process, the SDK's log handlers may hold an earlier test's stderr)
    assert code == bad.exit_code, error
    _assert_names_value_and_fix(error, bad.value, bad.fix)
    assert_nothing_started_and_nothing_left(workdir, private_tmp)


# -- failures that need a job to start or a special file system -----------------------------------------------------

@contextlib.contextmanager
def tiny_filesystem(path: Path, size: str, *options: str) -> Iterator[bool]:
    """Mounts a tmpfs of ``size`` at ``path`` (yields True), or yields False when mounting is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)],
                           capture_output=True, text=True, timeout=30) if os.geteuid() == 0 else None
    mounted = mount is not None and mount.returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=True)


def _limit_file_size() -> None:
    # Fallback for a full disk where tmpfs cannot be mounted: files over 150 kB fail with EFBIG, not SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))


@pytest.mark.processes
def test_full_disk_fails_the_job_without_a_partial_model_tarball(tmp_path: Path) -> None:
    out = tmp_path / "disk"
    with tiny_filesystem(out, "64k") as mounted:
        proc = subprocess.run(
            smddp("local", "write_model.py", "--source-dir", str(PROGRAMS), "--output", str(out / "jobs"),
                  "--job-name", "full-disk", "--hyperparameters", "files=4", "file-bytes=100000"),
            env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
            preexec_fn=None if mounted else _limit_file_size,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "model written" in proc.stdout  # the script succeeded; storing its model failed
        expected = "No space left on device" if mounted else "File too large"
        assert f"could not write {out / 'jobs' / 'full-disk' / 'output' / 'model.tar.gz'}" in proc.stderr
        assert expected in proc.stderr and "Fix: free disk space or choose another output path" in proc.stderr
        assert_no_half_written_artifacts(out)


@pytest.mark.processes
def test_unwritable_output_folder_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    out = tmp_path / "read-only"
    with tiny_filesystem(out, "64k", "ro") as mounted:
        target = out / "jobs" if mounted else tmp_path / "train.py" / "jobs"
        (tmp_path / "train.py").write_text("print('training')\n")
        proc = subprocess.run(smddp("local", "train.py", "--output", str(target)), env=quiet_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert f"output_path='{target}': cannot be written" in proc.stderr
        assert "Fix: choose a writable directory" in proc.stderr
        assert "training" not in proc.stdout
        assert not target.exists()


@pytest.mark.processes
def test_mismatched_tensor_shapes_across_ranks_fail_the_local_job(tmp_path: Path) -> None:
    proc = subprocess.run(
        smddp("local", "mismatched_shapes.py", "--source-dir", str(PROGRAMS), "--distribution", "smddp",
              "--instance-count", "2", "--output", str(tmp_path / "out"), "--job-name", "mismatch", "--max-run",
              "240"),
        env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "failure reason: " in output and "CollectiveError: allreduce failed across ranks" in output, output
    assert "Mismatched" in output and "make the tensor the same shape and dtype on every rank" in output
    assert_no_half_written_artifacts(tmp_path / "out")


@pytest.mark.processes
def test_global_batch_not_divisible_by_the_replicas(tmp_path: Path) -> None:
    proc = subprocess.run(
        smddp("local", "keras_mwms.py", "--source-dir", str(REPO / "entry_points"), "--distribution", "mwms",
              "--instance-count", "2", "--hyperparameters", "global-batch-size=7", "epochs=1",
              "--output", str(tmp_path / "out"), "--job-name", "bad-batch", "--max-run", "240"),
        env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "--global-batch-size=7: is not divisible by the 2 replicas in sync" in output, output
    assert "use a multiple of 2" in output
    assert_no_half_written_artifacts(tmp_path / "out")


# -- Python APIs ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compat_api_errors(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The errors of bad smddp_compat.tensorflow calls, made in one single-rank process with the stall watchdog on
    (it counts the collectives entered), in an empty working folder."""
    work = tmp_path_factory.mktemp("compat-api")
    stall = tmp_path_factory.mktemp("compat-api-stall")
    proc = subprocess.run([sys.executable, str(PROGRAMS / "api_errors.py")], cwd=work,
                          env=quiet_env(SMDDP_STALL_DIR=str(stall)), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULTS "))
    results = json.loads(line[len("RESULTS "):])
    assert results["control"]["entered"] == 1, "the watchdog did not count a good collective"
    return {**results, "files_left": sorted(p.name for p in work.iterdir())}


# (case, error class, words naming the value, words naming the fix)
COMPAT_CASES = [
    ("allreduce-unknown-op", "UsageError", ("unknown reduction op 'median'",), ("use one of ReduceOp.AVERAGE",)),
    ("allreduce-unknown-op-number", "UsageError", ("unknown reduction op 7",), ("use one of ReduceOp.AVERAGE",)),
    ("allreduce-unknown-compression", "UsageError", ("unknown compression 'zip'",), ("Compression.fp16",)),
    ("allreduce-param-index-too-large", "UsageError", ("param_index 5",), ("smaller than num_params 1",)),
    ("allreduce-num-params-0", "UsageError", ("got 0",), ("num_params must be an integer >= 1",)),
    ("oob-allreduce-unknown-op", "UsageError", ("unknown reduction op 'median'",), ("use one of ReduceOp.AVERAGE",)),
    ("broadcast-root-out-of-range", "UsageError", ("root_rank 5 is out of range",), ("this job has ranks 0..0",)),
    ("broadcast-negative-root", "UsageError", ("root_rank -1 is out of range",), ("this job has ranks 0..0",)),
    ("broadcast-variables-root-out-of-range", "UsageError", ("root_rank 3 is out of range",),
     ("this job has ranks 0..0",)),
    ("optimizer-bad-bucket", "UsageError", ("got -1",), ("must be a positive number of megabytes (default 25)",)),
    ("optimizer-bucket-not-a-multiple-of-128-bytes", "UsageError", ("bucket_cap_mb=1e-09",),
     ("use a whole number of megabytes such as 25",)),
    ("optimizer-device-sparse", "NotSupportedError", ("device_sparse='/gpu:0' is not supported",),
     ("Remove the device_sparse argument",)),
    ("optimizer-wraps-a-string", "UsageError", ("cannot wrap builtins.str",), ("pass a Keras optimizer",)),
    ("tape-device-dense", "NotSupportedError", ("device_dense='/gpu:0' is not supported",),
     ("Remove the device_dense",)),
    ("tape-wraps-a-string", "UsageError", ("got str",), ("pass `tape`",)),
]


@pytest.mark.processes
def test_bad_compat_calls_leave_no_file(compat_api_errors: dict) -> None:
    assert compat_api_errors["files_left"] == []


@pytest.mark.processes
@pytest.mark.parametrize("case, kind, value, fix", COMPAT_CASES, ids=[c[0] for c in COMPAT_CASES])
def test_bad_smddp_compat_call(compat_api_errors: dict, case: str, kind: str, value: tuple[str, ...],
                               fix: tuple[str, ...]) -> None:
    result = compat_api_errors[case]
    assert result["error"] is not None, f"{case} was accepted"
    assert result["error"] == kind, result
    _assert_names_value_and_fix(result["message"], value, fix)
    assert result["entered"] == 0, f"{case} entered a collective before refusing its input"


def _jobspec(**overrides: object) -> Callable[[], None]:
    def build() -> None:
        from smddp_compat.local_mode import JobSpec

        JobSpec(**{"entry_point": "train.py", **overrides})

    return build


def _estimator(fit: bool = False, **overrides: object) -> Callable[[], None]:
    def build() -> None:
        from smddp_compat.estimators import TensorFlow

        kwargs = dict(entry_point="train.py", role=ROLE, instance_type="ml.c5.xlarge", instance_count=1,
                      image_uri=IMAGE, framework_version="2.21", py_version="py311")
        kwargs.update(overrides)
        TensorFlow(**kwargs).fit(wait=False, job_name="must-not-start")

    return build


def _with_environment(call: Callable[[], None], **variables: str) -> Callable[[], None]:
    def run() -> None:
        from unittest import mock

        with mock.patch.dict(os.environ, variables):
            call()

    return run


SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}
MLFLOW_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"

# (case, call, error class, words naming the value, words naming the fix)
API_CASES = [
    ("jobspec-hyperparameter-not-json", _jobspec(hyperparameters={"optimizer": object()}), "HyperparameterError",
     ("hyperparameters['optimizer']", "is not JSON-serialisable"), ("pass a string, number, boolean",)),
    ("jobspec-hyperparameter-name-with-a-space", _jobspec(hyperparameters={"my lr": 1}), "HyperparameterError",
     ("hyperparameters='my lr'", "is not a usable hyperparameter name"), ("use letters, digits",)),
    ("jobspec-mesh-does-not-divide", _jobspec(distribution="dtensor", instance_count=2, dtensor_mesh={"batch": 3}),
     "ConfigurationError", ("dtensor_mesh", "cannot be split evenly over 2 clients"), ("multiple of 2",)),
    ("jobspec-processes-per-host-beyond-the-cores", _jobspec(distribution="smddp", processes_per_host=CORES + 1),
     "ConfigurationError", (f"processes_per_host={CORES + 1}",), (f"use processes_per_host <= {CORES}",)),
    ("jobspec-output-in-proc", _jobspec(output_path="/proc/x"), "ConfigurationError",
     ("output_path='/proc/x': cannot be written",), ("choose a writable directory",)),
    ("estimator-unknown-instance-type", _estimator(instance_type="ml.zz9.huge"), "UnknownInstanceTypeError",
     ("instance_type='ml.zz9.huge'",), ("known_instance_types()",)),
    ("estimator-instance-count-0", _estimator(instance_count=0), "ConfigurationError",
     ("instance_count=0",), ("instance_count=1",)),
    ("estimator-hyperparameter-not-json", _estimator(hyperparameters={"optimizer": {1, 2}}), "ConfigurationError",
     ("hyperparameters['optimizer']", "not JSON-serialisable"), ("use a str, int, float, bool, list or dict",)),
    ("estimator-bad-role", _estimator(role="arn:aws:iam::12:role/x"), "ConfigurationError",
     ("role='arn:aws:iam::12:role/x'",), ("arn:aws:iam::123456789012:role/",)),
    ("estimator-processes-per-host-beyond-the-vcpus",
     _estimator(distribution={"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 5}}}),
     "ConfigurationError", ("processes_per_host']=5", "ml.c5.xlarge has only 4 vCPU(s)"),
     ("use processes_per_host <= 4",)),
    ("estimator-two-distributions", _estimator(distribution={**SMDDP, "mpi": {"enabled": True}}),
     "ConfigurationError", ("distribution=",), ("exactly one",)),
    # The same name rule as local_mode's, checked when the estimator is built, and an estimators error.
    ("estimator-local-process-hyperparameter-name-with-a-space",
     _estimator(instance_type="local_process", role=None, image_uri=None, hyperparameters={"my lr": 1}),
     "ConfigurationError", ("hyperparameters='my lr'", "is not a usable hyperparameter name"), ("use letters, digits",)),
    ("estimator-local-process-output-in-proc",
     _estimator(instance_type="local_process", role=None, image_uri=None, output_path="/proc/x"),
     "ConfigurationError", ("output_path='/proc/x': cannot be written",), ("choose a writable directory",)),
    # MLflow: a job on SageMaker is tracked by SageMaker's managed MLflow, named by its ARN (a URI: local_process)
    ("estimator-mlflow-uri-for-a-sagemaker-job", _estimator(mlflow="http://127.0.0.1:5000"), "ConfigurationError",
     ("mlflow='http://127.0.0.1:5000'", "is not SageMaker's MLflow", "local_process"), ("mlflow='arn:aws:sagemaker:",)),
    ("estimator-mlflow-config-sagemaker-refuses", _estimator(mlflow={"MlflowResourceArn": MLFLOW_ARN,
                                                                      "MlflowRunName": ""}),
     "ConfigurationError", ("MlflowConfig.MlflowRunName=''", "has 0 characters"), ("1 to 256 characters",)),
    # MLflow's own variable, read by fit(): an ARN names SageMaker's managed MLflow, which no local job reaches
    ("estimator-local-process-mlflow-arn-in-the-environment", _with_environment(
        _estimator(instance_type="local_process", role=None, image_uri=None), MLFLOW_TRACKING_URI=MLFLOW_ARN),
     "ConfigurationError", (f"MLFLOW_TRACKING_URI (environment)='{MLFLOW_ARN}'", "names SageMaker's managed MLflow"),
     ("http://HOST:PORT", "mlflow=False")),
]


@pytest.mark.parametrize("case, call, kind, value, fix", API_CASES, ids=[c[0] for c in API_CASES])
def test_bad_python_api_call(case: str, call: Callable[[], None], kind: str, value: tuple[str, ...],
                             fix: tuple[str, ...], workdir: Path, aws_requests: list[str], private_tmp: Path) -> None:
    if case.startswith("estimator"):
        pytest.importorskip("sagemaker.tensorflow", reason="smddp_compat.estimators.TensorFlow needs the SageMaker SDK v2")
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value).__name__ == kind, repr(info.value)
    # Whichever package refuses it (the estimator or local_mode it calls), the kit's one ConfigurationError, with
    # the field and the fix as data, not only in the message.
    assert isinstance(info.value, ConfigurationError), repr(info.value)
    assert info.value.field and info.value.problem and info.value.fix, info.value.details()
    _assert_names_value_and_fix(str(info.value), value, fix)
    assert aws_requests == [], "an AWS request was sent before the input was checked"
    assert_nothing_started_and_nothing_left(workdir, private_tmp)
