"""``smddp tune``: a tuning job of ``smddp local`` jobs (issue 34), run as the command a user types; every trial a real
local job, the failed one counted, the table and the best trial printed, every trial kept under the tuning job's
folder. (Bad options: ``tests/reliability/test_bad_inputs.py``, rows ``tune-*``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.epoch_script import epoch_of, epochs_script

pytestmark = pytest.mark.processes

# val_loss is |lr - 0.03| + layers / 1000: the best trial has lr 0.04 and 1 layer; lr 0.9 diverges (fails).
SCRIPT = """\
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--layers", type=int, default=1)
parser.add_argument("--model_dir")  # as AWS's tuning examples define it: the TensorFlow estimator passes it
args = parser.parse_args()  # strict, as AWS's tuning examples: the toolkit's own parameters never reach the script
with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")) as config:
    objective = json.loads(json.load(config)["_tuning_objective_metric"])  # JSON-encoded, as the SDK sends it
assert "_tuning_objective_metric" not in json.loads(os.environ["SM_HPS"]), os.environ["SM_HPS"]
if args.lr > 0.5:
    raise SystemExit("diverged")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as out:
    out.write(f"lr={args.lr} layers={args.layers}")
print(f"objective={objective} data={sorted(os.listdir(os.environ['SM_CHANNEL_TRAIN']))}")
print(f"val_loss={abs(args.lr - 0.03) + args.layers / 1e3:.6f}")
"""


def test_a_grid_over_a_script_runs_each_trial_and_names_the_best(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1\n")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; sys.exit(main())", "tune", "train.py",
         "--metric", "val_loss=val_loss=([0-9.]+)", "--objective", "val_loss", "--objective-type", "Minimize",
         "--categorical", "lr=0.01,0.04,0.9", "layers=1,2", "--strategy", "Grid", "--max-parallel-jobs", "2",
         "--channel", f"train={data}", "--hyperparameters", "layers=3", "--job-name", "grid-1", "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("[tuning grid-1] trial ") for line in lines) == 6, done.stdout
    # a row per trial: the best one marked "*", then name, layers, lr, status, objective
    table = [line for line in lines if "grid-1-0" in line and not line.startswith(("[", "best "))]
    rows = [line.lstrip("* ").split() for line in table]
    assert len(rows) == 6, done.stdout
    best = next(line.lstrip("* ").split() for line in table if line.startswith("*"))
    assert best[1:] == ["1", "0.04", "Completed", "0.011"], rows
    assert sorted(row[3] for row in rows) == ["Completed"] * 4 + ["Failed"] * 2
    assert f"best trial {best[0]}: val_loss=0.011" in done.stdout
    assert "tuning job grid-1: Completed" in done.stdout

    folder = tmp_path / "out" / "grid-1"
    described = json.loads((folder / "tuning-job.json").read_text())
    assert described["BestTrainingJob"]["TrainingJobName"] == best[0]
    assert described["TrainingJobStatusCounters"]["NonRetryableError"] == 2
    # The tuned layers replaced the static 3; the job's model_dir stays static, as the TF estimator's does.
    assert described["TrainingJobDefinition"]["StaticHyperParameters"] == {"model_dir": '"/opt/ml/model"'}
    with tarfile.open(folder / best[0] / "output" / "model.tar.gz") as model:
        assert model.extractfile("model.txt").read() == b"lr=0.04 layers=1"  # type: ignore[union-attr]
    log = (folder / best[0] / "logs" / "algo-1.log").read_text()
    assert "objective=val_loss data=['rows.csv']" in log  # in hyperparameters.json, not an argument; the channel


def _tune(cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; sys.exit(main())", "tune", "train.py",
         "--metric", "val_loss=val_loss=([0-9.]+)", "--objective", "val_loss", "--objective-type", "Minimize",
         "--channel", f"train={cwd / 'data'}", "--output", "out", *options],
        cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_warm_start_learns_from_an_earlier_tuning_job_in_the_same_folder(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("1\n")
    first = _tune(tmp_path, "--continuous", "lr=0.001:0.4", "--strategy", "Random", "--max-jobs", "3",
                  "--random-seed", "5", "--job-name", "first")
    assert first.returncode == 0, first.stdout + first.stderr
    second = _tune(tmp_path, "--continuous", "lr=0.001:0.4", "--strategy", "Bayesian", "--max-jobs", "2",
                   "--warm-start", "first", "--job-name", "second")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "warm start (IdenticalDataAndAlgorithm): the search learned 3 trial(s) of first" in second.stdout
    parent = json.loads((tmp_path / "out" / "first" / "tuning-job.json").read_text())
    child = json.loads((tmp_path / "out" / "second" / "tuning-job.json").read_text())
    values = [parent["BestTrainingJob"], child["BestTrainingJob"]]
    best = min(values, key=lambda job: job["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
    assert child["OverallBestTrainingJob"]["TrainingJobName"] == best["TrainingJobName"]
    trials = json.loads((tmp_path / "out" / "second" / "training-jobs.json").read_text())["TrainingJobSummaries"]
    assert len(trials) == 2

    missing = _tune(tmp_path, "--continuous", "lr=0.001:0.4", "--warm-start", "nowhere", "--job-name", "third")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert "warm_start_config='nowhere': is not a tuning job run here" in missing.stderr
    assert not (tmp_path / "out" / "third").exists()


def _epochs_job(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(epochs_script(0.3, 6))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("1\n")


def test_auto_early_stopping_stops_a_worse_trial_and_keeps_its_job(tmp_path: Path) -> None:
    _epochs_job(tmp_path)
    # Grid, one at a time: lr 0.04, then 0.03 (better at each epoch: runs on), then 0.5, worse than the median of the
    # two at its first epoch: stopped there.
    done = _tune(tmp_path, "--categorical", "lr=0.04,0.03,0.5", "--strategy", "Grid", "--early-stopping", "Auto",
                 "--job-name", "early")
    assert done.returncode == 0, done.stdout + done.stderr
    described = json.loads((tmp_path / "out" / "early" / "tuning-job.json").read_text())
    assert described["TrainingJobDefinition"] and described["HyperParameterTuningJobConfig"][
        "TrainingJobEarlyStoppingType"] == "Auto"
    trials = {t["TunedHyperParameters"]["lr"]: t for t in json.loads(
        (tmp_path / "out" / "early" / "training-jobs.json").read_text())["TrainingJobSummaries"]}
    assert trials["0.03"]["TrainingJobStatus"] == trials["0.04"]["TrainingJobStatus"] == "Completed"
    stopped = trials["0.5"]
    assert stopped["TrainingJobStatus"] == "Stopped", stopped
    stopped_at = epoch_of(stopped["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], 0.5, 6)
    assert stopped_at is not None and stopped_at < 6, stopped  # the last value it printed before the stop
    assert described["TrainingJobStatusCounters"]["Stopped"] == 1
    assert "stopped early: epoch 1: 1.47 is worse than the median" in done.stdout
    log = (tmp_path / "out" / "early" / stopped["TrainingJobName"] / "logs" / "algo-1.log").read_text()
    assert "epoch 1 " in log and "epoch 6 " not in log  # stopped, not run to its end
    with tarfile.open(tmp_path / "out" / "early" / stopped["TrainingJobName"] / "output" / "model.tar.gz") as model:
        assert model.extractfile("model.txt").read() == b"lr=0.5 on algo-1"  # type: ignore[union-attr]
    assert (tmp_path / "out" / "early" / "tuning.png").read_bytes()[:4] == b"\x89PNG"
    assert f"chart: {tmp_path / 'out' / 'early' / 'tuning.png'}" in done.stdout


def test_hyperband_stops_trials_at_max_resource_and_prunes(tmp_path: Path) -> None:
    _epochs_job(tmp_path)
    done = _tune(tmp_path, "--continuous", "lr=0.0:1.0", "--strategy", "Hyperband", "--max-resource", "3",
                 "--hyperparameters", "epochs=6", "--max-jobs", "4", "--random-seed", "2", "--job-name", "hb")
    assert done.returncode == 0, done.stdout + done.stderr
    trials = json.loads((tmp_path / "out" / "hb" / "training-jobs.json").read_text())["TrainingJobSummaries"]
    assert len(trials) == 4 and all(t["TrainingJobStatus"] == "Stopped" for t in trials), trials  # never 6 epochs
    for trial in trials:
        log = (tmp_path / "out" / "hb" / trial["TrainingJobName"] / "logs" / "algo-1.log").read_text()
        assert "epoch 4 " not in log, log
    assert "MaxResource (3 epochs) reached" in done.stdout


@pytest.mark.parametrize("signum, code, said", [(2, 130, "Ctrl-C"), (1, 129, "SIGHUP")])
def test_ctrl_c_or_a_closed_terminal_stops_the_running_trials_keeps_them_and_leaves_no_process(
        tmp_path: Path, signum: int, code: int, said: str) -> None:
    """Ctrl-C in a terminal (SIGINT to the whole foreground group) or a closed terminal (SIGHUP)."""
    import os
    import time

    import psutil

    _epochs_job(tmp_path)
    tune = subprocess.Popen(
        [sys.executable, "-c", "import sys; from smddp_compat.commands.cli import main; sys.exit(main())", "tune", "train.py",
         "--metric", "val_loss=val_loss=([0-9.]+)", "--objective", "val_loss", "--objective-type", "Minimize",
         "--channel", f"train={tmp_path / 'data'}", "--output", "out", "--hyperparameters", "epochs=200",
         "--categorical", "lr=0.01,0.02,0.03,0.04", "--strategy", "Grid", "--max-parallel-jobs", "2",
         "--job-name", "ctrlc"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        logs = tmp_path / "out" / "ctrlc"
        while len([p for p in logs.glob("*/logs/algo-1.log") if "epoch 2 " in p.read_text()]) < 2:
            assert time.monotonic() < deadline and tune.poll() is None, tune.communicate()
            time.sleep(0.2)
        scripts = [p for p in psutil.process_iter(["cmdline", "environ"]) if "train.py" in " ".join(
            p.info["cmdline"] or []) and "ctrlc-" in (p.info["environ"] or {}).get("SM_MODEL_DIR", "")]
        os.killpg(tune.pid, signum)  # the whole group, as a terminal sends it
        stdout, stderr = tune.communicate(timeout=60)
    finally:
        if tune.poll() is None:
            os.killpg(tune.pid, 9)
    assert tune.returncode == code, stdout + stderr
    assert f"interrupted ({said}): stopping 2 running trial(s)" in stdout
    described = json.loads((tmp_path / "out" / "ctrlc" / "tuning-job.json").read_text())
    assert described["HyperParameterTuningJobStatus"] == "Stopped"
    assert described["TrainingJobStatusCounters"]["Stopped"] == 2  # the two running ones; no third started
    trials = json.loads((tmp_path / "out" / "ctrlc" / "training-jobs.json").read_text())["TrainingJobSummaries"]
    assert len(trials) == 2
    for trial in trials:
        assert (tmp_path / "out" / "ctrlc" / trial["TrainingJobName"] / "output" / "model.tar.gz").exists()
    assert scripts and not [p for p in scripts if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
