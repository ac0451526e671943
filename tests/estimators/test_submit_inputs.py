"""Inputs of ``smddp submit|status|logs|wait|fetch`` and of the v2 estimator that used to end in a traceback, be
sent to AWS unchecked, or be silently misread (issue 19, item 6), against moto's server.

Every refusal here exits 2 (or raises ``ConfigurationError``) with the option, the value and the fix, before any
upload, any training job and, where it says so, before any HTTP request at all.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from tests.estimators.conftest import ROLE

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

from smddp_compat.commands.submit_cli import main  # noqa: E402

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
LOOPBACK = ("127.0.0.1", "localhost")


def _submit_args(script: str, *extra: str) -> list[str]:
    return ["submit", script, "--instance-type", "ml.p3.16xlarge", "--instance-count", "2", "--role", ROLE,
            "--image-uri", IMAGE, *extra]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Every HTTP request the process starts (botocore and ``requests`` both go through urllib3's pools), as
    ``(host, method, url)``. Requests to anything but loopback are recorded and refused here, never sent."""
    import urllib3

    requests: list[tuple[str, str, str]] = []
    original = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def urlopen(pool: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        requests.append((pool.host, method, url))
        if pool.host not in LOOPBACK:
            raise urllib3.exceptions.ProtocolError(f"test: no request may leave loopback (to {pool.host})")
        return original(pool, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", urlopen)
    return requests


@pytest.fixture
def telemetry(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Calls of the SDK's telemetry sender (which then tries its request, refused by ``sent``)."""
    from sagemaker.telemetry import telemetry_logging

    calls: list[tuple[Any, ...]] = []
    original = telemetry_logging._send_telemetry_request

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", spy)
    return calls


@pytest.fixture
def no_region(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto as before, but no region anywhere in the AWS configuration."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    return aws


def _assert_nothing_created(aws: Any) -> None:
    assert aws.all_objects() == [] and aws.training_jobs() == []


# -- 1. a region that does not exist ---------------------------------------------------------------------------------


def test_submit_refuses_a_region_that_does_not_exist(aws, tiny_script, sent, capsys):
    assert main(_submit_args(tiny_script, "--region", "xx-nowhere-1")) == 2
    err = capsys.readouterr().err
    assert "--region='xx-nowhere-1'" in err and "not a region" in err and "Fix:" in err
    assert sent == []
    _assert_nothing_created(aws)


@pytest.mark.parametrize("command", [["status", "job-1"], ["logs", "job-1"], ["wait", "job-1"],
                                     ["fetch", "job-1", "model"]])
def test_job_commands_refuse_a_region_that_does_not_exist(aws, sent, capsys, command):
    assert main([*command, "--region", "xx-nowhere-1"]) == 2
    assert "--region='xx-nowhere-1'" in capsys.readouterr().err
    assert sent == []


def test_a_region_from_the_environment_is_checked_too(aws, tiny_script, sent, monkeypatch, capsys):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-esat-1")
    monkeypatch.setenv("AWS_REGION", "us-esat-1")
    assert main(["status", "job-1"]) == 2
    err = capsys.readouterr().err
    assert "'us-esat-1'" in err and "AWS_DEFAULT_REGION" in err and "us-east-1" in err  # the close match
    assert sent == []


def test_regions_of_other_partitions_are_accepted():
    from smddp_compat.estimators._validation import check_region

    for region in ("us-east-1", "cn-north-1", "us-gov-west-1", "eu-central-2"):
        assert check_region(region) == region


# -- 2. a missing region hides nothing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, words",
    [
        ({"entry_point": "no_such_script.py"}, "entry_point='no_such_script.py': no such file"),
        ({"--instance-type": "ml.nope.large"}, "ml.nope.large"),
        ({"--role": "not-an-arn"}, "role='not-an-arn'"),
        ({"--output": "./out"}, "--output='./out': is not an s3://bucket/prefix URI"),
        ({"--max-run": "0"}, "--max-run=0"),
        ({}, None),  # a correct job: the missing region is the mistake
    ],
)
def test_no_region_does_not_hide_the_jobs_own_mistakes(no_region, tiny_script, sent, capsys, change, words):
    argv = _submit_args(tiny_script)
    for key, value in change.items():
        if key == "entry_point":
            argv[1] = value
        elif key in argv:
            argv[argv.index(key) + 1] = value
        else:
            argv += [key, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    if words is None:  # a correct job: now the region is the mistake
        assert "--region" in err and "AWS_DEFAULT_REGION" in err
    else:
        assert words in err and "region" not in err
    assert sent == []
    _assert_nothing_created(no_region)


def test_no_region_is_its_own_clear_error(no_region, tiny_script, sent, capsys):
    assert main(_submit_args(tiny_script)) == 2
    err = capsys.readouterr().err
    assert "--region=None: no AWS region is configured" in err
    assert "set --region or AWS_DEFAULT_REGION" in err and "Traceback" not in err
    assert sent == []
    for command in (["status", "job-1"], ["logs", "job-1"], ["wait", "job-1"], ["fetch", "job-1", "model"]):
        assert main(command) == 2
        assert "set --region or AWS_DEFAULT_REGION" in capsys.readouterr().err
    assert sent == []


def test_the_estimator_without_a_region_raises_configuration_error(no_region, tiny_script, sent):
    from smddp_compat.estimators import ConfigurationError, TensorFlow

    with pytest.raises(ConfigurationError) as info:
        TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", instance_count=2,
                   image_uri=IMAGE, framework_version="2.21", py_version="py311")
    assert info.value.field == "region" and "AWS_DEFAULT_REGION" in info.value.fix
    with pytest.raises(ConfigurationError) as info:  # the region given: accepted
        TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                   framework_version="2.21", py_version="py311", region="xx-nowhere-1")
    assert info.value.field == "region" and info.value.value == "xx-nowhere-1"
    est = TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                     framework_version="2.21", py_version="py311", region="us-east-1")
    assert est.sagemaker_session.boto_region_name == "us-east-1"
    assert sent == []


# -- 3. no telemetry -------------------------------------------------------------------------------------------------


def _user_config(tmp_path: Any, modules: str = "") -> str:
    """A user config of the SDK that sets the default bucket (and ``modules`` lines under PythonSDK.Modules)."""
    path = tmp_path / "user-config.yaml"
    path.write_text(
        "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n"
        "      Session:\n        DefaultS3Bucket: users-own-bucket\n" + modules
    )
    return str(path)


def _telemetry_requests(sent: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [r for r in sent if r[0] not in LOOPBACK or "telemetry" in r[2]]


def test_submit_sends_no_telemetry_and_keeps_the_users_config(aws, tiny_script, tmp_path, sent, telemetry,
                                                               monkeypatch, capsys):
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", _user_config(tmp_path))
    assert main(_submit_args(tiny_script, "--job-name", "quiet-job")) == 0, capsys.readouterr().err
    assert "quiet-job" in aws.training_jobs()
    assert telemetry == [] and _telemetry_requests(sent) == []
    assert sent, "the recorder saw the job's own requests"
    # The user's config still applies: the code went to their default bucket.
    assert any(bucket == "users-own-bucket" and key.startswith("quiet-job/") for bucket, key in aws.all_objects())


def test_the_estimator_sends_no_telemetry_without_any_user_config(aws, tiny_script, sent, telemetry, monkeypatch):
    from smddp_compat.estimators import TensorFlow

    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", os.devnull)  # an empty config: no opt-out of its own
    est = TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                     framework_version="2.21", py_version="py311")
    est.fit(wait=False, job_name="quiet-estimator")
    assert "quiet-estimator" in aws.training_jobs()
    assert telemetry == [] and _telemetry_requests(sent) == []


def test_an_explicit_telemetry_opt_in_is_respected(aws, tiny_script, tmp_path, sent, telemetry, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE",
                       _user_config(tmp_path, "      TelemetryOptOut: false\n"))
    assert main(_submit_args(tiny_script, "--job-name", "chatty-job")) == 0
    assert len(telemetry) == 1  # the user asked for it; the recorder kept it on loopback


# -- 4. numeric options ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        (["--instance-count", "-1"], "instance_count=-1: must be an integer >= 1"),  # the estimator's name
        (["--max-run", "0"], "--max-run=0: must be an integer >= 1"),
        (["--max-run", "-600"], "--max-run=-600"),
        (["--processes-per-host", "0"], "--processes-per-host=0"),
        (["--distribution", "dtensor", "--devices-per-process", "0"], "--devices-per-process=0"),
        (["--timeout", "nan"], "--timeout=nan: must be a finite number of seconds > 0"),
        (["--timeout", "inf"], "--timeout=inf"),
        (["--timeout", "-1"], "--timeout=-1.0"),
        (["--timeout", "0"], "--timeout=0.0"),
        (["--poll", "nan"], "--poll=nan"),
        (["--poll", "0"], "--poll=0.0"),
        (["--poll=-inf"], "--poll=-inf"),  # argparse reads a separate "-inf" as an option
    ],
)
def test_submit_refuses_bad_numbers_naming_the_option(aws, tiny_script, capsys, args, words):
    assert main(_submit_args(tiny_script, *args)) == 2
    err = capsys.readouterr().err
    assert words in err and "Fix:" in err
    _assert_nothing_created(aws)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["wait", "job-1", "--timeout", "nan"], "--timeout=nan"),
        (["wait", "job-1", "--timeout", "inf"], "--timeout=inf"),
        (["wait", "job-1", "--poll", "0"], "--poll=0.0"),
        (["logs", "job-1", "--max-events", "0"], "--max-events=0"),
        (["logs", "job-1", "--max-events", "-5"], "--max-events=-5"),
    ],
)
def test_job_commands_refuse_bad_numbers_before_any_request(aws, sent, capsys, argv, words):
    assert main(argv) == 2
    assert words in capsys.readouterr().err
    assert sent == []


