"""A quiet first run: TensorFlow's C++ log lines stay off the console of smddprun and smddp local, and stay in the
per-rank and per-host log files; ``--show-tf-logs`` or the user's own TF_CPP_MIN_LOG_LEVEL shows them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.launcher import TensorFlowLogFilter, is_tensorflow_log_line, tensorflow_log_filter

# Lines TensorFlow 2.21 prints when it starts on a machine without a GPU (the pids and clocks vary).
STARTUP_LINES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795460394.632016   22090 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1795460394.633925   22090 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "I0000 00:00:1795460394.814539   22090 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.",
    "E0000 00:00:1795460404.699928   22090 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "2026-11-22 00:28:01.123456: W tensorflow/core/framework/op_kernel.cc:1840] OP_REQUIRES failed",
    "[1,0]<stderr>:I0000 00:00:1795460394.633925   22090 cudart_stub.cc:31] Could not find cuda drivers",
]
KEPT_LINES = [
    "F0000 00:00:1795460404.699928   22090 cuda_platform.cc:52] Check failed: fatal",
    "Epoch 1/2",
    "loss=0.31; accuracy=0.91;",
    "WARNING: something the script itself says",
    "Traceback (most recent call last):",
]


@pytest.mark.parametrize("line", STARTUP_LINES)
def test_tensorflow_startup_lines_are_recognised(line: str) -> None:
    assert is_tensorflow_log_line(line)


@pytest.mark.parametrize("line", KEPT_LINES)
def test_other_lines_and_fatal_ones_are_kept(line: str) -> None:
    assert not is_tensorflow_log_line(line)


def test_the_filter_is_off_when_asked_or_when_the_user_sets_the_log_level() -> None:
    assert isinstance(tensorflow_log_filter({}, show=False), TensorFlowLogFilter)
    assert tensorflow_log_filter({}, show=True) is None
    assert tensorflow_log_filter({"TF_CPP_MIN_LOG_LEVEL": "0"}, show=False) is None


def test_the_protocol_buffer_a_log_line_continues_with_is_hidden_too() -> None:
    """A TensorFlow server's "SessionOptions:" line goes on with its options as protocol-buffer text."""
    lines = [
        "I0000 00:00:1795524285.648589    5481 eager_service_impl.cc:355] SessionOptions: goo.gle/debugonly   ",
        "device_count {", '  key: "CPU"', "  value: 1", "}", "gpu_options {", "  experimental {", "  }", "}",
        "allow_soft_placement: true", "",
        "worker 0: serving",
        "epoch=1; step=50; loss=1.1;",
        "  indented user output",
    ]
    hides = TensorFlowLogFilter()
    assert [line for line in lines if not hides(line)] == lines[-3:]
    # Without a log line and a `name {` before it, protocol-buffer-looking text is the script's own.
    assert not TensorFlowLogFilter()("allow_soft_placement: true")
    hides = TensorFlowLogFilter()
    assert hides("E0000 00:00:1795524283.194854    5273 cuda_platform.cc:52] failed call to cuInit: (303)")
    assert not hides("smddp_mnist: 2 rank(s), batch 64")


PRINTS_STARTUP_LINES = (
    "import sys\n"
    f"for line in {STARTUP_LINES!r}:\n"
    "    print(line, file=sys.stderr, flush=True)\n"
    "print('training line', flush=True)\n"
)


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(extra)
    return env


def _smddprun(tmp_path: Path, *options: str, env: dict[str, str]) -> tuple[str, list[str]]:
    (tmp_path / "prints.py").write_text(PRINTS_STARTUP_LINES)
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", "-np", "2", "--log-dir", "logs", *options,
                           sys.executable, "prints.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = [(tmp_path / "logs" / f"rank.{rank}.log").read_text() for rank in (0, 1)]
    return proc.stdout + proc.stderr, logs


@pytest.mark.processes
def test_smddprun_hides_them_on_the_console_and_keeps_them_in_the_rank_logs(tmp_path: Path) -> None:
    console, logs = _smddprun(tmp_path, env=_environment())
    assert "[0] training line" in console and "[1] training line" in console
    assert "cuInit" not in console and "I0000" not in console and "absl::InitializeLog" not in console, console
    for log in logs:
        assert all(line in log for line in STARTUP_LINES), log


@pytest.mark.processes
@pytest.mark.parametrize("option, env", [(("--show-tf-logs",), {}), ((), {"TF_CPP_MIN_LOG_LEVEL": "0"})],
                         ids=["--show-tf-logs", "TF_CPP_MIN_LOG_LEVEL-set"])
def test_smddprun_shows_them_when_asked(tmp_path: Path, option: tuple[str, ...], env: dict[str, str]) -> None:
    console, _ = _smddprun(tmp_path, *option, env=_environment(**env))
    for rank in (0, 1):
        assert f"[{rank}] {STARTUP_LINES[5]}" in console, console


@pytest.mark.processes
def test_smddp_local_hides_them_on_the_console_and_keeps_them_in_the_host_logs(tmp_path: Path) -> None:
    (tmp_path / "prints.py").write_text(PRINTS_STARTUP_LINES)
    command = [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; sys.exit(main())", "local",
               "prints.py", "--instance-count", "2", "--output", "out", "--job-name", "quiet"]
    proc = subprocess.run(command, cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[algo-1,0] training line" in proc.stdout and "[algo-2,1] training line" in proc.stdout
    assert "cuInit" not in proc.stdout + proc.stderr and "I0000" not in proc.stdout + proc.stderr
    for host in ("algo-1", "algo-2"):
        log = (tmp_path / "out" / "quiet" / "logs" / f"{host}.log").read_text()
        assert all(line in log for line in STARTUP_LINES), log
    proc = subprocess.run([*command[:-1], "shown", "--show-tf-logs"], cwd=tmp_path, env=_environment(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and f"[algo-1,0] {STARTUP_LINES[5]}" in proc.stdout, proc.stdout + proc.stderr
