"""The strategy comparison and the start-up measurement's logic: which cells run and which are refused with why,
how runs become rows, and how marked output lines are timed (no jobs are run here; test_bench_quick runs them)."""

from __future__ import annotations

import io

import pytest

from smddp_compat.bench._launch import _MarkedLog
from smddp_compat.bench._report import strategy_markdown
from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import JobRun, Launcher
from smddp_compat.bench.measurements import startup, strategies


def _config(tmp_path, quick=False):
    return BenchConfig(out_dir=tmp_path, measurements=("strategies", "startup"), quick=quick)


def test_every_strategy_runs_on_each_model_and_flavour_it_supports_and_the_rest_say_why(tmp_path):
    cells = strategies.cells(_config(tmp_path))
    names = {(cell.strategy.name, cell.keras, cell.model): cell.why_not for cell in cells}
    for model in ("mlp", "cnn"):
        for name in ("smddp", "horovod_face", "mwms", "mwms_fit", "parameter_server"):
            assert names[(name, "keras3", model)] == "" and names[(name, "tf-keras", model)] == ""
        assert names[("horovod", "tf-keras", model)] == ""
        assert "TF_USE_LEGACY_KERAS=1" in names[("horovod", "keras3", model)]
    assert names[("dtensor", "none", "mlp")] == ""
    assert "Core-API MLP" in names[("dtensor", "none", "cnn")]
    jobs = strategies.jobs(_config(tmp_path))
    assert len(jobs) == len([cell for cell in cells if not cell.why_not]) == 23
    distributions = {job.args_dict()["--strategy"]: job.local_options[1] for job in jobs}
    assert distributions == {"smddp": "smddp", "horovod_face": "mpi", "horovod": "mpi", "mwms": "mwms",
                             "mwms_fit": "mwms", "dtensor": "dtensor", "parameter_server": "parameter_server"}
    assert all(job.launcher is Launcher.LOCAL_MODE and job.ranks == 2 and job.repeat for job in jobs)
    quick = strategies.jobs(_config(tmp_path, quick=True))  # one strategy per trainer of the rank program
    assert {job.args_dict()["--strategy"] for job in quick} == {"smddp", "mwms", "mwms_fit", "dtensor",
                                                                "parameter_server"}
    assert len(quick) == 5 and {job.args_dict()["--model"] for job in quick} == {"mlp"}


def _strategy_run(job, round_index, speed, reached, started=100.0):
    reporter = {"rank": 0, "window_samples_per_second": [speed, speed * 1.1, speed * 0.9], "seconds_to_target": reached,
                "first_step_done": started + 9.0, "peak_rss_bytes": 700 * 2**20, "final_accuracy": 0.95,
                "processes": 2}
    other = {"rank": 1, "peak_rss_bytes": 800 * 2**20}
    return JobRun(job, round_index, True, "", started, 20.0, [reporter, other], "log")


def test_rows_divide_by_the_fastest_cell_and_the_table_names_what_cannot_run(tmp_path):
    config = _config(tmp_path, quick=True)
    jobs = {job.args_dict()["--strategy"]: job for job in strategies.jobs(config)}
    speeds = {"smddp": 1000.0, "mwms": 500.0, "mwms_fit": 600.0, "dtensor": 2000.0, "parameter_server": 800.0}
    runs = {job.key: [_strategy_run(job, 0, speeds[name], None if name == "mwms" else 3.0)]
            for name, job in jobs.items()}
    result = strategies.summarise_runs(config, lambda job: runs.get(job.key, []))
    rows = {row.comparison: row for row in result.rows}
    fastest = next(row for label, row in rows.items() if "DTensor" in label)
    assert fastest.ratio.median == 1.0 and "(the fastest)" in fastest.detail
    smddp = next(row for label, row in rows.items() if "SMDDP face" in label)
    assert smddp.ratio.median == 0.5 and "peak RSS 800 MiB" in smddp.detail and "first step 9.0 s" in smddp.detail
    mwms = next(row for label, row in rows.items() if "MultiWorkerMirroredStrategy (custom loop)" in label)
    assert "not reached in 1 of 1 runs" in mwms.detail
    table = strategy_markdown(result.raw)
    assert table.count("\n| ") == 6 and "| 0.50 [" in table  # header + 5 cells; the ratio with its IQR


