"""``smddp tune --backend docker``: a tuning job whose trials run in the SageMaker twin, each from the request the
kit's estimator sends, started as SageMaker starts a container; SageMaker's early stopping stops a trial through the
twin as StopTrainingJob would (its containers get SIGTERM; it ends ``Stopped`` with its model and logs)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.epoch_script import epoch_of, epochs_script

def test_a_tuning_job_in_the_twin_stops_a_worse_trial_early(kit_image: str, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(epochs_script(0.5, 8))
    done = subprocess.run(
        [sys.executable, "-m", "smddp_compat.commands.cli", "tune", "train.py", "--backend", "docker",
         "--metric", "val_loss=val_loss=([0-9.]+)", "--objective", "val_loss", "--objective-type", "Minimize",
         "--categorical", "lr=0.04,0.03,0.5", "--strategy", "Grid", "--early-stopping", "Auto",
         "--job-name", "twin-tune", "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    folder = tmp_path / "out" / "twin-tune"
    trials = {t["TunedHyperParameters"]["lr"]: t for t in json.loads(
        (folder / "training-jobs.json").read_text())["TrainingJobSummaries"]}
    assert trials["0.04"]["TrainingJobStatus"] == trials["0.03"]["TrainingJobStatus"] == "Completed"
    stopped = trials["0.5"]
    assert stopped["TrainingJobStatus"] == "Stopped", (stopped, done.stdout[-3000:])
    # decided at its first epoch (1.47); its objective is the last value it printed before the stop reached it
    assert "stopped early: epoch 1: 1.47 is worse than the median" in done.stdout, done.stdout[-3000:]
    stopped_at = epoch_of(stopped["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], 0.5, 8)
    assert stopped_at is not None and stopped_at < 8, stopped
    best = json.loads((folder / "tuning-job.json").read_text())["BestTrainingJob"]
    assert best["TunedHyperParameters"] == {"lr": "0.03"}
    log = (folder / stopped["TrainingJobName"] / "logs" / "algo-1.log").read_text()
    assert "sagemaker-training-toolkit" in log or "sagemaker_training" in log, log[-2000:]  # started by the toolkit
    assert "epoch 8 " not in log
    with tarfile.open(folder / stopped["TrainingJobName"] / "output" / "model.tar.gz") as model:
        assert model.extractfile("model.txt").read() == b"lr=0.5 on algo-1"  # type: ignore[union-attr]
