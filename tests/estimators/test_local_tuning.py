"""SDK v2's own ``HyperparameterTuner`` over the kit's ``local_process`` estimator runs its trials on this machine
(issue 34): each trial a real local job of a tiny script that prints its objective, the tuner's answers
(``best_training_job``, ``best_estimator``, ``analytics().dataframe()``, ``describe()``) as after a SageMaker tuning
job, every trial's job kept under the tuning job's folder; with ``MLFLOW_TRACKING_URI`` set, the tuning job an MLflow
run and each trial a run under it (read back from a real server)."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from tests.epoch_script import epochs_script

pytestmark = pytest.mark.processes

# The objective is |lr - 0.03| (+ a small batch-size term): the best trial is the one whose lr is nearest 0.03. A
# trial with lr above 0.5 fails, as a script that diverges would.
SCRIPT = """\
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--model_dir")  # the SDK's TensorFlow estimator passes it
args = parser.parse_args()  # strict, as AWS's HPO notebook: the toolkit's own parameters never reach the script
with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")) as config:
    objective = json.loads(json.load(config)["_tuning_objective_metric"])
if args.lr > 0.5:
    raise SystemExit("diverged")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as out:
    out.write(f"lr={args.lr}")
print(f"objective={objective}")
if "SM_CHANNEL_TRAIN" in os.environ:
    print("train channel:", sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])))
