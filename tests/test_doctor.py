"""``smddp doctor``: passes on this machine, never prints a credential, and names the fix for what a test removes.

Every case runs the real command (``.venv/bin/smddp doctor``) in a subprocess, so exit codes are the real ones. Only
the first test imports TensorFlow (the full run, ~5-15 s); the removal cases use ``--only`` and take a fraction of a
second each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smddp_compat.image import DockerUnavailableError, find_engine
from tests.conftest import skip_or_fail_without_docker

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[1]
SMDDP = Path(sys.executable).with_name("smddp")
if not SMDDP.exists():
    SMDDP = REPO / ".venv" / "bin" / "smddp"
KIT_DOCKER_HOST = "unix:///run/smddp-compat/docker.sock"
MISSING_DOCKER_HOST = "unix:///nonexistent/smddp-doctor-test/docker.sock"
REQUIRED = ("tensorflow", "keras", "tf-keras", "horovod", "mpirun", "sdk", "test-tools", "datasets", "mlflow")
FAKE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEDOCTORTEST7Q",
    "AWS_SECRET_ACCESS_KEY": "fakeDoctorSecret/9x8y7z6w5v4u3t2s1r0qPONMLK",
    "AWS_SESSION_TOKEN": "FakeDoctorSessionTokenZZZ123",
}
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


def _env(**changes: str | None) -> dict[str, str]:
    """This environment without CI (the tests choose the mode) and with ``changes`` (None: removed)."""
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _doctor(*args: str, env: dict[str, str], timeout: float = 120) -> tuple[int, str, dict[str, str]]:
    """Runs ``smddp doctor ARGS``: exit code, all output, and each check's line by check id."""
    done = subprocess.run([str(SMDDP), "doctor", *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)
    lines = {}
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("ok", "warn", "FAIL"):
            lines[words[1]] = line
    return done.returncode, done.stdout + done.stderr, lines


def _status(line: str) -> str:
    return line.split()[0]


@pytest.fixture(scope="module")
def docker_env() -> dict[str, str]:
    """The environment with a Docker engine that answers (DOCKER_HOST as set, else the kit's own engine); skips
    without one (counted in the summary), fails under CI."""
    env = _env()
    env.setdefault("DOCKER_HOST", KIT_DOCKER_HOST)
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = env["DOCKER_HOST"]
    try:
        find_engine()
    except DockerUnavailableError as exc:
        skip_or_fail_without_docker(exc)
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved
    return env


def test_doctor_passes_here_and_never_prints_a_credential(docker_env: dict[str, str]) -> None:
    env = dict(docker_env, AWS_DEFAULT_REGION="us-west-2", **FAKE_SECRETS)
    started = time.monotonic()
    code, output, lines = _doctor(env=env)
    seconds = time.monotonic() - started
    assert code == 0, output
    assert set(lines) == {"tensorflow", "keras", "tf-keras", "horovod", "mpirun", "job-network", "gpus", "docker",
                          "image", "sdk", "sdk-v3", "test-tools", "mlflow", "aws-region", "aws-credentials", "datasets"}, output
    for name in (*REQUIRED, "job-network", "docker", "aws-region", "aws-credentials"):
        assert _status(lines[name]) == "ok", output
    assert "2.21" in lines["tensorflow"] and "Keras 3." in lines["keras"], output
    assert "gloo yes" in lines["horovod"] and "mpi yes" in lines["horovod"] and "nccl " in lines["horovod"], output
    assert "environment variables" in lines["aws-credentials"] and "us-west-2" in lines["aws-region"], output
    # The image may be stale while the checkout is being edited: then it is a warning naming its fix.
    assert _status(lines["image"]) == "ok" or "run `smddp image`" in lines["image"], output
    assert all(_status(line) != "FAIL" for line in lines.values()), output
    for value in FAKE_SECRETS.values():
        assert value not in output
    assert seconds < 60, f"doctor took {seconds:.1f} s"
    # The machine format carries the same, and no value either.
    code, output, _ = _doctor("--json", "--only", "aws-credentials,aws-region", env=env)
    assert code == 0, output
    report = json.loads(output)
    assert [check["name"] for check in report["checks"]] == ["aws-region", "aws-credentials"]
    assert all(check["status"] == "ok" for check in report["checks"]), report
    for value in FAKE_SECRETS.values():
        assert value not in output


def test_no_docker_names_the_fix_and_is_required_only_under_ci() -> None:
    env = _env(DOCKER_HOST=MISSING_DOCKER_HOST)
    code, output, lines = _doctor("--only", "docker,image", env=env)
    assert code == 0, output  # `smddp local` needs no Docker
    assert _status(lines["docker"]) == "warn", output
    assert MISSING_DOCKER_HOST in lines["docker"], "DOCKER_HOST must be honoured, not replaced by another engine"
    assert "smddp_docker_start" in lines["docker"] and "fix:" in lines["docker"], output
    assert _status(lines["image"]) == "warn" and "no Docker engine" in lines["image"], output
    code, output, lines = _doctor("--only", "docker,image", "--ci", env=env)
    assert code == 1, output
    assert _status(lines["docker"]) == "FAIL" and "smddp_docker_start" in lines["docker"], output
    # CI=true is the same as --ci; --setup (setup.sh's last step) never fails on what setup.sh does not install.
    code, output, lines = _doctor("--only", "docker,image", env=dict(env, CI="true"))
    assert code == 1 and _status(lines["docker"]) == "FAIL", output
    code, output, lines = _doctor("--only", "docker,image", "--setup", env=dict(env, CI="true"))
    assert code == 0 and _status(lines["docker"]) == "warn", output


def test_no_image_names_the_fix(docker_env: dict[str, str]) -> None:
    absent = "smddp-compat:doctor-test-absent"
    code, output, lines = _doctor("--only", "docker,image", "--image", absent, env=docker_env)
    assert code == 0, output
    assert _status(lines["docker"]) == "ok", output
    assert _status(lines["image"]) == "warn" and absent in lines["image"], output
    assert "run `smddp image`" in lines["image"], output
    code, output, lines = _doctor("--only", "docker,image", "--image", absent, "--ci", env=docker_env)
    assert code == 1, output
    assert _status(lines["docker"]) == "ok" and _status(lines["image"]) == "FAIL", output
    assert "run `smddp image`" in lines["image"], output


def test_no_region_names_the_fix(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    bare = _env(**{name: None for name in AWS_VARIABLES})
    env = dict(bare, AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty))
    code, output, lines = _doctor("--only", "aws-region,aws-credentials", env=env)
    assert code == 0, output  # neither README command needs AWS
    assert _status(lines["aws-region"]) == "warn" and "fix: set AWS_DEFAULT_REGION" in lines["aws-region"], output
    assert _status(lines["aws-credentials"]) == "warn" and "AWS_ACCESS_KEY_ID" in lines["aws-credentials"], output
    # AWS_REGION alone is not read by boto3: said so, with the fix.
    code, output, lines = _doctor("--only", "aws-region", env=dict(env, AWS_REGION="eu-west-1"))
    assert _status(lines["aws-region"]) == "warn" and "set AWS_DEFAULT_REGION" in lines["aws-region"], output
    # From a profile of the config file: where from is named, the key never printed.
    config = tmp_path / "config"
    config.write_text("[profile doctor]\nregion = ap-south-1\naws_access_key_id = AKIAFAKECONFIGKEY000\n"
                      "aws_secret_access_key = fakeConfigSecretValue123\n")
    code, output, lines = _doctor("--only", "aws-region,aws-credentials",
                                  env=dict(env, AWS_CONFIG_FILE=str(config), AWS_PROFILE="doctor"))
    assert code == 0 and _status(lines["aws-region"]) == "ok" and "ap-south-1" in lines["aws-region"], output
    assert _status(lines["aws-credentials"]) == "ok" and str(config) in lines["aws-credentials"], output
    assert "AKIAFAKECONFIGKEY000" not in output and "fakeConfigSecretValue123" not in output


def test_sdk3_is_required_only_under_ci(tmp_path: Path) -> None:
    env = _env(SDK3_VENV=str(tmp_path / "no-venv"))
    code, output, lines = _doctor("--only", "sdk-v3", env=env)
    assert code == 0 and _status(lines["sdk-v3"]) == "ok" and "optional" in lines["sdk-v3"], output
    code, output, lines = _doctor("--only", "sdk-v3", "--ci", env=env)
    assert code == 1 and "setup_venv.sh" in lines["sdk-v3"], output


def test_a_job_network_that_cannot_be_made_is_a_warning_naming_the_fix(tmp_path: Path) -> None:
    """No slirp4netns on PATH (unshare and nsenter there): local jobs still run, on this machine's network."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("unshare", "nsenter"):
        (tools / tool).symlink_to(shutil.which(tool))
    code, output, lines = _doctor("--only", "job-network", env=_env(PATH=str(tools)))
    assert code == 0 and _status(lines["job-network"]) == "warn", output
    assert "slirp4netns not found" in lines["job-network"] and "apt-get install util-linux slirp4netns" in output
    code, output, lines = _doctor("--only", "job-network", env=_env(SMDDP_JOB_NETWORK="host"))
    assert code == 0 and _status(lines["job-network"]) == "warn", output
    assert "unset SMDDP_JOB_NETWORK" in output


def test_a_probe_past_its_time_limit_fails_with_the_fix() -> None:
    started = time.monotonic()
    code, output, lines = _doctor("--only", "tf-keras", "--timeout", "0.5", env=_env())
    assert code == 1, output
    assert _status(lines["tf-keras"]) == "FAIL" and "no answer within 0.5 s" in lines["tf-keras"], output
    assert "bash setup.sh" in lines["tf-keras"], output
    assert time.monotonic() - started < 15, "the probe was not stopped at its time limit"


def test_options() -> None:
    code, output, _ = _doctor("--only", "nonsense", env=_env())
    assert code == 2 and "'nonsense'" in output and "aws-region" in output, output
    code, output, _ = _doctor("--ci", "--setup", env=_env())
    assert code == 2, output
    code, output, _ = _doctor("--help", env=_env())
    assert code == 0, output
    for words in ("exit codes:", "examples:", "Required (FAIL, exit 1)", "aws-credentials", "--image NAME"):
        assert words in output, output
