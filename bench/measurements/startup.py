"""6. Start-up: the README's main job (``smddp local``: 2 hosts, SMDDP, MNIST) to ``Completed`` in the process backend
and in the twin, faithful and with ``--short-toolkit-waits`` (the issue's goal: the twin within 2.5x); and a 2-host
SMDDP job (train.py, 2 hosts x 1 process) from its start to the end of its first training step and to ``Completed``, in the SageMaker twin (``smddp local --backend docker``: SageMaker's start sequence in the
kit's image, the toolkit's own launch) against the process backend (``smddp local``), and the process backend against
a bare ``horovodrun -np 2`` of the same script, and with each host's own ``/opt/ml`` (the default) against this
machine's (``SMDDP_HOST_VIEW=shared``): the goal, at most 5 % more; and the main job tracked in MLflow (``--mlflow``, a
SQLite store) against untracked: the seconds tracking adds to a job.

How it works: ``docs/performance.md``, "The start-up measurement".
"""

from __future__ import annotations

import sys
from typing import IO

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.jobs import MAIN_JOB, Job, JobRun, Launcher
from smddp_compat.bench.results import Goal, MeasurementResult, Row, RunsByJob, first_failure
from smddp_compat.bench.stats import summarise
from smddp_compat.image import DockerError, ensure_image, find_engine, host_base_recipe
from smddp_compat.local_mode.host_views import HOST_VIEW_VARIABLE
from smddp_compat.local_mode.tracking import MlflowSettings, ensure_experiment
from smddp_compat.bench.measurements._training_jobs import FIRST_STEP_MARK, horovodrun_training, local_mode_training

__all__ = ["NAME", "TITLE", "jobs", "prepare", "summarise_runs", "TOOLKIT_WAIT_MARKS"]

NAME = "startup"
TITLE = "6. Start-up: launch to first training step, and to Completed"

#: The leader's fixed wait in SageMaker's training toolkit: from the first line to the second (30 s of sleep after
#: the status files are written).
TOOLKIT_WAIT_MARKS = (
    ("toolkit wait begins", r"Begin writing status file from leader node"),
    ("toolkit wait ends", r"Finished writing status file from leader node"),
)


#: The twin's phases before the first step: the toolkit's first line in a container, and its launch of the script.
TWIN_PHASE_MARKS = (
    ("toolkit up", r"sagemaker-training-toolkit INFO +Imported framework"),
    ("script invoked", r"sagemaker-training-toolkit INFO +Invoking user script"),
)


#: The main job's held-out accuracy line: it trained and evaluated (printed by rank 0, through either backend).
ACCURACY_MARK = ("test accuracy", r"test_accuracy=")

MAIN_JOB_GOAL = Goal("<=", 2.5)
"""Issue 30: the README's main job in the twin within 2.5x of the process backend's time."""

HOST_VIEWS_GOAL = Goal("<=", 1.05)
"""Issue 45: each local host's own /opt/ml costs at most 5 % of a job's start-up."""


def _main_jobs(config: BenchConfig) -> dict[str, Job]:
    """The README's main job: process backend, twin with the toolkit's waits cut (their marks kept: the cut wait is
    shown), and (full runs) the faithful twin. ``--quick`` trains one short epoch; its twin is the smoke's only twin
    job (and the suite's only run of the main job in the twin)."""
    shorter = ("--hyperparameters", "epochs=1", "max-steps=20") if config.quick else ()
    marks = (ACCURACY_MARK, *TWIN_PHASE_MARKS, *TOOLKIT_WAIT_MARKS)
    jobs = {
        "main: process backend": Job(MAIN_JOB, Launcher.LOCAL_MODE, 2, repeat=True, local_options=shorter,
                                     marks=(ACCURACY_MARK,), rank_results=False),
        "main: twin, short waits": Job(MAIN_JOB, Launcher.TWIN, 2, repeat=True, rank_results=False, marks=marks,
                                       local_options=(*shorter, "--short-toolkit-waits")),
    }
    if not config.quick:
        jobs["main: twin"] = Job(MAIN_JOB, Launcher.TWIN, 2, repeat=True, local_options=shorter, rank_results=False,
                                 marks=marks)
        jobs["main: process backend, tracked"] = Job(
            MAIN_JOB, Launcher.LOCAL_MODE, 2, repeat=True, marks=(ACCURACY_MARK,), rank_results=False,
            local_options=(*shorter, "--mlflow", tracking_store(config), "--mlflow-experiment", TRACKING_EXPERIMENT))
    return jobs


