"""Starting a job's processes with its launcher, under a timeout, and collecting the ranks' results.

Every job runs through :func:`smddp_compat.launcher.run_process_group` (the launcher process itself, or the MWMS
workers directly), so a job that hangs or fails is stopped as a whole and leaves nothing running. The output goes to
a log file per run, not to the bench's table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from smddp_compat.launcher import ProcessSpec, reserve_ports, run_process_group
from smddp_compat.bench.config import PROGRAMS_DIR, REPO_ROOT, BenchConfig
from smddp_compat.bench.errors import BenchInterrupted
from smddp_compat.bench.jobs import MAIN_JOB, Job, JobRun, Launcher

__all__ = ["run_job", "launch_argv", "job_environment", "console_script", "smddp_command", "inherited_environment",
           "run_spec_mode"]

_GRACE_SECONDS = 5.0

#: Where a TWIN job's ranks write their results: inside each container, so they end up in its output.tar.gz.
TWIN_RESULT_DIR = "/opt/ml/output/data"


class _MarkedLog:
    """The job's log file, noting when a line matching each of the job's marks first went through it."""

    def __init__(self, log: IO[str], marks: Sequence[tuple[str, str]]) -> None:
        self.log = log
        self.patterns = [(name, re.compile(pattern)) for name, pattern in marks]
        self.seen: dict[str, float] = {}

    def write(self, text: str) -> int:
        now = time.time()
        for name, pattern in self.patterns:
            if name not in self.seen and pattern.search(text):
                self.seen[name] = now
        return self.log.write(text)

    def flush(self) -> None:
        self.log.flush()


def console_script(name: str) -> str | None:
    """The path of a console script of this environment (beside the Python running the bench), or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


def smddp_command() -> list[str]:
    """The command that runs ``smddp``: its console script, else this Python running the kit's CLI."""
    smddp = console_script("smddp")
    return [smddp] if smddp else [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; "
                                                        "sys.exit(main())"]


