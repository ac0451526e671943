"""`smddp local --backend` on the command line."""

import pytest

from smddp_compat.commands import local_cli as cli


def test_docker_backend_runs_a_script_as_a_job_spec(monkeypatch, capsys, tmp_path):
    """Without --request/--job, --backend docker runs the script's job (the process backend's JobSpec) in the twin;
    the twin's replay options that have no meaning for a script are refused."""
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    ran = []
    monkeypatch.setattr(cli, "replay_spec", lambda job, **options: ran.append((options, job)) or _completed())
    code = cli.main([str(script), "--backend", "docker", "--instance-count", "2", "--output", str(tmp_path / "out"),
                     "--stop-grace", "5"])
    assert code == 0, capsys.readouterr().err
    options, spec = ran[0]
    assert (spec.entry_point, spec.instance_count, spec.output_path) == (str(script), 2, str(tmp_path / "out"))
    assert options["stop_grace"] == 5
    assert '"TrainingJobStatus": "Completed"' in capsys.readouterr().out

    assert cli.main(["--backend", "docker"]) == 0  # no script: the README's main job
    assert (ran[1][1].entry_point, ran[1][1].instance_count, ran[1][1].distribution.value) == (
        "smddp_mnist.py", 2, "smddp")
    assert cli.main([str(script), "--backend", "docker", "--work-dir", str(tmp_path / "w")]) == 2
    assert "--work-dir" in capsys.readouterr().err and len(ran) == 2


def _completed():
    from smddp_compat.local_mode.artifacts import ArtifactPaths
    from smddp_compat.local_mode.outcome import JobResult

    return JobResult(job_name="j", status="Completed", secondary_status="Completed", failure_reason=None,
                     exit_code=0, artifacts=ArtifactPaths(None, None), exit_codes={"algo-1": 0})


def test_short_toolkit_waits_reach_the_twin_and_are_refused_by_the_process_backend(monkeypatch, capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    ran = []
    monkeypatch.setattr(cli, "replay_spec", lambda job, **options: ran.append(options) or _completed())
    assert cli.main([str(script), "--backend", "docker", "--short-toolkit-waits"]) == 0
    assert ran[0]["short_toolkit_waits"] is True
    assert cli.main([str(script), "--backend", "docker", "--no-short-toolkit-waits"]) == 0
    assert ran[1]["short_toolkit_waits"] is False
    assert cli.main([str(script), "--backend", "docker"]) == 0
    assert ran[2]["short_toolkit_waits"] is None  # the twin's default: the environment's switch
    capsys.readouterr()
    assert cli.main([str(script), "--short-toolkit-waits"]) == 2
    error = capsys.readouterr().err
    assert "--short-toolkit-waits: the training toolkit runs in the twin only" in error and "--backend docker" in error


def test_short_sleeps_cut_every_sleep_to_a_second_and_pass_the_rest_through():
    from smddp_compat.image.train import ShortSleeps

    class Clock:
        slept: list[float] = []

        @staticmethod
        def sleep(seconds):
            Clock.slept.append(seconds)

        @staticmethod
        def time():
            return 42.0

    short = ShortSleeps(Clock)  # type: ignore[arg-type]
    short.sleep(30)
    short.sleep(0.25)
    assert Clock.slept == [1.0, 0.25]
    assert short.time() == 42.0


def test_unknown_backend_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--backend", "kubernetes"])
    assert info.value.code == 2
    assert "invalid choice: 'kubernetes'" in capsys.readouterr().err


@pytest.mark.processes
def test_both_backends_end_a_job_by_one_rule(scripts_dir, tmp_path):
    """The process backend runs a real job through the one lifecycle; the twin's ends map to exit codes by the same
    rule (:class:`~local_mode.lifecycle.JobEnd`)."""
    from smddp_compat.local_mode import JobResult, JobSpec
    from smddp_compat.local_mode.backends import ProcessBackend
    from smddp_compat.local_mode.lifecycle import JobEnd

    spec = JobSpec("fail_or_sleep.py", source_dir=str(scripts_dir), instance_count=2, output_path=str(tmp_path),
                   hyperparameters={"fail-index": 1, "delay": 0.2, "sleep": 30})
    failed = ProcessBackend(stream=open(tmp_path / "console.txt", "w")).run(spec)
    assert isinstance(failed, JobResult)
    assert (failed.ok, failed.status, failed.exit_code) == (False, "Failed", 3)
    assert failed.describe()["TrainingJobStatus"] == "Failed" and "FailureReason" in failed.describe()

    assert JobEnd("Completed").code == 0
    assert JobEnd("Failed", exit_code=137).code == 137
    assert JobEnd("Failed").code == 1
    assert JobEnd("Stopped", "MaxRuntimeExceeded").code == 124
    assert JobEnd("Stopped").code == 143


@pytest.mark.parametrize("choice, environ, cut", [
    (None, {}, False), (None, {"SMDDP_TWIN_SHORT_TOOLKIT_WAITS": "1"}, True),
    (None, {"SMDDP_TWIN_SHORT_TOOLKIT_WAITS": "0"}, False), (False, {"SMDDP_TWIN_SHORT_TOOLKIT_WAITS": "1"}, False),
    (True, {}, True),
])
def test_the_toolkits_waits_are_kept_unless_the_option_or_the_environment_cuts_them(choice, environ, cut):
    from smddp_compat.local_mode.docker.twin import cut_toolkit_waits

    assert cut_toolkit_waits(choice, environ) is cut
