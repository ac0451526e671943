"""``smddp matrix``: the compatibility matrix. Every strategy x Keras flavour x launcher runs as a real short job on
this machine, and the table (works / does not, why, and the fix) is written to ``docs/matrix.md`` and
``docs/matrix.json``.

The strategies (`STRATEGIES`), Keras flavours (`KERAS`: ``TF_USE_LEGACY_KERAS=0`` or ``1``) and launchers
(`LAUNCHERS`), and the script each cell runs, are described once, in the table's "What each cell runs"
(`render_markdown`). Every cell is expected to work: a cell "works" when its job completed and its script reported
a held-out accuracy of at least :data:`SANE_ACCURACY`; a cell that does not work gives the job's one-line reason
(the kit's own ``smddp-compat:`` line, else the last exception line) and makes the command fail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from smddp_compat.bench._launch import inherited_environment, smddp_command
from smddp_compat.bench._matrix_sdk import sdk_environment
from smddp_compat.bench.config import PROGRAMS_DIR, REPO_ROOT
from smddp_compat.cli_help import help_texts
from smddp_compat.contract import write_atomically
from smddp_compat.image import DockerUnavailableError, find_engine
from smddp_compat.launcher import ProcessSpec, run_process_group

__all__ = [
    "STRATEGIES", "KERAS", "LAUNCHERS", "Cell", "CellResult", "all_cells", "quick_cells",
    "failure_line", "accuracy_of", "render_markdown", "main", "build_parser", "SANE_ACCURACY",
]

#: A job that works must report at least this held-out accuracy (10 classes: chance is 0.1).
SANE_ACCURACY = 0.5
ENTRY_POINTS_DIR = REPO_ROOT / "entry_points"
DEFAULT_OUT = REPO_ROOT / "docs" / "matrix.md"
PARTIAL_OUT = REPO_ROOT / "bench" / "results" / "matrix.md"
DEFAULT_JOB_TIMEOUT = 300.0
HOSTS = 2

STRATEGIES: dict[str, str] = {
    "smddp": "SMDDP face",
    "horovod": "Horovod face",
    "mwms": "MultiWorkerMirrored",
    "dtensor": "DTensor",
    "parameter_server": "Parameter server",
    "none": "none (1 process)",
}
KERAS: dict[str, str] = {"keras3": "Keras 3", "tf-keras": "tf-keras"}
LAUNCHERS: dict[str, str] = {
    "smddprun": "smddprun",
    "local": "smddp local",
    "local-docker": "smddp local --backend docker",
    "sdk-local": "SDK local mode",
    "twin": "twin (estimator's request)",
    "sdk3-local": "SDK v3 ModelTrainer, train_local",
    "sdk3-container": "SDK v3 ModelTrainer, LOCAL_CONTAINER",
}
DOCKER_LAUNCHERS = ("local-docker", "sdk-local", "twin", "sdk3-container")
#: The launchers that run in the SDK v3 environment (``.venv-sdk3``), and those on the SDK's ``sagemaker-local``.
SDK3_LAUNCHERS = ("sdk3-local", "sdk3-container")
SDK_NETWORK_LAUNCHERS = ("sdk-local", "sdk3-container")
#: The SDK v3 environment's Python (``SMDDP_SDK3_PYTHON`` moves it).
SDK3_PYTHON = Path(os.environ.get("SMDDP_SDK3_PYTHON", REPO_ROOT / ".venv-sdk3" / "bin" / "python"))
#: Seconds a cell of each launcher is guessed to take before one has run (for the progress estimate).
_GUESS_SECONDS = {"smddprun": 15.0, "local": 15.0, "local-docker": 70.0, "sdk-local": 70.0, "twin": 70.0,
                  "sdk3-local": 20.0, "sdk3-container": 70.0}

# The programs each (strategy, keras) runs, their hyperparameters (tiny: one short epoch) and SageMaker distribution.
_SMALL_HP = {"save-model": "false"}
_PLAIN = PROGRAMS_DIR / "matrix_keras_fit.py"


@dataclass(frozen=True)
class Cell:
    """One strategy x Keras flavour x launcher."""

    strategy: str
    keras: str
    launcher: str

    @property
    def key(self) -> str:
        """``mwms/keras3/local``."""
        return f"{self.strategy}/{self.keras}/{self.launcher}"

    @property
    def title(self) -> str:
        """``mwms x keras3 x smddp local``, for progress lines."""
        return f"{self.strategy} x {self.keras} x {LAUNCHERS[self.launcher]}"

    @property
    def hosts(self) -> int:
        """Hosts (ranks under smddprun) of the cell's job."""
        return 1 if self.strategy == "none" else HOSTS

    @property
    def docker(self) -> bool:
        """Whether the job runs in the kit's image."""
        return self.launcher in DOCKER_LAUNCHERS

    @property
    def program(self) -> Path:
        """The training script."""
        if self.strategy == "none":
            return _PLAIN
        return ENTRY_POINTS_DIR / {
            "smddp": "smddp_mnist.py", "horovod": "horovod_mnist.py", "mwms": "keras_mwms.py",
            "dtensor": "dtensor_mnist_core.py", "parameter_server": "parameter_server_mnist.py",
        }[self.strategy]

    @property
    def hyperparameters(self) -> dict[str, str]:
        """The script's hyperparameters (names without ``--``)."""
        if self.program == _PLAIN:
            return {"strategy": "none" if self.strategy == "none" else "mwms", "steps": "30"}
        steps = {"smddp": {"max-steps": "30"}, "dtensor": {}}.get(self.strategy, {"steps-per-epoch": "30"})
        return {"epochs": "1", **steps, "log-steps": "10", **_SMALL_HP}

    @property
    def environment(self) -> dict[str, str]:
        """The job's extra environment: the Keras flavour."""
        return {"TF_USE_LEGACY_KERAS": "0" if self.keras == "keras3" else "1", "TF_CPP_MIN_LOG_LEVEL": "3"}

    @property
    def local_distribution(self) -> list[str]:
        """``smddp local`` options for the strategy."""
        name = "mpi" if self.strategy == "horovod" else self.strategy
        extra = ["--mesh", "batch=4", "--devices-per-process", "2"] if self.strategy == "dtensor" else []
        return ["--distribution", name, *extra]

    @property
    def sdk_distribution(self) -> dict[str, Any]:
        """The estimator's ``distribution`` for the strategy, as a user writes it."""
        return {
            "smddp": {"smdistributed": {"dataparallel": {"enabled": True}}},
            "horovod": {"mpi": {"enabled": True, "processes_per_host": 1}},
            "mwms": {"multi_worker_mirrored_strategy": {"enabled": True}},
            "dtensor": {"dtensor": {"enabled": True, "mesh": {"batch": 4}, "devices_per_process": 2}},
            "parameter_server": {"parameter_server": {"enabled": True}},
            "none": {},
        }[self.strategy]

    @property
    def sdk3_distributed(self) -> list[Any] | None:
        """The ``ModelTrainer``'s ``distributed=``: the kit config's class name and fields (None: no config); one
        rank per host, as under the other launchers."""
        return {
            "smddp": ["SMDDPCompat", {"processes_per_host": 1}],
            "horovod": ["Horovod", {"processes_per_host": 1}],
            "mwms": ["MultiWorkerMirrored", {}],
            "dtensor": ["DTensor", {"mesh": {"batch": 4}, "devices_per_process": 2}],
            "parameter_server": ["ParameterServer", {}],
            "none": None,
        }[self.strategy]


