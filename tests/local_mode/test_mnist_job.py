"""The README's main command end to end: ``smddp local`` with no entry point trains the bundled smddp_mnist.py on
2 hosts x 1 process with distribution smddp, and leaves a servable model where SageMaker would."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from smddp_compat.commands.local_cli import main


@pytest.mark.e2e
def test_smddp_local_default_job_trains_mnist_on_two_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_leftover_job_dirs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # a first run: TensorFlow's C++ lines are not asked for
    code = main(["--hyperparameters", "log-steps=10", "--output", str(tmp_path / "out"),
                 "--job-name", "mnist", "--max-run", "600"])
    output = capsys.readouterr().out
    assert code == 0, output[-4000:]
    assert "[local_mode] job mnist: 2 host(s) x 1 process(es), distribution smddp" in output
    assert "smddp_mnist: 2 rank(s)" in output
    losses = [float(v) for v in re.findall(r"^\[algo-1,0\] epoch=\d; step=\d+; loss=([0-9.]+);", output, flags=re.M)]
    assert len(losses) >= 3 and losses[-1] < losses[0], losses
    accuracy = float(re.findall(r"test_accuracy=([0-9.]+);", output)[-1])
    assert accuracy >= 0.95  # the README's target for the main job (its default 5 epochs, fixed seeds)
    job = tmp_path / "out" / "mnist"
    assert "local job mnist: Completed" in output and str(job / "output" / "model.tar.gz") in output
    with tarfile.open(job / "output" / "model.tar.gz") as archive:
        names = archive.getnames()
    assert "1/saved_model.pb" in names  # a SavedModel under a numeric version folder, as TF Serving wants
    assert (job / "logs" / "algo-2.log").read_text().strip()  # rank 1's log is kept too
    # A quiet console: TensorFlow's C++ start-up lines (e.g. "E0000 ... failed call to cuInit") are in the logs only.
    assert not re.search(r"^\[algo-\d,\d\] [IWE]\d{4} ", output, flags=re.M), output[:4000]
    assert re.search(r"^I\d{4} .*\] ", (job / "logs" / "algo-1.log").read_text(), flags=re.M)