print(f"val_loss={abs(args.lr - 0.03) + args.batch_size / 1e6:.6f}")
"""
METRICS = [{"Name": "val_loss", "Regex": r"val_loss=([0-9.]+)"}]


@pytest.fixture
def estimator(tmp_path: Path):
    from smddp_compat.estimators import TensorFlow

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(SCRIPT)
    return TensorFlow(entry_point="train.py", source_dir=str(source), instance_type="local_process", instance_count=1,
                      framework_version="2.21", py_version="py311", output_path=str(tmp_path / "out"),
                      hyperparameters={"batch-size": 32})


def _tuner(estimator, ranges, **kwargs):
    from sagemaker.tuner import HyperparameterTuner

    return HyperparameterTuner(estimator, "val_loss", ranges, metric_definitions=METRICS, objective_type="Minimize",
                               **kwargs)


def test_random_search_runs_every_trial_here_and_answers_as_sagemaker(estimator, tmp_path: Path, capsys, monkeypatch,
                                                                    mlflow_server) -> None:
    from mlflow import MlflowClient
    from sagemaker.tuner import ContinuousParameter, IntegerParameter

    # MLflow's own variables, as SDK v2's fit() reads them: the tuning job and its trials are tracked there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "sdk2-random-search")
    tuner = _tuner(estimator, {"lr": ContinuousParameter(0.001, 0.1, scaling_type="Logarithmic"),
                               "batch-size": IntegerParameter(16, 64)}, max_jobs=4, max_parallel_jobs=2,
                   strategy="Random", random_seed=7)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,2\n")
    tuner.fit({"train": f"file://{data}"}, wait=True)
    tracked, *progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[tuning ")]
    assert "] tracked in MLflow: run " in tracked and "in experiment 'sdk2-random-search'" in tracked, tracked
    assert len(progress) == 4 and all(" -> val_loss=" in line and "; best " in line for line in progress), progress

    frame = tuner.analytics().dataframe()
    assert len(frame) == 4 and set(frame["TrainingJobStatus"]) == {"Completed"}
    assert frame["lr"].between(0.001, 0.1).all() and frame["batch-size"].between(16, 64).all()
    best_row = frame.loc[frame["FinalObjectiveValue"].idxmin()]
    assert tuner.best_training_job() == best_row["TrainingJobName"]

    described = tuner.describe()
    assert described["HyperParameterTuningJobStatus"] == "Completed"
    assert described["TrainingJobStatusCounters"]["Completed"] == 4
    assert described["ObjectiveStatusCounters"] == {"Succeeded": 4, "Pending": 0, "Failed": 0}
    best = described["BestTrainingJob"]
    assert best["FinalHyperParameterTuningJobObjectiveMetric"] == {
        "Type": "Minimize", "MetricName": "val_loss", "Value": pytest.approx(best_row["FinalObjectiveValue"])}
    assert best["TrainingJobName"].startswith(described["HyperParameterTuningJobName"] + "-00")

    # every trial's job under the tuning job's folder; the best one's model is the best trial's
    folder = tmp_path / "out" / described["HyperParameterTuningJobName"]
    assert json.loads((folder / "tuning-job.json").read_text())["BestTrainingJob"]["TrainingJobName"] == \
        best["TrainingJobName"]
    for name in frame["TrainingJobName"]:
        assert (folder / name / "output" / "model.tar.gz").is_file() and (folder / name / "logs").is_dir()
    best_estimator = tuner.best_estimator()
    assert best_estimator.latest_training_job.name == best["TrainingJobName"]
    with tarfile.open(best_estimator.model_data) as model:
        text = model.extractfile("model.txt").read().decode()  # type: ignore[union-attr]
    assert text == f"lr={float(best['TunedHyperParameters']['lr'])}"
    # SageMaker gives each trial the objective's name in hyperparameters.json (never as an argument): the script read it
    log = (folder / best["TrainingJobName"] / "logs" / "algo-1.log").read_text()
    assert "objective=val_loss" in log
    assert "train channel: ['train.csv']" in log  # the tuner's channels reach every trial

    # the tuning job is a run; each trial a run under it, with its hyperparameters, objective and status
    client = MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name("sdk2-random-search").experiment_id
    [parent] = client.search_runs([experiment], f"attributes.run_name = '{described['HyperParameterTuningJobName']}'")
    children = {run.info.run_name: run for run in client.search_runs(
        [experiment], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert sorted(children) == sorted(frame["TrainingJobName"])
    assert parent.info.status == "FINISHED" and {run.info.status for run in children.values()} == {"FINISHED"}
    for row in frame.to_dict("records"):
        run = children[row["TrainingJobName"]]
        assert float(run.data.params["lr"]) == pytest.approx(row["lr"])
        assert int(run.data.params["batch-size"]) == row["batch-size"]
        assert run.data.metrics["val_loss"] == pytest.approx(row["FinalObjectiveValue"])
    assert sorted(point.value for point in client.get_metric_history(parent.info.run_id, "val_loss")) == \
        pytest.approx(sorted(frame["FinalObjectiveValue"]))  # each trial's objective, in the order they ended
    assert parent.data.tags["sagemaker.best_training_job"] == best["TrainingJobName"]
    assert parent.data.tags["sagemaker.best_run_id"] == children[best["TrainingJobName"]].info.run_id


def test_grid_tries_each_combination_once_and_a_failing_trial_is_counted(estimator) -> None:
    from sagemaker.tuner import CategoricalParameter

    tuner = _tuner(estimator, {"lr": CategoricalParameter(["0.01", "0.04", "0.9"]),
                               "batch-size": CategoricalParameter(["16", "32"])}, max_jobs=10, max_parallel_jobs=2,
                   strategy="Grid")
    tuner.fit()
    frame = tuner.analytics().dataframe()
    # The SDK sends a framework estimator's categorical values JSON-encoded ('"0.01"'), and SageMaker answers with
    # them so; the script gets them decoded, as the training toolkit decodes them
    assert sorted(zip(map(json.loads, frame["lr"]), map(json.loads, frame["batch-size"]))) == sorted(
        (lr, bs) for lr in ("0.01", "0.04", "0.9") for bs in ("16", "32"))  # 6 trials, not max_jobs
    described = tuner.describe()
    assert described["HyperParameterTuningJobStatus"] == "Completed"  # two failed trials never end the tuning job
    assert described["TrainingJobStatusCounters"]["Completed"] == 4
    assert described["TrainingJobStatusCounters"]["NonRetryableError"] == 2
    assert described["ObjectiveStatusCounters"]["Failed"] == 2
    assert described["BestTrainingJob"]["TunedHyperParameters"] == {"lr": '"0.04"', "batch-size": '"16"'}


def test_bayesian_search_asks_optuna_and_learns_from_each_trial(estimator) -> None:
    from sagemaker.tuner import ContinuousParameter

    tuner = _tuner(estimator, {"lr": ContinuousParameter(0.001, 0.2)}, max_jobs=5, max_parallel_jobs=1,
                   strategy="Bayesian", random_seed=3)
    tuner.fit()
    frame = tuner.analytics().dataframe()
    assert len(frame) == 5 and frame["lr"].nunique() == 5
    assert tuner.describe()["ObjectiveStatusCounters"]["Succeeded"] == 5


def test_an_objective_without_a_metric_definition_is_refused_before_any_trial(estimator, tmp_path: Path) -> None:
    from sagemaker.tuner import ContinuousParameter, HyperparameterTuner

    from smddp_compat.errors import ConfigurationError

    tuner = HyperparameterTuner(estimator, "accuracy", {"lr": ContinuousParameter(0.001, 0.1)},
                                metric_definitions=METRICS, max_jobs=2)
    with pytest.raises(ConfigurationError, match=r"objective_metric_name='accuracy': has no metric definition"):
        tuner.fit()
    assert not os.path.exists(tmp_path / "out")


def test_a_tuning_job_name_in_use_is_refused_before_any_trial(estimator, tmp_path: Path) -> None:
    from sagemaker.tuner import CategoricalParameter

    from smddp_compat.estimators import ConfigurationError

    _tuner(estimator, {"lr": CategoricalParameter(["0.03"])}, strategy="Grid").fit(job_name="twice")
    trials = sorted(p.name for p in (tmp_path / "out" / "twice").iterdir())
    with pytest.raises(ConfigurationError, match=r"job_name='twice': a tuning job of that name is already in"):
        _tuner(estimator, {"lr": CategoricalParameter(["0.04"])}, strategy="Grid").fit(job_name="twice")
    assert sorted(p.name for p in (tmp_path / "out" / "twice").iterdir()) == trials


@pytest.mark.timeout(600)
def test_the_readme_main_job_tuned_learning_rate_and_batch_size_by_bayesian_search(tmp_path: Path, capsys) -> None:
    """The README's main job (smddp_mnist.py on MNIST, SMDDP), short and on one host of one process (so that 2 trials
    fit this machine's cores at once): 3 trials, 2 at a time (the third chosen from the first two's results), its
    learning rate and batch size tuned by the SDK v2 tuner's Bayesian search for held-out accuracy; the best trial's
    model is on disk. (Random search: the test above, on a small script; each strategy's choices, and Bayesian
    learning from each trial, are unit tests.)"""
    from sagemaker.tuner import CategoricalParameter, ContinuousParameter, HyperparameterTuner

    from smddp_compat.estimators import TensorFlow

    entry_points = Path(__file__).resolve().parents[2] / "entry_points"
    estimator = TensorFlow(entry_point="smddp_mnist.py", source_dir=str(entry_points), instance_type="local_process",
                           instance_count=1, framework_version="2.21", py_version="py311",
                           output_path=str(tmp_path / "out"), hyperparameters={"epochs": 1, "max-steps": 15},
                           distribution={"smdistributed": {"dataparallel": {"enabled": True,
                                                                             "processes_per_host": 1}}})
    tuner = HyperparameterTuner(
        estimator, "test_accuracy",
        {"learning-rate": ContinuousParameter(0.0005, 0.01, scaling_type="Logarithmic"),
         "batch-size": CategoricalParameter([32, 64])},
        metric_definitions=[{"Name": "test_accuracy", "Regex": r"test_accuracy=([0-9.]+)"}],
        max_jobs=3, max_parallel_jobs=2, strategy="Bayesian", random_seed=1)
    tuner.fit()
    described = tuner.describe()
    assert described["TrainingJobStatusCounters"]["Completed"] == 3, described["TrainingJobStatusCounters"]
    best = described["BestTrainingJob"]
    accuracy = best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
    print(f"best trial {best['TrainingJobName']}: {best['TunedHyperParameters']} -> test_accuracy={accuracy:.4f}")
    assert 0.1 < accuracy <= 1.0
    assert len(tuner.analytics().dataframe()) == 3
    with tarfile.open(tuner.best_estimator().model_data) as model:
        assert any(name.endswith("saved_model.pb") or name.endswith(".keras") for name in model.getnames())


def test_a_local_process_estimator_with_a_session_of_its_own_is_refused_before_any_aws_call(tmp_path: Path) -> None:
    import boto3
    import sagemaker
    from sagemaker.tuner import CategoricalParameter

    from smddp_compat.estimators import ConfigurationError, TensorFlow

    (tmp_path / "train.py").write_text(SCRIPT)
    session = sagemaker.Session(boto_session=boto3.Session(region_name="us-east-1"))
    estimator = TensorFlow(entry_point=str(tmp_path / "train.py"), instance_type="local_process", py_version="py311",
                           framework_version="2.21", sagemaker_session=session)
    tuner = _tuner(estimator, {"lr": CategoricalParameter([0.1])}, strategy="Grid")
    with pytest.raises(ConfigurationError, match="sagemaker_session.*leave sagemaker_session out"):
        tuner.fit()


def test_the_sdks_warm_start_tuner_learns_from_the_tuning_job_before_it(estimator, tmp_path: Path, capsys) -> None:
    from sagemaker.tuner import ContinuousParameter

    parent = _tuner(estimator, {"lr": ContinuousParameter(0.001, 0.1)}, max_jobs=3, strategy="Random", random_seed=2)
    parent.fit(job_name="parent-1")
    child = parent.identical_dataset_and_algorithm_tuner()  # the SDK's own warm start: parents={"parent-1"}
    child.max_jobs, child.strategy = 2, "Bayesian"  # (Random draws each trial on its own: nothing to learn)
    child.metric_definitions = METRICS  # the SDK does not carry them over (a framework estimator's job needs them)
    child.fit(job_name="child-1")
    assert "the search learned 3 trial(s) of parent-1" in capsys.readouterr().out
    described = child.describe()
    assert described["WarmStartConfig"]["WarmStartType"] == "IdenticalDataAndAlgorithm"
    candidates = [parent.describe()["BestTrainingJob"], described["BestTrainingJob"]]
    best = min(candidates, key=lambda job: job["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
    assert described["OverallBestTrainingJob"]["TrainingJobName"] == best["TrainingJobName"]


def test_the_sdks_hyperband_tuner_stops_each_trial_by_max_resource_or_hyperband(tmp_path: Path) -> None:
    from sagemaker.tuner import ContinuousParameter, HyperbandStrategyConfig, StrategyConfig

    from smddp_compat.estimators import TensorFlow

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(epochs_script(0.2, 8))
    estimator = TensorFlow(entry_point="train.py", source_dir=str(source), instance_type="local_process",
                           instance_count=1, framework_version="2.21", py_version="py311",
                           output_path=str(tmp_path / "out"), hyperparameters={"epochs": 8})
    tuner = _tuner(estimator, {"lr": ContinuousParameter(0.0, 1.0)}, strategy="Hyperband", max_jobs=4,
                   random_seed=4, strategy_config=StrategyConfig(
                       hyperband_strategy_config=HyperbandStrategyConfig(min_resource=1, max_resource=3)))
    tuner.fit(job_name="hyperband-v2")
    described = tuner.describe()
    assert described["HyperParameterTuningJobConfig"]["StrategyConfig"] == {
        "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 3}}
    assert described["TrainingJobStatusCounters"]["Stopped"] == 4, described["TrainingJobStatusCounters"]
    assert described["ObjectiveStatusCounters"]["Succeeded"] == 4  # a stopped trial's last value is its objective
    frame = tuner.analytics().dataframe()
    assert len(frame) == 4 and set(frame["TrainingJobStatus"]) == {"Stopped"}
    for name in frame["TrainingJobName"]:
        log = (tmp_path / "out" / "hyperband-v2" / name / "logs" / "algo-1.log").read_text()
        assert "epoch 1 " in log and "epoch 4 " not in log, log  # at most MaxResource epochs
    assert (tmp_path / "out" / "hyperband-v2" / "tuning.png").exists()