def all_cells() -> list[Cell]:
    """Every cell, in table order (strategy, Keras flavour, launcher)."""
    return [Cell(s, k, launcher) for s in STRATEGIES for k in KERAS for launcher in LAUNCHERS]


#: The quick subset: each cheap launcher once (Keras 3 and tf-keras under 2-worker MWMS in local mode, the headline
#: pair) and one Docker cell (a single host: no toolkit waits). The scripts themselves have their own tests under each
#: launcher (tests/entry_points); these cells prove the matrix's runner for each launcher kind.
QUICK = (
    ("smddp", "keras3", "smddprun"), ("mwms", "keras3", "local"), ("mwms", "tf-keras", "local"),
    ("none", "keras3", "local-docker"),
)


def quick_cells() -> list[Cell]:
    """The ``--quick`` subset."""
    return [Cell(*triple) for triple in QUICK]


# ------------------------------------------------------------------------------------------------ reading a job's log

_PREFIX = re.compile(r"^(\s*\[[^\]]*\]\s*)+(<std(out|err)>:)?\s*")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_COMPOSE = re.compile(r"^[\w.-]+_\d+\s+\|\s?")  # docker compose's "algo-1_1  | " before each container's line
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:,.]+\s+\S+\s+(INFO|WARNING|ERROR)\s+")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)|AssertionError)(: .+)?$")
#: Exception lines that only wrap the real one (the toolkit's, the SDK's, a launcher's).
_WRAPPERS = ("ExecuteUserScriptError", "CalledProcessError", "UnexpectedStatusException", "SystemExit",
             "ErrorMessage", "ChildProcessError", "PermissionError: [Errno 1] Operation not permitted: '/opt/ml")
