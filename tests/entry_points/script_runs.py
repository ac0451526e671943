"""Helpers for the entry-point tests: run a script as a real process (or as ranks under smddprun) in a fresh
SageMaker-like directory layout, watch its output, signal it, and read back its metric lines and artifacts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from smddp_compat.entry_points.common.metric_lines import parse_metric_line

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "entry_points"
BIN = Path(sys.executable).parent


@dataclass
class Layout:
    """One job's directories (as SageMaker would mount them)."""

    root: Path
    model_dir: Path
    output_dir: Path
    output_data_dir: Path
    checkpoint_dir: Path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A clean environment for the job: no inherited SM_*/TF_CONFIG/Horovod variables."""
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("SM_", "HOROVOD_", "OMPI_", "PMI_", "DTENSOR_"))
                and k not in ("TF_CONFIG", "TF_USE_LEGACY_KERAS", "SMDDP_HOST_ADDRESSES")}
        base.update({
            "SM_MODEL_DIR": str(self.model_dir),
            "SM_OUTPUT_DIR": str(self.output_dir),
            "SM_OUTPUT_DATA_DIR": str(self.output_data_dir),
            "SMDDP_LOCAL_ROOT": str(self.root / "local"),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONUNBUFFERED": "1",
        })
        base.update(extra or {})
        return base

    @property
    def failure(self) -> Path:
        """The failure file."""
        return self.output_dir / "failure"


def make_layout(root: Path) -> Layout:
    """Directories under `root` (created empty, except the checkpoint one which the script creates)."""
    layout = Layout(root, root / "model", root / "output", root / "output" / "data", root / "checkpoints")
    for path in (layout.model_dir, layout.output_dir):
        path.mkdir(parents=True, exist_ok=True)
    return layout


@dataclass
class Run:
    """A finished (or stopped) script run."""

    returncode: int
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All output."""
        return "\n".join(self.lines)

    def metrics(self) -> list[dict[str, str]]:
        """Every metrics line (labels like ``[0] `` stripped), parsed."""
        parsed = []
        for line in self.lines:
            body = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
            values = parse_metric_line(body)
            if "step" in values:
                parsed.append(values)
        return parsed


def script_command(script: str, args: list[str], ranks: int = 1) -> list[str]:
    """``python entry_points/<script> args`` or, for several ranks, the same under ``smddprun -np <ranks>``."""
    command = [sys.executable, str(SCRIPTS / script), *args]
    if ranks > 1:
        command = [str(BIN / "smddprun"), "-np", str(ranks), "--timeout", "400", *command]
    return command


def run_script(command: list[str], env: dict[str, str], *, timeout: float = 420.0,
               stop_when: Callable[[str], bool] | None = None, stop_signal: int = signal.SIGTERM,
               cwd: Path | None = None) -> Run:
    """Runs `command`, collecting its merged output; sends `stop_signal` once a line satisfies `stop_when`.

    The process runs in its own session; on timeout the whole group is killed and the test fails.
    """
    process = subprocess.Popen(command, env=env, cwd=cwd or REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    run = Run(returncode=-1)
    signalled = threading.Event()

    def reader() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip("\n")
            run.lines.append(line)
            if stop_when is not None and not signalled.is_set() and stop_when(line):
                signalled.set()
                try:
                    process.send_signal(stop_signal)
                except ProcessLookupError:
                    pass

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        run.returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        pytest.fail(f"{command} did not finish within {timeout} s; output:\n" + "\n".join(run.lines[-40:]))
    thread.join(timeout=30)
    if stop_when is not None and not signalled.is_set():
        pytest.fail("the stop condition never matched; output:\n" + "\n".join(run.lines[-40:]))
    return run


def step_at_least(n: int) -> Callable[[str], bool]:
    """A `stop_when` predicate: a metrics line with ``step >= n``."""
    def predicate(line: str) -> bool:
        body = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        step = parse_metric_line(body).get("step")
        return step is not None and int(step) >= n
    return predicate


def assert_ok(run: Run, layout: Layout) -> None:
    """Fails with the output tail (and the failure file) when the run did not exit 0."""
    if run.returncode != 0:
        failure = layout.failure.read_text() if layout.failure.exists() else "(no failure file)"
        pytest.fail(f"exit code {run.returncode}; failure file:\n{failure[:3000]}\noutput tail:\n"
                    + "\n".join(run.lines[-40:]))


def assert_stopped(run: Run, layout: Layout) -> None:
    """A run stopped by SIGTERM: it checkpointed and exited 143 with the Stopped reason (never 0: a stop is not a
    completed run)."""
    failure = layout.failure.read_text() if layout.failure.exists() else "(no failure file)"
    if run.returncode != 128 + signal.SIGTERM or not failure.startswith("Stopped: the script received SIGTERM"):
        pytest.fail(f"exit code {run.returncode} (expected 143); failure file:\n{failure[:3000]}\noutput tail:\n"
                    + "\n".join(run.lines[-40:]))


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls `predicate` until true or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of every TensorBoard event file below `folder`: tag -> [(step, value), ...] in file order, read
    with TensorFlow alone (TF 2.21 no longer installs the ``tensorboard`` package). Fails on an event that is not a
    scalar of TensorBoard's ``scalars`` plugin."""
    import tensorflow as tf

    found: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars", value
                found.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return found


def one_writers_scalars(folder: Path, steps: list[int]) -> dict[str, list[tuple[int, float]]]:
    """`read_scalars` of a run's TensorBoard `folder`, after checking that one process alone wrote it (each writer
    creates its own event file, named by its pid: a run whose every rank wrote leaves one per rank) and that it holds
    the four training scalars at each of `steps`."""
    from smddp_compat.entry_points.common.tensorboard_summaries import TRAIN_TAGS

    files = sorted(folder.glob("events.out.tfevents.*"))
    assert len(files) == 1, f"one writer expected, found {[f.name for f in files]}"
    scalars = read_scalars(folder)
    for tag in TRAIN_TAGS:
        assert [step for step, _ in scalars.get(tag, [])] == steps, (tag, scalars.get(tag))
    return scalars