TRACKING_EXPERIMENT = "bench"
"""The experiment the tracked main job's runs go to."""


def tracking_store(config: BenchConfig) -> str:
    """The MLflow store the tracked main job is tracked in: a SQLite store in the bench's output folder (made by
    :func:`prepare`, so that no job's time counts its creation)."""
    return f"sqlite:///{(config.out_dir / 'mlflow.db').resolve()}"


def _twin_job(config: BenchConfig) -> Job:
    """train.py in the twin as the process backend runs it, faithful (the toolkit's 30 s waits kept and timed
    apart)."""
    process = local_mode_training(config, 2, repeat=True)
    return Job(process.program, Launcher.TWIN, process.ranks, process.args, process.env, repeat=True,
               marks=(*process.marks, *TWIN_PHASE_MARKS, *TOOLKIT_WAIT_MARKS), rank_results=False)


def _jobs(config: BenchConfig) -> dict[str, Job]:
    """train.py's layouts. ``--quick`` leaves out the shared /opt/ml (the local-mode job again with one variable
    changed) and the twin (the same launch as the main job's twin, run in --quick)."""
    layouts = {"smddp local": local_mode_training(config, 2, repeat=True),
               "horovodrun": horovodrun_training(config, 2, repeat=True)}
    if not config.quick:
        layouts["smddp local, shared /opt/ml"] = local_mode_training(config, 2, repeat=True,
                                                                     env=((HOST_VIEW_VARIABLE, "shared"),))
        layouts["twin"] = _twin_job(config)
    return layouts


def jobs(config: BenchConfig) -> list[Job]:
    """The main job in both backends; train.py in local mode (2 hosts, with and without each host's own /opt/ml), in
    the twin (2 hosts) and under horovodrun (2 ranks). ``--quick``: the main job in both backends (the twin's with
    its waits cut), train.py in local mode and under horovodrun."""
    return [*_main_jobs(config).values(), *_jobs(config).values()]


def prepare(config: BenchConfig, stream: IO[str] = sys.stdout) -> None:
    """Builds the twin's image before any job is timed (when it is missing or stale), so that no start-up counts a
    build. Without a Docker engine the twin's job fails fast with the engine's own message, and its rows say so.
    A full run also makes the tracked job's MLflow store and experiment (without mlflow its row says n/a)."""
    if not config.quick:
        try:
            ensure_experiment(MlflowSettings(tracking_store(config)), TRACKING_EXPERIMENT)
        except ImportError as exc:
            print(f"startup: the tracked job's row will be n/a: {exc}", file=stream, flush=True)
    try:
        engine = find_engine()
        build = ensure_image(engine, base=host_base_recipe(), progress=stream)
    except DockerError as exc:
        print(f"startup: the twin's rows will be n/a: {exc}", file=stream, flush=True)
        return
    if build.built:
        print(f"startup: built the twin's image {build.tag} in {build.seconds:.0f} s (not timed)", file=stream,
              flush=True)


def _timings(runs: list[JobRun]) -> dict[int, dict[str, float]]:
    out = {}
    for run in runs:
        if not run.ok or FIRST_STEP_MARK[0] not in run.marks:
            continue
        timing = {"to_first_step": run.marks[FIRST_STEP_MARK[0]] - run.started, "to_completed": run.duration}
        if run.ranks:
            timing["launcher"] = min(rank["process_started"] for rank in run.ranks) - run.started
            timing["script"] = run.marks[FIRST_STEP_MARK[0]] - run.ranks[0]["process_started"]
        for name, _ in TWIN_PHASE_MARKS:
            if name in run.marks:
                timing[name] = run.marks[name] - run.started
        begins, ends = (run.marks.get(name) for name, _ in TOOLKIT_WAIT_MARKS)
        if begins is not None and ends is not None:
            timing["toolkit_wait"] = ends - begins
        out[run.round] = timing
    return out