_ACCURACY = re.compile(r"\btest_accuracy=([0-9]*\.?[0-9]+)")


def _clean(line: str) -> str:
    line = _PREFIX.sub("", _COMPOSE.sub("", _PREFIX.sub("", _COLOUR.sub("", line.rstrip()))))
    return _TIMESTAMP.sub("", line).strip().strip('"').strip()


def failure_line(log: str) -> str:
    """The one line that says why a job failed: the kit's own ``smddp-compat: ...`` line when there is one, else the
    last exception line of the script (not the launcher's, toolkit's or SDK's wrappers), else ''."""
    lines = [_clean(line) for line in log.splitlines()]
    kit = [line for line in lines if "smddp-compat: " in line]
    if kit:  # alone on its line, or as an exception's message (``NotImplementedError: smddp-compat: ...``)
        return kit[-1].rsplit("smddp-compat: ", 1)[1].strip()
    errors = [line for line in lines if _EXCEPTION.match(line) and not line.startswith(_WRAPPERS)]
    return errors[-1] if errors else ""


def accuracy_of(log: str) -> float | None:
    """The last ``test_accuracy=`` value the job printed, or None."""
    found = _ACCURACY.findall(log)
    return float(found[-1]) if found else None


# ------------------------------------------------------------------------------------------------------ running cells


@dataclass
class CellResult:
    """What the matrix says about one cell.

    Attributes:
        result: ``works``, ``does not``, or ``not run`` (left out this time: no Docker, no SDK v3 environment).
        reason: Why not (one line), '' when it works.
        fix: What to do instead, when known.
        seconds: The job's wall time (None when not run).
        accuracy: The held-out accuracy the script reported.
        log: The job's output file.
    """

    cell: Cell
    result: str
    reason: str = ""
    fix: str = ""
    seconds: float | None = None
    accuracy: float | None = None
    log: str = ""

    @property
    def contradicts(self) -> bool:
        """The job's outcome is not what the kit declares: every cell works."""
        return self.result == "does not"

    def to_json(self) -> dict[str, Any]:
        """The cell for ``matrix.json``."""
        return {"strategy": self.cell.strategy, "keras": self.cell.keras, "launcher": self.cell.launcher,
                "launcher_label": LAUNCHERS[self.cell.launcher], "result": self.result, "reason": self.reason,
                "fix": self.fix, "seconds": None if self.seconds is None else round(self.seconds, 1),
                "accuracy": self.accuracy, "contradicts": self.contradicts,
                "ran": self.seconds is not None, "program": str(self.cell.program.relative_to(REPO_ROOT)),
                "log": self.log}


@dataclass
class RunContext:
    """What every cell of one matrix run shares."""

    work: Path
    job_timeout: float
    image: str | None = None
    image_built: str | None = None
    docker_problem: str = ""
    sdk_lock: threading.Lock = field(default_factory=threading.Lock)
    docker_cli: str | None = None


def _source_dir(cell: Cell, run_dir: Path) -> Path:
    source = run_dir / "source"
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy2(cell.program, source / cell.program.name)
    return source


def _job_name(cell: Cell) -> str:
    raw = f"mx-{cell.strategy}-{cell.keras}-{cell.launcher}-{int(time.time()) % 100000}"
    return re.sub(r"[^A-Za-z0-9-]", "-", raw)[:63]


