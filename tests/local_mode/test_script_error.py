"""The process backend on real processes: a script that fails without writing a failure file gets the training
toolkit's kind of reason (``ExecuteUserScriptError``: exit code, the end of its output, its command), a SyntaxError
included; a job's metric definitions give the last value of each metric in its result and summary."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from smddp_compat.local_mode import JobSpec, run

pytestmark = pytest.mark.processes


def test_a_syntax_error_reaches_the_failure_reason_in_the_toolkits_shape(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "broken.py").write_text("print('starting')\ndef train(:\n    pass\n")
    spec = JobSpec(entry_point="broken.py", source_dir=str(source), hyperparameters={"epochs": 2},
                   output_path=str(tmp_path / "out"), job_name="syntax-error", max_run=60)
    result = run(spec, stream=io.StringIO())
    assert result.status == "Failed" and result.exit_code == 1
    reason = result.failure_reason or ""
    assert reason.startswith("process [algo-1,0] on host algo-1 exited with code 1: ExecuteUserScriptError:\n"
                             "ExitCode 1\nErrorMessage \"SyntaxError: invalid syntax\"\nCommand \""), reason
    assert f'Command "{sys.executable} ' in reason and '/algo-1/code/broken.py --epochs 2"' in reason, reason


def test_a_failure_file_the_script_wrote_stays_the_reason(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "writes.py").write_text(
        "import os, sys\nopen(os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure'), 'w').write('my own reason')\n"
        "sys.exit(4)\n"
    )
    spec = JobSpec(entry_point="writes.py", source_dir=str(source), output_path=str(tmp_path / "out"), max_run=60)
    result = run(spec, stream=io.StringIO())
    assert result.failure_reason == ("process [algo-1,0] on host algo-1 exited with code 4: my own reason; the "
                                     "other processes were stopped")


def test_metric_definitions_give_each_metrics_last_value(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "fit.py").write_text(
        "import os\nhost = os.environ['SM_CURRENT_HOST']\nfor step in range(1, 4):\n"
        "    print(f'step={step} loss={1.0 / step:.4f}', flush=True)\n"
        "print(f'host={host} acc={0.9 if host == \"algo-1\" else 0.1}')\n"
    )
    spec = JobSpec(entry_point="fit.py", source_dir=str(source), instance_count=2, output_path=str(tmp_path / "out"),
                   max_run=60, metric_definitions=[{"Name": "loss", "Regex": r"loss=([0-9.]+)$"},
                                                   {"Name": "acc", "Regex": r"acc=([0-9.]+)"},
                                                   {"Name": "absent", "Regex": r"nothing=([0-9.]+)"}])
    stream = io.StringIO()
    result = run(spec, stream=stream)
    assert result.ok, result.failure_reason
    assert dict(result.final_metrics) == {"loss": 0.3333, "acc": 0.9}  # algo-1's value: the master's
    assert "  metric loss = 0.3333\n  metric acc = 0.9\n" in stream.getvalue()