def test_keras3_fit_is_judged_against_tf_keras_fit(tmp_path):
    from smddp_compat.bench.measurements import keras3

    config = _config(tmp_path)
    fit = keras3.jobs(config)
    assert {job.key for job in fit} <= {job.key for job in strategies.jobs(config)}  # shared with the comparison
    speed = {"0": 990.0, "1": 1000.0}  # TF_USE_LEGACY_KERAS: Keras 3, tf-keras
    runs = {job.key: [_strategy_run(job, 0, speed[dict(job.env)["TF_USE_LEGACY_KERAS"]], 3.0)] for job in fit}
    rows = {row.comparison: row for row in keras3.summarise_runs(config, lambda job: runs.get(job.key, [])).rows}
    row = rows["MNIST CNN fit samples/s under MWMS, 2 workers: Keras 3 / tf-keras"]
    assert row.ratio.median == 0.99 and row.goal.threshold == 0.95 and row.detail.startswith("990 vs 1000 samples/s")


def test_a_failed_cell_reads_n_a_with_its_reason(tmp_path):
    config = _config(tmp_path, quick=True)
    failed = {job.key: [JobRun(job, 0, False, "timed out after 150 s", 0.0, 150.0, [], "log")]
              for job in strategies.jobs(config)}
    result = strategies.summarise_runs(config, lambda job: failed.get(job.key, []))
    assert all(row.ratio is None and row.detail == "n/a: timed out after 150 s" for row in result.rows)
    assert len(result.rows) == 5


def test_marked_lines_are_timed_when_they_first_go_through_the_log():
    log = _MarkedLog(io.StringIO(), [("first step", r"bench: .* first step done"), ("never", r"no such line")])
    log.write("[algo-1] [1,mpirank:0,algo-1]<stdout>:bench:   8.5 s: first step done\n")
    seen = log.seen["first step"]
    log.write("bench:   9.0 s: first step done\n")
    assert log.seen == {"first step": seen} and log.log.getvalue().count("first step done") == 2


def test_twin_rows_subtract_the_toolkit_wait_and_show_its_phases(tmp_path):
    config = _config(tmp_path)
    jobs = startup._jobs(config)
    assert jobs["twin"].launcher is Launcher.TWIN and not jobs["twin"].rank_results
    marks = {"first step": 140.0, "toolkit up": 115.0, "script invoked": 118.0, "toolkit wait begins": 150.0,
             "toolkit wait ends": 180.0}
    runs = {
        jobs["twin"].key: [JobRun(jobs["twin"], 0, True, "", 100.0, 85.0, [], "log", marks)],
        jobs["smddp local"].key: [JobRun(jobs["smddp local"], 0, True, "", 100.0, 15.0,
                                         [{"process_started": 101.0}, {"process_started": 101.5}], "log",
                                         {"first step": 110.0})],
        jobs["horovodrun"].key: [JobRun(jobs["horovodrun"], 0, True, "", 100.0, 16.0,
                                        [{"process_started": 103.0}, {"process_started": 103.0}], "log",
                                        {"first step": 112.0})],
    }
    result = startup.summarise_runs(config, lambda job: runs.get(job.key, []))
    rows = {row.comparison: row for row in result.rows}
    assert rows["start to first step: smddp local (2 hosts x 1) / horovodrun -np 2"].ratio.median == 10.0 / 12.0
    first = next(row for label, row in rows.items() if label.startswith("start to first step: twin"))
    assert first.ratio.median == 4.0 and "first line at 15.0 s" in first.detail and "invoked at 18.0 s" in first.detail
    completed = next(row for label, row in rows.items() if label.startswith("start to Completed: twin"))
    assert completed.ratio.median == 85.0 / 15.0 and "fixed wait 30.0 s" in completed.detail
    less = next(row for label, row in rows.items() if "less the toolkit's fixed wait" in label)
    assert less.ratio.median == 55.0 / 15.0


def test_help_names_every_measurement_its_outputs_and_exit_codes():
    from smddp_compat.bench.measurements import MEASUREMENTS
    from smddp_compat.bench.run import build_parser

    text = build_parser().format_help()
    assert text.startswith("usage: smddp bench") and "``" not in text
    assert all(f"  {name} " in text for name in MEASUREMENTS)
    assert "exit codes:\n  0 " in text and "130, 143" in text  # every code, the signals' included
    assert "strategies.png" in text and "smddp bench --quick" in text