@pytest.mark.parametrize(
    "field, value",
    [("max_run", 0), ("max_run", -1), ("max_run", math.nan), ("volume_size", 0), ("volume_size", math.inf),
     ("max_wait", -5), ("max_run", True), ("output_path", "./out"), ("output_path", "s3://")],
)
def test_the_estimator_refuses_bad_numbers_and_output_paths(aws, tiny_script, field, value):
    from smddp_compat.estimators import ConfigurationError, TensorFlow

    with pytest.raises(ConfigurationError) as info:
        TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                   framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session(),
                   **{field: value})
    assert info.value.field == field
    _assert_nothing_created(aws)


# -- 4. names: job names and fetch destinations ----------------------------------------------------------------------

BAD_JOB_NAMES = ["bad_name", "../etc", "a/b", "trailing-", "x" * 64, "", "job.1"]


@pytest.mark.parametrize("name", BAD_JOB_NAMES)
@pytest.mark.parametrize("command", ["status", "logs", "wait", "fetch"])
def test_job_commands_refuse_a_malformed_job_name_locally(aws, sent, tmp_path, capsys, command, name):
    argv = [command, name] + ([str(tmp_path / "model")] if command == "fetch" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"JOB={name!r}" in err and "letters, digits and '-'" in err
    assert sent == []
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("name", ["bad_name", "../etc", "a/b"])
def test_submit_refuses_a_malformed_job_name_before_uploading(aws, tiny_script, tmp_path, capsys, name):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x").write_text("x")
    assert main(_submit_args(tiny_script, "--job-name", name, "--channel", f"train={data}")) == 2
    assert f"--job-name={name!r}" in capsys.readouterr().err
    _assert_nothing_created(aws)


def test_fit_refuses_a_malformed_job_name_before_uploading(aws, tiny_script):
    from smddp_compat.estimators import ConfigurationError, TensorFlow

    est = TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                     framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session())
    with pytest.raises(ConfigurationError) as info:
        est.fit(wait=False, job_name="../escape")
    assert info.value.field == "job_name"
    with pytest.raises(ConfigurationError) as info:
        TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                   framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session(),
                   base_job_name="my_job")
    assert info.value.field == "base_job_name"
    _assert_nothing_created(aws)


