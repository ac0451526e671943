"""parameter_server_mnist.py under SageMaker's parameter-server process layout, reproduced by hand on two loopback
"hosts" (algo-1 = 127.0.0.2, algo-2 = 127.0.0.3) as sagemaker-tensorflow-training 20.5.0 runs it: on every host a
parameter server (``python -m smddp_compat.parameter_server``, TF_CONFIG task ``ps``, started with the ``master``-named
cluster as the toolkit's ``_run_ps`` starts it) beside the script (TF_CONFIG task ``master`` on algo-1, ``worker`` on
algo-2), every task on its own free port, to lose one task mid-run while its "host" lives on (which ``smddp local``
cannot do: it ends a host's tasks together). Also: one host (no TF_CONFIG) trains alone. The whole 2-host run and its
resume: tests/local_mode/test_parameter_server_job.py, through ``smddp local``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from smddp_compat.entry_points.common.checkpoints import list_steps
from smddp_compat.launcher import GroupResult, ProcessSpec, run_process_group
from tests.entry_points.script_runs import (
    REPO,
    Layout,
    assert_ok,
    make_layout,
    run_script,
    script_command,
)

pytestmark = pytest.mark.processes

SCRIPT = "parameter_server_mnist.py"
HOSTS = ["algo-1", "algo-2"]
ADDRESSES = {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}
_METRIC = re.compile(r"test_accuracy=([0-9.]+);")


def _free_ports(count: int) -> list[int]:
    """Distinct ports free on every address: TensorFlow's servers listen on all interfaces (``*:port``), so two
    loopback "hosts" cannot share a port."""
    sockets = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("", 0))
            sockets.append(probe)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for probe in sockets:
            probe.close()


def _tf_config(ports: list[int], task_type: str, index: int) -> str:
    """SageMaker's parameter-server TF_CONFIG (the toolkit's _build_tf_config_for_ps) with one port per task."""
    master, worker, ps0, ps1 = ports
    cluster = {"master": [f"127.0.0.2:{master}"], "ps": [f"127.0.0.2:{ps0}", f"127.0.0.3:{ps1}"],
               "worker": [f"127.0.0.3:{worker}"]}
    return json.dumps({"cluster": cluster, "environment": "cloud", "task": {"type": task_type, "index": index}})


class _Lines:
    """The console of a process group: keeps every line, and calls `on_line` with each (from the pump threads)."""

    def __init__(self, on_line: Callable[[str], None] | None = None) -> None:
        self.lines: list[str] = []
        self._partial = ""
        self._on_line = on_line
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *complete, self._partial = self._partial.split("\n")
            self.lines.extend(complete)
        for line in complete:
            if self._on_line is not None:
                self._on_line(line)
        return len(text)

    def flush(self) -> None:
        """Nothing buffered beyond the partial line."""

    def text(self) -> str:
        return "\n".join(self.lines)


def _job(tmp_path: Path, ports: list[int], args: list[str], *, wrap: str | None = None
         ) -> tuple[list[ProcessSpec], dict[str, Layout]]:
    """Per host: its parameter server and the script, with SageMaker's variables as local mode sets them.

    Args:
        wrap: The label of a process to start under a shell that keeps running after it ends (and prints its pid),
            so that killing it looks, to the supervisor, like a host whose task died while its container lives on.
    """
    layouts = {host: make_layout(tmp_path / host) for host in HOSTS}
    specs = []
    for index, host in enumerate(HOSTS):
        layout = layouts[host]
        common = {"SM_HOSTS": json.dumps(HOSTS), "SM_CURRENT_HOST": host,
                  "SMDDP_HOST_ADDRESSES": json.dumps(ADDRESSES), "SMDDP_PS_START_TIMEOUT_SECONDS": "180"}
        role = "master" if index == 0 else "worker"
        for label, argv, tf_config in (
            (f"{host},ps", [sys.executable, "-m", "smddp_compat.parameter_server"], _tf_config(ports, "ps", index)),
            (f"{host},{role}", script_command(SCRIPT, [*args, "--checkpoint-dir", str(layout.checkpoint_dir)]),
             _tf_config(ports, role, 0)),
        ):
            if label == wrap:
                argv = ["sh", "-c", '"$@" & echo "child pid $!"; wait; sleep 600', "sh", *argv]
            specs.append(ProcessSpec(argv=argv, env=layout.env({**common, "TF_CONFIG": tf_config}), label=label,
                                     cwd=str(REPO), log_path=str(layout.root / f"{label.split(',')[1]}.log"),
                                     host=host))
    return specs, layouts


def _run(specs: list[ProcessSpec], layouts: dict[str, Layout], console: _Lines, timeout: float = 300
         ) -> GroupResult:
    def failure_reason(spec: ProcessSpec) -> str | None:
        failure = layouts[spec.host].failure
        return failure.read_text() if failure.exists() else None

    return run_process_group(specs, timeout=timeout, grace=5, stream=console, failure_reason=failure_reason)


def _accuracy(log: str) -> float:
    values = _METRIC.findall(log)
    assert values, log[-3000:]
    return float(values[-1])


@pytest.mark.e2e
@pytest.mark.parametrize("victim, how", [("algo-2,ps", "SIGKILL"), ("algo-2,worker", "SIGSTOP")])
def test_a_lost_task_ends_the_job_naming_it(tmp_path: Path, victim: str, how: str) -> None:
    """The victim is killed (or stopped: hung) mid-run while its "host" lives on (a shell that outlives it): the
    supervisor sees nothing; the coordinator must notice, stop within --task-timeout (+ a probe round), and name
    the task. (A killed worker: tests/local_mode/test_parameter_server_job.py, through ``smddp local``.)"""
    ports = _free_ports(4)
    task_timeout = 8
    args = ["--epochs", "30", "--log-steps", "31", "--task-timeout", str(task_timeout), "--start-timeout", "120"]
    specs, layouts = _job(tmp_path, ports, args, wrap=victim)
    killed: dict[str, float] = {}
    pid: list[int] = []

    def on_line(line: str) -> None:
        if line.startswith(f"[{victim}] child pid "):
            pid.append(int(line.rsplit(" ", 1)[1]))
        elif line.startswith("[algo-1,master] epoch=1; step=62;") and pid and not killed:
            os.kill(pid[0], getattr(signal, how))
            killed["at"] = time.monotonic()

    console = _Lines(on_line)
    result = _run(specs, layouts, console)
    assert killed, "the victim was never killed:\n" + console.text()[-4000:]
    ended_after = time.monotonic() - killed["at"]
    assert not result.ok and result.failed is not None, console.text()[-4000:]
    assert result.failed.spec.label == "algo-1,master", result.reason
    task = "worker 0" if victim.endswith("worker") else "ps 1"
    port = ports[1] if victim.endswith("worker") else ports[3]
    assert f"{task} at 127.0.0.3:{port} (host algo-2)" in result.reason, result.reason
    assert "TaskLostError" in result.reason
    if how == "SIGSTOP":
        assert "has accepted connections without answering for 8 s (stopped or hung)" in result.reason, result.reason
    # --task-timeout, a probe round, the stop's grace period and reaping: well under a minute.
    assert ended_after < task_timeout + 25, (ended_after, result.reason)
    print(f"{how} {victim}: the job ended {ended_after:.1f} s after the kill: {result.reason.splitlines()[0]}")


def test_one_host_trains_alone(layout: Layout) -> None:
    args = ["--epochs", "1", "--steps-per-epoch", "40", "--log-steps", "20", "--checkpoint-dir",
            str(layout.checkpoint_dir)]
    run = run_script(script_command(SCRIPT, args), layout.env({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"}))
    assert_ok(run, layout)
    alone = [line for line in run.lines if "training alone" in line]
    expected = ("parameter_server_mnist: no parameter servers in TF_CONFIG (one host): training alone, batch 64 per "
                f"step, keras-3.15.1, checkpoints in {layout.checkpoint_dir}")  # Keras 3 unless the job says otherwise
    assert alone == [expected], run.text[-2000:]
    assert _accuracy(run.text) > 0.8
    assert [int(m["step"]) for m in run.metrics()] == [20, 40, 40, 40]
    assert list_steps(layout.checkpoint_dir) == [40]
    assert (layout.model_dir / "1" / "saved_model.pb").is_file()