def test_main_job_rows_judge_the_short_waits_twin_against_the_goal(tmp_path):
    config = _config(tmp_path, quick=False)
    main = startup._main_jobs(config)
    assert set(main) == {"main: process backend", "main: twin, short waits", "main: twin",
                         "main: process backend, tracked"}
    assert "--short-toolkit-waits" in main["main: twin, short waits"].local_options
    tracked = main["main: process backend, tracked"]
    assert tracked.local_options[-4:] == ("--mlflow", f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}",
                                          "--mlflow-experiment", startup.TRACKING_EXPERIMENT)
    assert len({job.label for job in main.values()}) == 4  # each its own run folder
    runs = {
        main["main: process backend"].key: [JobRun(main["main: process backend"], r, True, "", 0.0, 20.0, [], "log")
                                            for r in range(6)],
        main["main: twin, short waits"].key: [
            JobRun(main["main: twin, short waits"], r, True, "", 100.0, 44.0 + r, [], "log",
                   {"toolkit up": 110.0, "script invoked": 112.0}) for r in range(6)],
        main["main: twin"].key: [JobRun(main["main: twin"], 0, False, "timed out after 240 s", 0.0, 240.0, [], "log")],
        tracked.key: [JobRun(tracked, r, True, "", 0.0, 21.5, [], "log") for r in range(6)],
    }
    tracking = startup._tracking_row(config, lambda job: runs.get(job.key, []))
    assert tracking.ratio.median == pytest.approx(1.075) and "21.5 s vs 20.0 s: +1.5 s a job" in tracking.detail
    rows = {row.comparison: row for row in startup._main_job_rows(config, lambda job: runs.get(job.key, []))}
    short = rows["README's main job, start to Completed: twin --short-toolkit-waits / process backend"]
    assert short.goal == startup.MAIN_JOB_GOAL and short.met is True
    assert "first line at 10.0 s" in short.detail and "invoked at 12.0 s" in short.detail
    faithful = rows["README's main job, start to Completed: twin / process backend"]
    assert faithful.ratio is None and "timed out after 240 s" in faithful.detail
    # --quick: no faithful twin of the main job (its path is the same as the short one's, 30 s slower), and no
    # train.py in the twin (the twin's launch is the main job's)
    quick = _config(tmp_path, quick=True)
    assert set(startup._main_jobs(quick)) == {"main: process backend", "main: twin, short waits"}
    assert startup._tracking_row(quick, lambda job: []) is None
    assert {job.launcher for job in startup._jobs(quick).values()} == {Launcher.LOCAL_MODE, Launcher.HOROVODRUN}


def test_the_main_job_is_smddp_local_with_no_entry_point(tmp_path):
    from smddp_compat.bench._launch import launch_argv

    job = startup._main_jobs(_config(tmp_path, quick=True))["main: twin, short waits"]
    argv = launch_argv(job, tmp_path, 240, {})
    local = argv[argv.index("local"):]
    assert local[:6] == ["local", "--hyperparameters", "epochs=1", "max-steps=20", "--short-toolkit-waits",
                         "--backend"] and "--source-dir" not in local and "--max-run" in local


def test_the_host_views_row_divides_each_hosts_own_opt_ml_by_the_shared_one_round_by_round(tmp_path):
    """The rows --quick leaves out (the same job with one variable changed) are still made from their runs: each
    host's own /opt/ml against SMDDP_HOST_VIEW=shared."""
    config = _config(tmp_path)
    jobs = startup._jobs(config)
    assert dict(jobs["smddp local, shared /opt/ml"].env)["SMDDP_HOST_VIEW"] == "shared"
    assert "smddp local, shared /opt/ml" not in startup._jobs(_config(tmp_path, quick=True))

    def local(job, round_index, first_step):
        return JobRun(job, round_index, True, "", 100.0, 15.0, [{"process_started": 101.0}], "log",
                      {"first step": 100.0 + first_step})

    runs = {jobs["smddp local"].key: [local(jobs["smddp local"], r, 10.5) for r in (0, 1)],
            jobs["smddp local, shared /opt/ml"].key: [local(jobs["smddp local, shared /opt/ml"], r, 10.0)
                                                      for r in (0, 1)]}
    rows = {row.comparison: row for row in startup.summarise_runs(config, lambda job: runs.get(job.key, [])).rows}
    views = next(row for label, row in rows.items() if "each host's own /opt/ml" in label)
    assert views.ratio.median == 1.05 and views.goal == startup.HOST_VIEWS_GOAL and "10.50 s vs 10.00 s" in views.detail