@pytest.fixture
def fetched_job(aws: Any, tiny_script: str, tmp_path: Any) -> str:
    """A completed job ``fetch-me`` whose model.tar.gz is in S3."""
    import io
    import tarfile

    aws.client("s3").create_bucket(Bucket="artifacts")
    assert main(_submit_args(tiny_script, "--job-name", "fetch-me", "--output", "s3://artifacts/jobs")) == 0
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("weights.bin")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
    aws.client("s3").upload_file(str(archive), "artifacts", "jobs/fetch-me/output/model.tar.gz")
    return "fetch-me"


def test_fetch_refuses_destinations_it_cannot_write_as_errors_not_tracebacks(fetched_job, tmp_path, monkeypatch,
                                                                            capsys):
    empty = tmp_path / "empty-cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert main(["fetch", fetched_job, "."]) == 2
    assert "DEST='.': is the current directory" in capsys.readouterr().err
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for dest, words in [
        (str(link), "is a symbolic link"),
        ("", "must be a directory path"),
        (str(a_file / "model"), "cannot be created"),
    ]:
        assert main(["fetch", fetched_job, dest]) == 2, dest
        err = capsys.readouterr().err
        assert f"DEST={dest!r}" in err and words in err
    assert os.listdir(target) == [] and a_file.read_text() == "x"
    assert [p for p in os.listdir(tmp_path) if p.startswith(".smddp-fetch")] == []
    # A correct destination still works.
    assert main(["fetch", fetched_job, str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "weights.bin").read_bytes() == b"ok"


# -- 5. channel names that are not one folder ------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".", ".."])
def test_submit_refuses_a_channel_named_dot_before_uploading(aws, tiny_script, tmp_path, capsys, name):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x").write_text("x")
    assert main(_submit_args(tiny_script, "--channel", f"{name}={data}")) == 2
    err = capsys.readouterr().err
    assert f"--channel={name!r}" in err and "Fix:" in err and "Traceback" not in err
    _assert_nothing_created(aws)


@pytest.mark.parametrize("name", [".", ".."])
def test_fit_refuses_a_channel_named_dot_before_uploading(aws, tiny_script, name):
    from smddp_compat.estimators import ConfigurationError, TensorFlow

    est = TensorFlow(entry_point=tiny_script, role=ROLE, instance_type="ml.p3.16xlarge", image_uri=IMAGE,
                     framework_version="2.21", py_version="py311", sagemaker_session=aws.sagemaker_session())
    with pytest.raises(ConfigurationError) as caught:
        est.fit({name: "s3://bucket/data"}, wait=False)
    assert caught.value.field == "inputs" and caught.value.value == name
    _assert_nothing_created(aws)


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_submit_refuses_a_channel_holding_a_fifo_or_a_device_before_uploading(aws, tiny_script, tmp_path, capsys,
                                                                              special):
    """The SDK's upload would wait forever on a FIFO and never finish reading /dev/zero: refused by name first."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    if special == "fifo":
        os.mkfifo(data / "pipe")
    else:
        (data / "pipe").symlink_to("/dev/zero")
    assert main(_submit_args(tiny_script, "--channel", f"train={data}")) == 2
    err = capsys.readouterr().err
    assert "pipe is not a regular file (a FIFO, socket or device)" in err and "Fix:" in err, err
    assert "Traceback" not in err
    _assert_nothing_created(aws)