def _argv_and_env(cell: Cell, run_dir: Path, ctx: RunContext) -> tuple[list[str], dict[str, str]]:
    env = {**inherited_environment("DTENSOR_", "SM_", "TF_USE_LEGACY"), "PYTHONUNBUFFERED": "1"}
    hp = cell.hyperparameters
    if cell.launcher == "smddprun":
        env.update(cell.environment)
        script_args = [item for name, value in hp.items() for item in (f"--{name}", value)]
        strategy_options = {"parameter_server": ["--parameter-servers", "1"]}.get(cell.strategy, [])
        if cell.strategy == "dtensor":  # as smddp local --mesh batch=4 --devices-per-process 2 announces them
            env.update({"SMDDP_DTENSOR_MESH": '{"batch":4}', "SMDDP_DTENSOR_DEVICES_PER_CLIENT": "2"})
        return ([sys.executable, "-m", "smddp_compat.launcher", "-np", str(cell.hosts), *strategy_options,
                 "--timeout", str(int(ctx.job_timeout)), sys.executable, str(cell.program), *script_args], env)
    source = _source_dir(cell, run_dir)
    if cell.launcher in ("local", "local-docker"):
        backend = ["--backend", "docker"] if cell.launcher == "local-docker" else []
        return ([*smddp_command(), "local", cell.program.name, "--source-dir", str(source),
                 "--instance-count", str(cell.hosts), *cell.local_distribution,
                 "--hyperparameters", *[f"{n}={v}" for n, v in hp.items()],
                 "--env", *[f"{n}={v}" for n, v in cell.environment.items()],
                 "--output", str(run_dir / "output"), "--max-run", str(int(ctx.job_timeout)),
                 "--job-name", _job_name(cell), *backend], env)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    env.update(sdk_environment(run_dir))
    spec = {"entry_point": cell.program.name, "source_dir": str(source), "hosts": cell.hosts,
            "distribution": cell.sdk_distribution, "distributed": cell.sdk3_distributed, "hyperparameters": hp,
            "environment": cell.environment, "image": ctx.image, "output": str(run_dir / "output"),
            "job_name": _job_name(cell), "max_run": int(ctx.job_timeout)}
    (run_dir / "spec.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
    sdk3 = cell.launcher in SDK3_LAUNCHERS
    return ([str(SDK3_PYTHON) if sdk3 else sys.executable, "-m",
             "smddp_compat.bench._matrix_sdk3" if sdk3 else "smddp_compat.bench._matrix_sdk", cell.launcher,
             "--spec", str(run_dir / "spec.json")], env)


def _docker_listing(ctx: RunContext, *what: str) -> set[str]:
    if ctx.docker_cli is None:
        return set()
    done = subprocess.run([ctx.docker_cli, *what], capture_output=True, text=True, timeout=120, check=False)
    return set(done.stdout.split()) if done.returncode == 0 else set()


def run_cell(cell: Cell, ctx: RunContext) -> CellResult:
    """Runs one cell's job (or says why it is not run) and judges it."""
    if cell.docker and ctx.docker_problem:
        return CellResult(cell, "not run", f"no Docker: {ctx.docker_problem}",
                          "start a Docker engine and build the image: smddp image")
    if cell.launcher in SDK3_LAUNCHERS and not os.access(SDK3_PYTHON, os.X_OK):
        return CellResult(cell, "not run", f"no SDK v3 environment: {SDK3_PYTHON} is missing",
                          "bash estimators/sdk3/setup_venv.sh (or set SMDDP_SDK3_PYTHON)")
    run_dir = ctx.work / cell.key.replace("/", "-")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    log_path = run_dir / "output.log"
    argv, env = _argv_and_env(cell, run_dir, ctx)
    started = time.monotonic()
    sdk = cell.launcher in SDK_NETWORK_LAUNCHERS
    if sdk:  # one SDK local-mode job at a time: every one names its hosts algo-1.. on the same network
        ctx.sdk_lock.acquire()
    # The SDK's containers are docker compose's (the twin's are not): only those are cleaned up after its job.
    compose = ("ps", "--all", "--quiet", "--filter", "label=com.docker.compose.project")
    containers = _docker_listing(ctx, *compose) if sdk else set()
    try:
        started = time.monotonic()
        with open(log_path, "w", encoding="utf-8") as log:
            log.write("$ " + " ".join(argv) + "\n")
            log.flush()
            group = run_process_group([ProcessSpec(argv=argv, env=env, label=cell.launcher, cwd=str(run_dir))],
                                      timeout=ctx.job_timeout + 60, grace=10.0, stream=log)
    finally:
        seconds = time.monotonic() - started
        if sdk:
            left = _docker_listing(ctx, *compose) - containers
            if left and ctx.docker_cli:
                subprocess.run([ctx.docker_cli, "rm", "--force", *sorted(left)], capture_output=True, timeout=180,
                               check=False)
            ctx.sdk_lock.release()
    text = log_path.read_text(encoding="utf-8", errors="replace")
    accuracy = accuracy_of(text)
    result = CellResult(cell, "works", seconds=seconds, accuracy=accuracy,
                        log=str(log_path.relative_to(REPO_ROOT) if REPO_ROOT in log_path.parents else log_path))
    if group.ok and accuracy is not None and accuracy >= SANE_ACCURACY:
        return result
    result.result = "does not"
    if group.timed_out:
        result.reason = f"timed out after {ctx.job_timeout + 60:.0f} s"
    elif group.ok:
        result.reason = ("completed but reported no held-out accuracy" if accuracy is None else
                         f"completed but reached only {accuracy:.3f} held-out accuracy (< {SANE_ACCURACY})")
    else:
        result.reason = failure_line(text) or group.reason.splitlines()[0]
    return result


# ------------------------------------------------------------------------------------------------------------- output

_MARK = {"works": "✅", "does not": "❌", "not run": "…"}


def _footnotes(results: Sequence[CellResult]) -> tuple[dict[str, int], list[tuple[int, str, str]]]:
    numbers: dict[str, int] = {}
    notes: list[tuple[int, str, str]] = []
    for res in results:
        if res.result == "works":
            continue
        text = f"{res.reason}|{res.fix}"
        if text not in numbers:
            numbers[text] = len(numbers) + 1
            notes.append((numbers[text], res.reason, res.fix))
    return numbers, notes


def _cell_text(res: CellResult, numbers: dict[str, int]) -> str:
    mark = _MARK[res.result]
    if res.result == "works":
        accuracy = f"{res.accuracy:.2f}, " if res.accuracy is not None else ""
        return f"{mark} works ({accuracy}{res.seconds:.0f} s)"
    note = numbers[f"{res.reason}|{res.fix}"]
    timing = f", {res.seconds:.0f} s" if res.seconds is not None else ""
    return f"{mark} {res.result} [{note}]{timing}"


def render_markdown(results: Sequence[CellResult], header: dict[str, Any]) -> str:
    """The matrix as Markdown: the run's header, one grid (rows: strategy x Keras; columns: launchers), the notes
    (why and the fix, numbered), and every cell in detail."""
    numbers, notes = _footnotes(results)
    by_key = {res.cell.key: res for res in results}
    launchers = [name for name in LAUNCHERS if any(res.cell.launcher == name for res in results)]
    lines = [
        "# Compatibility matrix: strategy x Keras x launcher",
        "",
        "Does my script run, with my Keras, under my launcher? Each cell below is a real short job run on this "
        "machine (2 hosts or ranks, one short epoch of real MNIST digits), not a claim; a cell that does not work "
        "has a note saying why.",
        "",
        f"- Date: {header['date']}",
        f"- Commit: `{header['commit']}`",
        f"- Command: `{header['command']}`",
        f"- Total run time: {header['total_seconds']:.0f} s ({header['total_seconds'] / 60:.1f} min) on "
        f"{header['cores']} cores; {header['ran']} jobs run"
        + (f"; {header['partial']}" if header.get("partial") else ""),
        f"- Works = the job completed and its script reported a held-out accuracy >= {SANE_ACCURACY} "
        "(shown, with the job's wall time). Keras 3: `TF_USE_LEGACY_KERAS=0`; tf-keras: `TF_USE_LEGACY_KERAS=1`.",
        "",
        "| Strategy | Keras | " + " | ".join(LAUNCHERS[name] for name in launchers) + " |",
        "|---|---|" + "---|" * len(launchers),
    ]
    for strategy, strategy_label in STRATEGIES.items():
        for keras, keras_label in KERAS.items():
            cells = [by_key.get(Cell(strategy, keras, name).key) for name in launchers]
            if not any(cells):
                continue
            lines.append(f"| {strategy_label} | {keras_label} | "
                         + " | ".join(_cell_text(res, numbers) if res else "" for res in cells) + " |")
    lines += ["", "## Why not, and the fix", ""]
    for number, reason, fix in notes:
        lines.append(f"{number}. {reason}" + (f". **Fix:** {fix}" if fix else ""))
    lines += [
        "",
        "## What each cell runs",
        "",
        "- SMDDP face: `entry_points/smddp_mnist.py` (an unchanged SMDDP script: `DistributedGradientTape`, "
        "`broadcast_variables`); Horovod face: `entry_points/horovod_mnist.py` (Keras `fit`, "
        "`DistributedOptimizer`, the Horovod callbacks).",
        "- MultiWorkerMirrored, tf-keras: `entry_points/keras_mwms.py`; Keras 3: "
        "`bench/programs/matrix_keras_fit.py`, a user's plain `strategy.scope()` + `model.compile` + `model.fit` "
        "(the entry point would switch to tf-keras by itself and hide the limit).",
        "- DTensor: `entry_points/dtensor_mnist_core.py` (Core API, no Keras layers: the Keras flavour does not "
        "matter), a `batch=4` mesh of 2 hosts x 2 devices; the mesh must equal hosts x devices per process, "
        "which the kit checks before starting.",
        "- Parameter server: `entry_points/parameter_server_mnist.py`, SageMaker's layout (a ps on every host, the "
        "coordinator on algo-1, a worker on algo-2). none: `bench/programs/matrix_keras_fit.py --strategy none`, "
        "one process.",
        "- Launchers: `smddprun -np 2 python SCRIPT`; `smddp local SCRIPT --instance-count 2 --distribution D` "
        "(processes on this machine); the same with `--backend docker` (the request the kit's estimator would send, "
        "replayed by the SageMaker twin in the kit's image); the SageMaker SDK's own local mode "
        "(`instance_type=\"local\"`, docker compose, the kit's image); the kit's estimator "
        "(`smddp_compat.estimators.TensorFlow(..., distribution=...)`) sending CreateTrainingJob to a private moto "
        "server, the captured request replayed by the twin; SDK v3's `ModelTrainer` with the kit's config as "
        "`distributed=` (`SMDDPCompat`, `Horovod`, `MultiWorkerMirrored`, `DTensor`, `ParameterServer`, none), run "
        "by `smddp_compat.estimators.sdk3.train_local` (the process backend) or by the SDK's own "
        "`Mode.LOCAL_CONTAINER` (docker compose, the kit's image), in the SDK v3 environment (`.venv-sdk3`).",
        "",
        "## Every cell",
        "",
        "| Strategy | Keras | Launcher | Result | Why not | Fix | Time |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        timing = f"{res.seconds:.0f} s" if res.seconds is not None else "not run"
        outcome = res.result + (f" ({res.accuracy:.3f})" if res.result == "works" and res.accuracy is not None
                                else "")
        reason = res.reason.replace("|", "\\|")
        lines.append(f"| {STRATEGIES[res.cell.strategy]} | {KERAS[res.cell.keras]} | {LAUNCHERS[res.cell.launcher]} "
                     f"| {outcome} | {reason} | {res.fix.replace('|', '/')} | {timing} |")
    lines.append("")
    return "\n".join(lines)


def _commit() -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


# --------------------------------------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp matrix`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="smddp matrix",
        **help_texts(
            "Runs every strategy (SMDDP face, Horovod face, MultiWorkerMirrored, DTensor, parameter server, none) x "
            "Keras flavour (Keras 3, tf-keras) x launcher (smddprun, smddp local, smddp local --backend docker, the "
            "SageMaker SDK's local mode, the twin replaying the estimator's request, SDK v3's ModelTrainer through "
            "train_local and through its own local container mode) as a real short job, and writes "
            "the compatibility matrix: works / does not, and why in one line. Docker cells need a Docker engine (DOCKER_HOST) and build the kit's image when missing; SDK v3 "
            "cells need .venv-sdk3 (bash estimators/sdk3/setup_venv.sh). "
            "Progress: one line per cell, with the cells left and an estimate of the time left.",
            notes=["values of --only (comma-separated, any mix; a cell runs when it matches every kind given):\n"
                   f"  strategies: {', '.join(STRATEGIES)}\n  keras:      {', '.join(KERAS)}\n"
                   f"  launchers:  {', '.join(LAUNCHERS)}",
                   "outputs: FILE (Markdown) and FILE with .json (every cell: result, reason, fix, seconds, accuracy); "
                   "each job's output under bench/results/matrix-jobs/<strategy>-<keras>-<launcher>/output.log"],
            exit_codes=[("0", "the matrix was written and every cell works"),
                        ("1", "a cell does not work (the kit declares that every cell does), or an infrastructure "
                              "error (no Docker engine for the Docker cells, the image could not be built)"),
                        ("2", "a bad option")],
            examples=[("everything (~20 min on 2 cores): docs/matrix.md", "smddp matrix"),
                      ("the CI subset (~1-2 min): bench/results/matrix.md", "smddp matrix --quick"),
                      ("MWMS on Keras 3 under every launcher", "smddp matrix --only mwms,keras3"),
                      ("the launchers without Docker", "smddp matrix --only local,smddprun --out /tmp/m.md")],
        ),
    )
    parser.add_argument("--quick", action="store_true",
                        help="the CI subset: a few cells of the launchers without Docker, and one Docker cell")
    parser.add_argument("--only", metavar="NAME[,NAME...]", default=None,
                        help="run only the cells matching these strategies / Keras flavours / launchers")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help=f"the Markdown file (default: {DEFAULT_OUT.relative_to(REPO_ROOT)} for the whole matrix, "
                             f"{PARTIAL_OUT.relative_to(REPO_ROOT)} with --quick or --only); the JSON goes beside it")
    parser.add_argument("--job-timeout", metavar="SECONDS", type=float, default=DEFAULT_JOB_TIMEOUT,
                        help=f"seconds one job may run before it is stopped (default {DEFAULT_JOB_TIMEOUT:.0f})")
    parser.add_argument("--docker-jobs", metavar="N", type=int, default=3,
                        help="Docker cells run at once (default 3: their start-up waits overlap; SDK local-mode "
                             "cells always one at a time)")
    return parser


