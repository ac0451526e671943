"""A limit of Keras itself is named in one line where the kit runs the job: a user's plain Keras 3 ``fit`` under
MultiWorkerMirroredStrategy with 2 workers (keras-team/keras#20585) fails with one line giving the fix, not
TensorFlow's 100-line error;
the same script with ``TF_USE_LEGACY_KERAS=1`` trains. The image's path (``train``) is checked in
tests/docker/test_twin.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat import known_limits

pytestmark = pytest.mark.timeout(300)

SCRIPT = Path(__file__).resolve().parent / "docker" / "scripts" / "plain_keras_fit.py"


def _tf_config(workers: int) -> dict[str, str]:
    cluster = {"worker": [f"127.0.0.1:{2000 + i}" for i in range(workers)]}
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})}


@pytest.mark.parametrize(
    ("env", "workers"),
    [({}, 0), ({"TF_CONFIG": "not json"}, 0), ({"TF_CONFIG": "[]"}, 0), (_tf_config(1), 1), (_tf_config(3), 3),
     ({"TF_CONFIG": json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}})}, 2)],
)
def test_workers_are_counted_from_tf_config(env: dict[str, str], workers: int) -> None:
    assert known_limits.mwms_workers(env) == workers


@pytest.mark.processes
@pytest.mark.parametrize(("env", "armed"), [(_tf_config(1), False), (_tf_config(2), True),
                                           ({**_tf_config(2), "TF_USE_LEGACY_KERAS": "1"}, False)])
def test_the_check_is_armed_only_for_several_workers_on_keras3(env: dict[str, str], armed: bool) -> None:
    code = ("import sys, json; from smddp_compat import known_limits; "
            f"print(known_limits.install(json.loads({json.dumps(env)!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(armed), done.stderr


@pytest.mark.processes
def test_a_site_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{known_limits.startup_path()}:{site}", **_tf_config(2)}
    code = "import os, sys; print(os.environ.get('SITE_RAN'), any(type(f).__name__ == '_WrapOnImport' for f in sys.meta_path))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.split() == ["yes", "True"], done.stderr


def _local_job(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "smddp_compat.cli", "local", SCRIPT.name, "--source-dir", str(SCRIPT.parent),
            "--instance-count", "2", "--distribution", "mwms", "--output", str(tmp_path / "out"), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240)


@pytest.mark.processes
def test_keras3_fit_under_two_mwms_workers_stops_with_one_line_naming_the_fix(tmp_path: Path) -> None:
    done = _local_job(tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    line = known_limits.KERAS3_MWMS_FIT.format(workers=2)
    assert line in output
    assert "TF_USE_LEGACY_KERAS=1" in line
    assert "PerReplica" not in output  # TensorFlow's own error never got to speak
    assert f"NotImplementedError: {line}" in output  # the class SageMaker's toolkit turns into the FailureReason
    assert "failure reason" in output and "Keras 3 cannot fit" in output.split("failure reason", 1)[1]


@pytest.mark.processes
def test_the_same_script_trains_with_tf_keras(tmp_path: Path) -> None:
    done = _local_job(tmp_path, "--env", "TF_USE_LEGACY_KERAS=1")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "fit done loss=" in done.stdout + done.stderr