def inherited_environment(*also_dropped: str) -> dict[str, str]:
    """This process's environment without the variables that tell a process which job it belongs to (a bench
    started inside a job must not hand that job's identity to its own jobs), nor those starting with
    `also_dropped`."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("HOROVOD_", "OMPI_", "PMI_", "TF_CONFIG", *also_dropped))}


def job_environment(job: Job, result_dir: Path) -> dict[str, str]:
    """The environment every process of ``job`` starts from."""
    env = inherited_environment()
    python_path = [str(REPO_ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env.update({
        "PYTHONPATH": os.pathsep.join(python_path),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "BENCH_RESULT_DIR": str(result_dir),
        "BENCH_REPO": str(REPO_ROOT),
    })
    env.update(dict(job.env))
    return env


def _program(job: Job) -> list[str]:
    return [sys.executable, str(PROGRAMS_DIR / job.program), *job.program_argv()]


def launch_argv(job: Job, run_dir: Path, timeout: float, env: dict[str, str]) -> list[str]:
    """The launcher command of every launcher but MWMS (which has one process per worker, see :func:`_mwms_specs`).

    Raises:
        FileNotFoundError: A launcher's executable is missing.
    """
    if job.launcher in (Launcher.SMDDPRUN_GLOO, Launcher.SMDDPRUN_MPI):
        engine = "--mpi" if job.launcher is Launcher.SMDDPRUN_MPI else "--gloo"
        return [sys.executable, "-m", "smddp_compat.launcher", engine, "-np", str(job.ranks),
                "--timeout", str(int(timeout)), *_program(job)]
    if job.launcher is Launcher.HOROVODRUN:
        horovodrun = console_script("horovodrun")
        if horovodrun is None:
            raise FileNotFoundError("horovodrun is not installed beside this Python nor on PATH")
        return [horovodrun, "-np", str(job.ranks), "-H", f"localhost:{job.ranks}", "--gloo", *_program(job)]
    if job.launcher in (Launcher.LOCAL_MODE, Launcher.TWIN):
        command = smddp_command()
        backend = []
        if job.launcher is Launcher.TWIN:
            # Faithful unless the job says otherwise, whatever SMDDP_TWIN_SHORT_TOOLKIT_WAITS the bench inherited.
            waits = [] if "--short-toolkit-waits" in job.local_options else ["--no-short-toolkit-waits"]
            backend = ["--backend", "docker", *waits]
        if job.program == MAIN_JOB:
            return [*command, "local", *job.local_options, *backend, "--output", str(run_dir / "local-output"),
                    "--max-run", str(int(timeout))]
        hyperparameters = [f"{name.removeprefix('--')}={value}" for name, value in job.args_dict().items()]
        if job.launcher is Launcher.TWIN:  # the ranks run in containers: the bench's folders are not there
            where = [f"BENCH_RESULT_DIR={TWIN_RESULT_DIR}"]
        else:
            where = [f"BENCH_RESULT_DIR={env['BENCH_RESULT_DIR']}", f"BENCH_REPO={env['BENCH_REPO']}"]
        passed = [f"{name}={env[name]}" for name, _ in job.env] + where + ["TF_CPP_MIN_LOG_LEVEL=3",
                                                                          "PYTHONUNBUFFERED=1"]
        options = list(job.local_options)
        if "--distribution" not in options:
            options += ["--distribution", "smddp"]
        return [*command, "local", job.program, "--source-dir", str(PROGRAMS_DIR),
                "--instance-count", str(job.ranks), "--processes-per-host", "1", *options, *backend,
                "--output", str(run_dir / "local-output"), "--max-run", str(int(timeout)),
                "--hyperparameters", *hyperparameters, "--env", *passed]
    raise ValueError(f"no single launcher command for {job.launcher}")


def _mwms_specs(job: Job, env: dict[str, str]) -> list[ProcessSpec]:
    workers = [f"127.0.0.1:{port}" for port in reserve_ports(["127.0.0.1"] * job.ranks)]
    specs = []
    for index in range(job.ranks):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        specs.append(ProcessSpec(argv=_program(job), env={**env, "TF_CONFIG": json.dumps(tf_config)},
                                 label=str(index)))
    return specs


def _read_ranks(result_dir: Path, expected: int) -> tuple[list[dict], str]:
    ranks = []
    for index in range(expected):
        path = result_dir / f"rank{index}.json"
        if not path.exists():
            return [], f"rank {index} wrote no result ({path.name} missing)"
        ranks.append(json.loads(path.read_text(encoding="utf-8")))
    return ranks, ""


def run_job(job: Job, config: BenchConfig, round_index: int, *, timeout: float | None = None) -> JobRun:
    """Runs ``job`` once in ``round_index`` (which names the run's folder and log under ``config.out_dir``), stopped
    after ``timeout`` seconds (default ``config.job_timeout``); never raises for a failed job (see ``JobRun.reason``).
    """
    limit = config.job_timeout if timeout is None else timeout
    run_dir = config.out_dir / "jobs" / f"{job.label}-r{round_index}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    result_dir = run_dir / "result"
    result_dir.mkdir(parents=True)
    log_path = run_dir / "output.log"
    env = job_environment(job, result_dir)
    started = time.time()
    with open(log_path, "w", encoding="utf-8") as log_file:
        log = _MarkedLog(log_file, job.marks)
        try:
            if job.launcher is Launcher.MWMS:
                specs: Sequence[ProcessSpec] = _mwms_specs(job, env)
            else:
                argv = launch_argv(job, run_dir, limit, env)
                log.write("$ " + " ".join(argv) + "\n")
                specs = [ProcessSpec(argv=argv, env=env, label=job.launcher.value, cwd=str(run_dir))]
            group = run_process_group(specs, timeout=limit, grace=_GRACE_SECONDS, stream=log)
        except (OSError, ValueError) as exc:
            return JobRun(job, round_index, False, f"could not start: {exc}", started, time.time() - started, [],
                          str(log_path))
    duration = time.time() - started
    if group.interrupted:  # the supervisor stopped the job's processes; the bench must not go on to the next job
        raise BenchInterrupted(group.interrupted)
    if not group.ok:
        reason = f"timed out after {limit:.0f} s" if group.timed_out else group.reason
        return JobRun(job, round_index, False, f"{reason} (log: {log_path})", started, duration, [], str(log_path),
                      log.seen)
    if job.rank_results:
        ranks, missing = _read_ranks(result_dir, job.ranks)
    else:
        absent = [name for name, _ in job.marks if name not in log.seen]
        ranks, missing = [], (f"no line of its output said {', '.join(absent)}" if absent else "")
    if missing:
        return JobRun(job, round_index, False, f"{missing} (log: {log_path})", started, duration, [], str(log_path),
                      log.seen)
    return JobRun(job, round_index, True, "", started, duration, ranks, str(log_path), log.seen)


def run_spec_mode(argv: Sequence[str] | None, *, prog: str, doc: str | None, spec_help: str,
                  modes: Mapping[str, Callable[[dict[str, Any]], int]]) -> int:
    """The command line of a matrix job runner (``python -m ... MODE --spec FILE``): reads the spec (a JSON
    object), makes its ``output`` folder and runs the mode's function on it. Returns its exit code, or 2 when the
    spec cannot be read."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=tuple(modes))
    parser.add_argument("--spec", required=True, metavar="FILE", help=spec_help)
    args = parser.parse_args(argv)
    try:
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"matrix: cannot read the spec {args.spec}: {exc}", file=sys.stderr)
        return 2
    Path(spec["output"]).mkdir(parents=True, exist_ok=True)
    return modes[args.mode](spec)