def _select(args: argparse.Namespace) -> tuple[list[Cell], str]:
    """The cells to show and the note about a partial run; raises ValueError for a bad --only."""
    cells = quick_cells() if args.quick else all_cells()
    partial = "the --quick subset" if args.quick else ""
    if args.only:
        names = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in names if name not in {*STRATEGIES, *KERAS, *LAUNCHERS}]
        if unknown or not names:
            raise ValueError(f"--only {args.only!r}: unknown name(s) {', '.join(unknown) or '(none given)'}; use "
                             f"strategies ({', '.join(STRATEGIES)}), keras ({', '.join(KERAS)}) or launchers "
                             f"({', '.join(LAUNCHERS)})")
        wanted = [set(n for n in names if n in group) for group in (STRATEGIES, KERAS, LAUNCHERS)]
        cells = [cell for cell in cells
                 if all(not want or value in want
                        for want, value in zip(wanted, (cell.strategy, cell.keras, cell.launcher)))]
        partial = (partial + "; " if partial else "") + f"only {args.only}"
    return cells, partial


def _prepare_docker(ctx: RunContext, say: Callable[[str], None]) -> None:
    """Finds the engine, builds or reuses the image, and creates the SDK's ``sagemaker-local`` network."""
    try:
        engine = find_engine()
    except DockerUnavailableError as exc:
        ctx.docker_problem = str(exc).splitlines()[0]
        return
    ctx.docker_cli = engine.docker
    say("[matrix] the kit's image: checking it (built when missing, which takes minutes)")
    done = subprocess.run([*smddp_command(), "image", "--log", str(ctx.work / "image-build.log")],
                          capture_output=True, text=True, timeout=3600, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        ctx.docker_problem = f"smddp image failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
        return
    built = lines[-1].strip()
    # The run's own tag: a kit file changed during the run makes `smddp local --backend docker` build a newer image
    # and untag the older ones of the kit's repository; the SDK's and the twin's cells keep this one.
    pinned = f"smddp-compat-matrix:run-{os.getpid()}"
    tagged = subprocess.run([engine.docker, "tag", built, pinned], capture_output=True, text=True, timeout=120,
                            check=False)
    if tagged.returncode != 0:
        ctx.docker_problem = f"docker tag {built} {pinned} failed: {tagged.stderr.strip()[-300:]}"
        return
    ctx.image, ctx.image_built = pinned, built
    say(f"[matrix] the kit's image: {built} (this run's tag for the SDK's and the twin's cells: {pinned})")


def _sdk_network(ctx: RunContext, create: bool) -> bool:
    """Creates (or removes) ``sagemaker-local`` as an internal network; returns whether this run created it."""
    if ctx.docker_cli is None:
        return False
    if create:
        if "sagemaker-local" in _docker_listing(ctx, "network", "ls", "--format", "{{.Name}}"):
            return False
        done = subprocess.run([ctx.docker_cli, "network", "create", "--internal", "sagemaker-local"],
                              capture_output=True, text=True, timeout=120, check=False)
        return done.returncode == 0
    subprocess.run([ctx.docker_cli, "network", "rm", "sagemaker-local"], capture_output=True, timeout=120,
                   check=False)
    return False


class _Progress:
    """Progress lines: ``[7/40] mwms x keras3 x smddp local ... works (14 s; ~9 min left)``."""

    def __init__(self, cells: Sequence[Cell], docker_jobs: int, out: Callable[[str], None]) -> None:
        self.total = len(cells)
        self.pending = list(cells)
        self.done = 0
        self.durations: dict[str, list[float]] = {}
        self.docker_jobs = max(1, docker_jobs)
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.out = out

    def _guess(self, cell: Cell) -> float:
        seen = self.durations.get(cell.launcher)
        seconds = sum(seen) / len(seen) if seen else _GUESS_SECONDS[cell.launcher]
        return seconds / self.docker_jobs if cell.docker else seconds

    def finished(self, res: CellResult) -> None:
        with self.lock:
            self.done += 1
            self.pending.remove(res.cell)
            if res.seconds is not None:
                self.durations.setdefault(res.cell.launcher, []).append(res.seconds)
            left = sum(self._guess(cell) for cell in self.pending)
            timing = f"{res.seconds:.0f} s; " if res.seconds is not None else ""
            what = res.result + ("" if res.result == "works" else f": {res.reason}")
            if res.contradicts:
                what += " (CONTRADICTS the kit: every cell works)"
            elapsed = time.monotonic() - self.started
            self.out(f"[{self.done}/{self.total}] {res.cell.title} ... {what} ({timing}"
                     f"{elapsed / 60:.1f} min elapsed; ~{left / 60:.0f} min left)")


def run_matrix(cells: Sequence[Cell], *, work: Path, job_timeout: float, docker_jobs: int,
               say: Callable[[str], None]) -> tuple[list[CellResult], RunContext]:
    """Runs ``cells`` as jobs and returns their results in table
    order. Jobs without Docker run first, one at a time; Docker jobs then run ``docker_jobs`` at a time."""
    work.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(work=work, job_timeout=job_timeout)
    progress = _Progress(cells, docker_jobs, say)
    results: dict[str, CellResult] = {}

    def one(cell: Cell) -> None:
        res = run_cell(cell, ctx)
        results[cell.key] = res
        progress.finished(res)

    for cell in [c for c in cells if not c.docker]:
        one(cell)
    docker = [c for c in cells if c.docker]
    created = False
    if docker:
        _prepare_docker(ctx, say)
        if any(c.launcher in SDK_NETWORK_LAUNCHERS for c in docker):
            created = _sdk_network(ctx, create=True)
        try:
            with ThreadPoolExecutor(max_workers=max(1, docker_jobs)) as pool:
                for future in [pool.submit(one, cell) for cell in docker]:
                    future.result()
        finally:
            if created:
                _sdk_network(ctx, create=False)
            if ctx.image and ctx.docker_cli:  # only the run's tag: the image stays while the kit's tag names it
                subprocess.run([ctx.docker_cli, "rmi", ctx.image], capture_output=True, timeout=300, check=False)
    return [results[cell.key] for cell in cells], ctx


def main(argv: Sequence[str] | None = None) -> int:
    """``smddp matrix``; returns the exit code (see ``--help``)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: --help exits 0, a bad option 2
        return int(exc.code or 0)
    try:
        if not (args.job_timeout > 0 and args.job_timeout < 86400):
            raise ValueError(f"--job-timeout {args.job_timeout:g}: must be a number of seconds above 0, e.g. 300")
        if args.docker_jobs < 1:
            raise ValueError(f"--docker-jobs {args.docker_jobs}: must be 1 or more, e.g. 2")
        cells, partial = _select(args)
        if not cells:
            raise ValueError(f"--only {args.only!r} selects no cell of {'the --quick subset' if args.quick else 'the matrix'}")
    except ValueError as exc:
        print(f"smddp matrix: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else (PARTIAL_OUT if partial else DEFAULT_OUT)
    json_out = out.with_suffix(".json")
    work = REPO_ROOT / "bench" / "results" / "matrix-jobs"

    def say(line: str) -> None:
        print(line, flush=True)

    say(f"[matrix] {len(cells)} cells; "
        f"outputs: {out} and {json_out}; job logs under {work}")
    started = time.monotonic()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results, ctx = run_matrix(cells, work=work, job_timeout=args.job_timeout, docker_jobs=args.docker_jobs, say=say)
    total = time.monotonic() - started
    command = "smddp matrix" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    header = {"date": date, "commit": _commit(), "command": command.strip(), "total_seconds": round(total, 1),
              "cores": os.cpu_count(), "ran": sum(r.seconds is not None for r in results),
              "partial": partial,
              "sane_accuracy": SANE_ACCURACY, "image": ctx.image_built}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, render_markdown(results, header))
    write_atomically(json_out, json.dumps({**header, "cells": [r.to_json() for r in results]}, indent=2) + "\n")
    contradictions = [r for r in results if r.contradicts]
    not_run = [r for r in results if r.result == "not run"]
    say(f"[matrix] done in {total:.0f} s ({total / 60:.1f} min): "
        + ", ".join(f"{sum(r.result == kind for r in results)} {kind}" for kind in _MARK) + f"; wrote {out}")
    for res in contradictions:
        say(f"[matrix] CONTRADICTION: {res.cell.title} does not work ({res.reason}); log: {res.log}")
    for res in not_run[:1]:
        say(f"[matrix] infrastructure: {res.reason}; fix: {res.fix}")
    return 1 if contradictions or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