def _median(values: dict[int, dict[str, float]], key: str) -> float:
    return summarise([value[key] for value in values.values() if key in value]).median


def _main_job_rows(config: BenchConfig, runs: RunsByJob) -> list[Row]:
    """The main job to Completed, each twin variant over the process backend, round by round, with the twin's
    phases (the toolkit's first line, the script's start) and, faithful, the toolkit's fixed wait."""
    main = _main_jobs(config)
    base = {run.round: run for run in runs(main["main: process backend"]) if run.ok}
    rows = []
    for name, label in (("main: twin, short waits", "twin --short-toolkit-waits"), ("main: twin", "twin")):
        if name not in main:
            continue
        comparison = f"README's main job, start to Completed: {label} / process backend"
        goal = MAIN_JOB_GOAL if name == "main: twin, short waits" else None
        twin = {run.round: run for run in runs(main[name]) if run.ok}
        rounds = sorted(set(twin) & set(base))
        if not rounds:
            reason = first_failure(runs, [main[name], main["main: process backend"]])
            rows.append(Row(comparison, None, goal, f"n/a: {reason}"))
            continue
        ratio = summarise([twin[r].duration / base[r].duration for r in rounds])
        phases = {key: summarise([twin[r].marks[key] - twin[r].started for r in rounds if key in twin[r].marks])
                  for key, _ in TWIN_PHASE_MARKS}
        detail = (f"{summarise([twin[r].duration for r in rounds]).median:.1f} s vs "
                  f"{summarise([base[r].duration for r in rounds]).median:.1f} s")
        if all(phase.count for phase in phases.values()):
            detail += (f" (twin: the toolkit's first line at {phases['toolkit up'].median:.1f} s, the script invoked "
                       f"at {phases['script invoked'].median:.1f} s)")
        waits = [twin[r].marks[ends] - twin[r].marks[begins] for r in rounds
                 for (begins, _), (ends, _) in [TOOLKIT_WAIT_MARKS] if begins in twin[r].marks and ends in twin[r].marks]
        if waits:
            detail += f", of which the toolkit's fixed wait {summarise(waits).median:.1f} s"
        rows.append(Row(comparison, ratio, goal, detail))
    return rows


def _tracking_row(config: BenchConfig, runs: RunsByJob) -> Row | None:
    """The main job to Completed tracked in MLflow over untracked, round by round (None in ``--quick``: no tracked
    job), with the seconds tracking adds to a job."""
    main = _main_jobs(config)
    tracked_job = main.get("main: process backend, tracked")
    if tracked_job is None:
        return None
    comparison = "README's main job, start to Completed: tracked in MLflow (a SQLite store) / untracked"
    base = {run.round: run for run in runs(main["main: process backend"]) if run.ok}
    tracked = {run.round: run for run in runs(tracked_job) if run.ok}
    rounds = sorted(set(tracked) & set(base))
    if not rounds:
        return Row(comparison, None, None, f"n/a: {first_failure(runs, [tracked_job, main['main: process backend']])}")
    ratio = summarise([tracked[r].duration / base[r].duration for r in rounds])
    added = summarise([tracked[r].duration - base[r].duration for r in rounds])
    detail = (f"{summarise([tracked[r].duration for r in rounds]).median:.1f} s vs "
              f"{summarise([base[r].duration for r in rounds]).median:.1f} s: {added.median:+.1f} s a job")
    return Row(comparison, ratio, None, detail)


