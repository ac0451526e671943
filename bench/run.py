"""``smddp bench`` (or ``python -m smddp_compat.bench``): runs every measurement and prints one table of ratios.

Options, outputs and exit codes: ``smddp bench --help``; how jobs are shared, ordered and alternated:
``docs/performance.md``, "How the measurements run".
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smddp_compat.cli_help import help_texts
from smddp_compat.contract import write_atomically
from smddp_compat.bench._chart import write_bandwidth_chart, write_strategy_chart
from smddp_compat.bench.config import DEFAULT_OUT_DIR, BenchConfig
from smddp_compat.bench.jobs import Job, JobRun, merge_jobs
from smddp_compat.bench._launch import run_job
from smddp_compat.bench._machine import describe_machine
from smddp_compat.bench._report import format_markdown, format_table, results_json, strategy_markdown
from smddp_compat.bench.results import MeasurementResult, Row
from smddp_compat.bench.errors import BenchInterrupted, BenchUsageError
from smddp_compat.bench.measurements import MEASUREMENTS

__all__ = ["main", "build_parser", "config_from_args", "run_bench"]

#: Below this many seconds left in the budget, no further job is started.
_MIN_JOB_SECONDS = 20.0


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp bench`` argument parser."""
    measurements = "\n".join(f"  {name:14} {module.TITLE.split('. ', 1)[-1]}" for name, module in MEASUREMENTS.items())
    parser = argparse.ArgumentParser(
        prog="smddp bench",
        **help_texts(
            "Runs the kit's performance comparisons on this machine (real jobs on loopback, the SageMaker twin in "
            "Docker for the start-up rows) and prints one table of ratios: each variant timed in turns with its "
            "baseline, several rounds, median and interquartile range. Each job's progress line says how many are "
            "done, the time spent and an estimate of the time left.",
            notes=[f"measurements (--only):\n{measurements}",
                   "outputs (in --out): results.json (every raw number), report.md (the tables), bandwidth.png, "
                   "strategies.png, jobs/<job>/output.log"],
            exit_codes=[("0", "every job ran"), ("1", "some did not (their rows say n/a and why)"),
                        ("2", "a bad option"), ("130, 143", "stopped by SIGINT or SIGTERM (the running job is stopped first)")],
            examples=[
                ("everything (about 22 minutes on 2 cores, within the default 3000 s budget)", "smddp bench"),
                ("tiny workloads, one round: a smoke test", "smddp bench --quick"),
                ("the strategy comparison alone", "smddp bench --only strategies --rounds 3"),
                ("two measurements, the outputs elsewhere", "smddp bench --only bandwidth,startup --out /tmp/bench"),
            ],
        ),
    )
    parser.add_argument("--out", metavar="DIR", default=str(DEFAULT_OUT_DIR),
                        help="output folder (default: bench/results in the checkout)")
    parser.add_argument("--quick", action="store_true", help="tiny workloads, one round: a smoke test, not a measurement")
    parser.add_argument("--only", metavar="NAME[,NAME...]", default=None,
                        help="comma-separated measurements to run (default: all; names below)")
    parser.add_argument("--rounds", metavar="N", type=int, default=None,
                        help="rounds of the compared jobs, alternating their order (default 2; quick 1)")
    parser.add_argument("--job-timeout", metavar="SECONDS", type=float, default=None,
                        help="seconds one job may run before it is stopped (default 240; quick 200)")
    parser.add_argument("--budget", metavar="SECONDS", type=float, default=None,
                        help="seconds for the jobs; later jobs are skipped (default 3000; quick 900)")
    return parser


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """Builds and validates the configuration.

    Raises:
        BenchUsageError: An unknown measurement or a bad number.
    """
    names = tuple(MEASUREMENTS)
    if args.only is not None:
        names = tuple(name.strip() for name in args.only.split(",") if name.strip())
        unknown = [name for name in names if name not in MEASUREMENTS]
        if unknown:
            raise BenchUsageError(
                f"unknown measurement(s) {', '.join(map(repr, unknown))} in --only; choose from {', '.join(MEASUREMENTS)}."
            )
    return BenchConfig(
        out_dir=Path(args.out).resolve(),
        measurements=names,
        quick=args.quick,
        rounds=args.rounds if args.rounds is not None else (1 if args.quick else 2),
        job_timeout=args.job_timeout if args.job_timeout is not None else (200.0 if args.quick else 240.0),
        budget=args.budget if args.budget is not None else (900.0 if args.quick else 3000.0),
    )


def _schedule(jobs: list[Job], rounds: int) -> list[tuple[int, Job]]:
    schedule = []
    for round_index in range(rounds):
        ordered = jobs if round_index % 2 == 0 else list(reversed(jobs))
        schedule += [(round_index, job.for_round(round_index)) for job in ordered if round_index == 0 or job.repeat]
    return schedule


def _skipped(job: Job, round_index: int, reason: str) -> JobRun:
    return JobRun(job, round_index, False, reason, time.time(), 0.0, [], "")


