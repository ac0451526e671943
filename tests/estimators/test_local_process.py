"""instance_type="local_process": estimators.TensorFlow jobs run on this machine through local_mode."""

from __future__ import annotations

import glob
import json
import os
import uuid

import pytest

pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}


def _probes(directory):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(directory, "probe-*.json")))]


def _estimator(entry_point, tmp_path, **kwargs):
    from smddp_compat.estimators import TensorFlow

    probe = tmp_path / "probes"
    probe.mkdir(exist_ok=True)
    defaults = dict(
        entry_point=entry_point, instance_type="local_process", instance_count=2, framework_version="2.21",
        py_version="py311", output_path=str(tmp_path / "out"), environment={"PROBE_DIR": str(probe)},
    )
    defaults.update(kwargs)
    return TensorFlow(**defaults), str(probe)


@pytest.mark.processes
def test_smdistributed_runs_one_rank_per_host_with_metacharacters_inert(tiny_script, tmp_path, caplog):
    marker = f"/tmp/pwned-{uuid.uuid4().hex}"
    est, probe = _estimator(tiny_script, tmp_path, hyperparameters={"epochs": 2}, distribution={
        "smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": f"; touch {marker}"}}})
    with caplog.at_level("WARNING", logger="smddp_compat.estimators._local_process"):
        result = est.fit(job_name="local-smddp")
    # the options reached the local_process path, which reports them literally and does not run them
    assert f"custom_mpi_options '; touch {marker}' are ignored by instance_type='local_process'" in caplog.text
    assert result.ok and est.local_result is result
    probes = _probes(probe)
    assert sorted(p["env"]["HOROVOD_RANK"] for p in probes) == ["0", "1"]
    assert {p["env"]["HOROVOD_SIZE"] for p in probes} == {"2"}
    assert {p["env"]["SM_CURRENT_HOST"] for p in probes} == {"algo-1", "algo-2"}
    assert all(p["argv"][:2] == ["--epochs", "2"] for p in probes)
    assert not os.path.exists(marker)
    assert os.path.isfile(result.artifacts.model)


@pytest.mark.processes
def test_dtensor_clients_get_dtensor_environment(tiny_script, tmp_path):
    est, probe = _estimator(tiny_script, tmp_path, distribution={
        "dtensor": {"enabled": True, "mesh": {"batch": 2}}})
    est.fit(job_name="local-dtensor")
    probes = _probes(probe)
    assert sorted(p["env"]["DTENSOR_CLIENT_ID"] for p in probes) == ["0", "1"]
    jobs = {p["env"]["DTENSOR_JOBS"] for p in probes}
    assert len(jobs) == 1 and len(jobs.pop().split(",")) == 2
    assert {p["env"]["SMDDP_DTENSOR_MESH"] for p in probes} == {'{"batch":2}'}


@pytest.mark.processes
def test_failed_job_raises_with_reason(tmp_path):
    from smddp_compat.estimators import JobError

    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    est, _ = _estimator(str(script), tmp_path, instance_count=1)
    with pytest.raises(JobError) as info:
        est.fit(job_name="local-fail")
    assert info.value.status == "Failed"
    assert "local-fail" in str(info.value)
    # where and how the first process failed, as local_mode reported it
    assert (info.value.rank, info.value.host, info.value.exit_code) == ("algo-1,0", "algo-1", 3)
    assert type(info.value.__cause__).__name__ == "JobFailedError"


def test_local_mode_refusals_leave_fit_as_the_one_configuration_error(tiny_script, tmp_path):
    """A value local_mode refuses when fit() builds the job leaves fit() as the error local_mode raised: the kit's
    one ConfigurationError (no copy to convert it into), naming the field, the value, the problem and the fix;
    nothing ran."""
    from smddp_compat import errors, local_mode
    from smddp_compat.estimators import ConfigurationError

    assert ConfigurationError is local_mode.ConfigurationError is errors.ConfigurationError
    est, probe = _estimator(tiny_script, tmp_path, output_path="/proc/x")
    with pytest.raises(ConfigurationError) as info:
        est.fit(job_name="local-bad-output")
    assert type(info.value) is errors.ConfigurationError and info.value.__cause__ is None
    assert (info.value.field, info.value.value, info.value.fix) == ("output_path", "/proc/x",
                                                                    "choose a writable directory")
    assert info.value.problem and str(info.value).startswith("output_path='/proc/x': ")
    assert _probes(probe) == []


@pytest.mark.processes
def test_cli_submit_local_process(tiny_script, tmp_path, capsys):
    from smddp_compat.commands.submit_cli import main

    ok = main(["submit", tiny_script, "--instance-type", "local_process", "--instance-count", "2",
               "--distribution", "mpi", "--output", str(tmp_path / "out"), "--job-name", "cli-local",
               "--hyperparameters", "epochs=1"])
    assert ok == 0, capsys.readouterr().err
    assert os.path.isfile(tmp_path / "out" / "cli-local" / "output" / "model.tar.gz")
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(4)\n")
    assert main(["submit", str(failing), "--instance-type", "local_process", "--output", str(tmp_path / "out"),
                 "--job-name", "cli-local-fail"]) == 1
    assert "cli-local-fail" in capsys.readouterr().err