def _host_views_row(runs: RunsByJob, layouts: dict[str, Job], own: dict[int, dict[str, float]],
                    shared: dict[int, dict[str, float]]) -> Row:
    """Start to first step with each host's own /opt/ml over this machine's, round by round."""
    comparison = "start to first step: smddp local, each host's own /opt/ml / this machine's (SMDDP_HOST_VIEW=shared)"
    rounds = sorted(set(own) & set(shared))
    if not rounds:
        reason = first_failure(runs, [layouts["smddp local"], layouts["smddp local, shared /opt/ml"]])
        return Row(comparison, None, HOST_VIEWS_GOAL, f"n/a: {reason}")
    ratio = summarise([own[r]["to_first_step"] / shared[r]["to_first_step"] for r in rounds])
    detail = (f"{_median(own, 'to_first_step'):.2f} s vs {_median(shared, 'to_first_step'):.2f} s "
              f"(launcher {_median(own, 'launcher'):.2f} vs {_median(shared, 'launcher'):.2f} s)")
    return Row(comparison, ratio, HOST_VIEWS_GOAL, detail)


def summarise_runs(config: BenchConfig, runs: RunsByJob) -> MeasurementResult:
    """Round by round: local mode over horovodrun, and the twin over local mode (to the first step, to Completed,
    and to Completed less the toolkit's fixed wait)."""
    result = MeasurementResult(NAME, TITLE)
    result.rows += _main_job_rows(config, runs)
    tracking = _tracking_row(config, runs)
    if tracking is not None:
        result.rows.append(tracking)
    layouts = _jobs(config)
    timings = {name: _timings(list(runs(job))) for name, job in layouts.items()}
    result.raw = {name: {"timings": values, "runs": [run.to_json() for run in runs(layouts[name])]}
                  for name, values in timings.items()}
    local, bare = timings["smddp local"], timings["horovodrun"]
    if "smddp local, shared /opt/ml" in layouts:
        result.rows.append(_host_views_row(runs, layouts, local, timings["smddp local, shared /opt/ml"]))

    comparison = "start to first step: smddp local (2 hosts x 1) / horovodrun -np 2"
    rounds = sorted(set(local) & set(bare))
    if rounds:
        ratio = summarise([local[r]["to_first_step"] / bare[r]["to_first_step"] for r in rounds])
        detail = (f"{_median(local, 'to_first_step'):.1f} s vs {_median(bare, 'to_first_step'):.1f} s "
                  f"(launcher {_median(local, 'launcher'):.1f} vs {_median(bare, 'launcher'):.1f} s, "
                  f"script {_median(local, 'script'):.1f} vs {_median(bare, 'script'):.1f} s)")
        result.rows.append(Row(comparison, ratio, None, detail))
    else:
        result.rows.append(Row(comparison, None, None,
                               f"n/a: {first_failure(runs, [layouts['smddp local'], layouts['horovodrun']])}"))

    if "twin" not in layouts:
        return result
    twin = timings["twin"]
    rounds = sorted(set(twin) & set(local))
    twin_rows = (
        ("to_first_step", "start to first step: twin (smddp local --backend docker) / process backend, 2-host SMDDP"),
        ("to_completed", "start to Completed: twin / process backend, 2-host SMDDP"),
        ("without_wait", "start to Completed less the toolkit's fixed wait: twin / process backend"),
    )
    if not rounds:
        reason = first_failure(runs, [layouts["twin"], layouts["smddp local"]])
        result.rows += [Row(comparison, None, None, f"n/a: {reason}") for _, comparison in twin_rows]
        return result
    for timing in twin.values():
        timing["without_wait"] = timing["to_completed"] - timing.get("toolkit_wait", 0.0)
    for value in local.values():
        value["without_wait"] = value["to_completed"]
    for key, comparison in twin_rows:
        ratio = summarise([twin[r][key] / local[r][key] for r in rounds])
        detail = f"{_median(twin, key):.1f} s vs {_median(local, key):.1f} s"
        if key == "to_first_step" and all(name in value for value in twin.values() for name, _ in TWIN_PHASE_MARKS):
            detail += (f" (twin: the toolkit's first line at {_median(twin, 'toolkit up'):.1f} s, the script "
                       f"invoked at {_median(twin, 'script invoked'):.1f} s)")
        if key == "to_completed" and any("toolkit_wait" in value for value in twin.values()):
            detail += f", of which the toolkit's fixed wait {_median(twin, 'toolkit_wait'):.1f} s in the twin"
        result.rows.append(Row(comparison, ratio, None, detail))
    return result