def format_duration(seconds: float) -> str:
    """A duration as people read it on a progress line: ``45s``, ``2m10s``, ``1h05m``."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def estimate_left(remaining: Sequence[Job], durations: dict[tuple, float], budget_left: float) -> float | None:
    """Seconds the jobs still to run should take: each one's duration in an earlier round, else the mean duration of
    the jobs run so far; never more than the budget left (jobs after it are skipped).

    Args:
        remaining: The jobs not started yet, this one included.
        durations: Job key -> seconds its last run took (jobs that ran so far).
        budget_left: Seconds until the budget runs out.

    Returns:
        The estimate, or None while no job has run (nothing to estimate from).
    """
    if not durations:
        return None
    mean = sum(durations.values()) / len(durations)
    return min(sum(durations.get(job.key, mean) for job in remaining), max(0.0, budget_left))


def progress_line(number: int, total: int, round_index: int, label: str, elapsed: float, left: float | None,
                  budget_left: float) -> str:
    """The line printed as a job starts: ``[3/12] round 1: LABEL (elapsed 2m10s, ~6m00s left) ...``.

    Before any job has run, the estimate is the budget (``at most 50m00s left: the budget``).
    """
    estimate = (f"~{format_duration(left)} left" if left is not None
                else f"at most {format_duration(budget_left)} left: the budget")
    return f"[{number}/{total}] round {round_index + 1}: {label} (elapsed {format_duration(elapsed)}, {estimate}) ..."


def run_jobs(config: BenchConfig, jobs: list[Job], deadline: float, stream: Any) -> dict[tuple, list[JobRun]]:
    """Runs the schedule, printing one progress line per job (how many, the time spent, an estimate of the time
    left); returns the runs by job key."""
    runs: dict[tuple, list[JobRun]] = {}
    schedule = _schedule(jobs, config.rounds)
    started = time.time()
    durations: dict[tuple, float] = {}  # job key -> seconds of its last run, for the estimate
    for number, (round_index, job) in enumerate(schedule, 1):
        now = time.time()
        left = deadline - now
        if left < _MIN_JOB_SECONDS:
            run = _skipped(job, round_index, f"skipped: the bench's time budget ({config.budget:.0f} s) ran out")
        else:
            estimate = estimate_left([entry for _, entry in schedule[number - 1:]], durations, left)
            print(progress_line(number, len(schedule), round_index, job.label, now - started, estimate, left),
                  end=" ", file=stream, flush=True)
            run = run_job(job, config, round_index, timeout=min(config.job_timeout, left))
            print(f"{run.duration:.1f} s {'ok' if run.ok else 'FAILED: ' + run.reason}", file=stream, flush=True)
            durations[job.key] = run.duration
        runs.setdefault(job.key, []).append(run)
    return runs


def _summarise(config: BenchConfig, runs: dict[tuple, list[JobRun]]) -> list[MeasurementResult]:
    results = []
    for name in config.measurements:
        module = MEASUREMENTS[name]
        try:
            results.append(module.summarise_runs(config, lambda job: runs.get(job.key, [])))
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
            failed = MeasurementResult(name, module.TITLE)
            failed.rows.append(Row(name, None, None, f"n/a: its results could not be read ({exc!r})"))
            results.append(failed)
    return results


def run_bench(config: BenchConfig, stream: Any = sys.stdout) -> tuple[list[MeasurementResult], bool]:
    """Runs the selected measurements and writes the outputs.

    Returns:
        The measurements' results, and whether every job ran.
    """
    started = time.time()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    config.out_dir.mkdir(parents=True, exist_ok=True)
    machine = describe_machine()
    modules = [MEASUREMENTS[name] for name in config.measurements]
    jobs = merge_jobs(job for module in modules for job in module.jobs(config))
    print(f"smddp bench: {len(jobs)} jobs, {config.rounds} round(s), results in {config.out_dir}", file=stream,
          flush=True)
    for module in modules:  # what a measurement needs before its jobs are timed (the twin's image)
        prepare = getattr(module, "prepare", None)
        if prepare is not None:
            prepare(config, stream)
    runs = run_jobs(config, jobs, time.time() + config.budget, stream)  # the budget is for the jobs
    results = _summarise(config, runs)
    duration = time.time() - started
    only = "" if list(config.measurements) == list(MEASUREMENTS) else f" --only {','.join(config.measurements)}"
    command = ("smddp bench" + (" --quick" if config.quick else "") + only
               + (f" --rounds {config.rounds}" if config.rounds != 2 else ""))
    all_runs = [run.to_json() for job_runs in runs.values() for run in job_runs]
    write_atomically(config.out_dir / "results.json", results_json(results, machine, date, duration, all_runs))
    report = format_markdown(results, machine, date, duration, command)
    charts = []
    by_name = {result.name: result for result in results}
    if "bandwidth" in by_name and write_bandwidth_chart(by_name["bandwidth"].raw, config.out_dir / "bandwidth.png"):
        charts.append("bandwidth.png")
    if "strategies" in by_name:
        report += "\n## Strategies\n\n" + strategy_markdown(by_name["strategies"].raw)
        if write_strategy_chart(by_name["strategies"].raw, config.out_dir / "strategies.png"):
            charts.append("strategies.png")
            report += "\n![strategies](strategies.png)\n"
    write_atomically(config.out_dir / "report.md", report)
    print("", file=stream)
    print(format_table(results), file=stream)
    if "strategies" in by_name:
        print("", file=stream)
        print(strategy_markdown(by_name["strategies"].raw), file=stream)
    print("", file=stream)
    outputs = ["results.json", "report.md", *charts]
    print(f"Wrote {', '.join(outputs)} to {config.out_dir}. Total bench time {duration:.0f} s "
          f"({duration / 60:.1f} min).", file=stream, flush=True)
    all_ok = all(run.ok for job_runs in runs.values() for run in job_runs)
    return results, all_ok


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``smddp bench``.

    Returns:
        0 when every job ran, 1 when some did not, 2 for a bad option, 128 + N when signal N (SIGINT,
        SIGTERM) stopped it.
    """
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        config = config_from_args(args)
    except BenchUsageError as exc:
        print(f"smddp bench: error: {exc}", file=sys.stderr)
        return 2
    try:
        _, all_ok = run_bench(config)
    except BenchInterrupted as exc:
        print(f"smddp bench: {exc}", file=sys.stderr)
        return 128 + exc.signum
    if not all_ok:
        print("smddp bench: some jobs did not run; their rows say n/a and why.", file=sys.stderr)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
