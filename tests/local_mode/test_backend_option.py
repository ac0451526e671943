"""`smddp local --backend` on the command line."""

import pytest

from smddp_compat.local_mode import cli


def test_docker_backend_without_a_request_is_refused(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    code = cli.main([str(script), "--backend", "docker", "--output", str(tmp_path / "out")])
    assert code == 2
    assert "--backend docker replays a SageMaker request" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_backend_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--backend", "kubernetes"])
    assert info.value.code == 2
    assert "invalid choice: 'kubernetes'" in capsys.readouterr().err


def test_both_backends_return_one_outcome_shape(scripts_dir, tmp_path):
    """The process backend runs a real job through the protocol; the twin's result maps to the same exit codes."""
    from datetime import datetime, timezone

    from smddp_compat.local_mode import JobSpec
    from smddp_compat.local_mode.backends import BACKENDS, DockerBackend, JobOutcome, ProcessBackend
    from smddp_compat.local_mode.docker.twin import TwinResult

    assert BACKENDS == {"process": ProcessBackend, "docker": DockerBackend}
    spec = JobSpec("fail_or_sleep.py", source_dir=str(scripts_dir), instance_count=2, output_path=str(tmp_path),
                   hyperparameters={"fail-index": 1, "delay": 0.2, "sleep": 30})
    failed = ProcessBackend(stream=open(tmp_path / "console.txt", "w")).run(spec)
    assert isinstance(failed, JobOutcome)
    assert (failed.ok, failed.status, failed.exit_code) == (False, "Failed", 3)

    now = datetime.now(timezone.utc)
    def twin(status: str, secondary: str, codes: dict[str, int]) -> TwinResult:
        return TwinResult("j", status, secondary, None, None, None, now, now, exit_codes=codes)

    assert isinstance(twin("Completed", "Completed", {}), JobOutcome)
    assert twin("Completed", "Completed", {"algo-1": 0}).exit_code == 0
    assert twin("Failed", "Failed", {"algo-1": 0, "algo-2": 137}).exit_code == 137
    assert twin("Failed", "Failed", {}).exit_code == 1
    assert twin("Stopped", "MaxRuntimeExceeded", {"algo-1": 143}).exit_code == 124
    assert twin("Stopped", "Stopped", {"algo-1": 143}).exit_code == 143
