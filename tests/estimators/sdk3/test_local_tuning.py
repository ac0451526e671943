"""SDK v3's own ``HyperparameterTuner`` over a ``ModelTrainer``, its trials run on this machine by ``tune_local``
(issue 34): the README's main job tuned, and the tuner's answers (``best_training_job``, ``describe()``,
``analytics().dataframe()``) as after a SageMaker tuning job, and tracked in MLflow (``MLFLOW_TRACKING_URI``): the
tuning job a run, each trial a run under it. Runs in .venv-sdk3 only (``bash tests/run-sdk3``)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

pytestmark = pytest.mark.processes

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:tf2.21"
# The checkout (tests/run-sdk3 reaches this file through a link: resolved, it is in the checkout).
CHECKOUT = Path(__file__).resolve().parents[3]
ACCURACY = [{"Name": "test_accuracy", "Regex": r"test_accuracy=([0-9.]+)"}]


def _trainer(source_dir: Path, entry_script: str, distributed=None, **kwargs):
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train import ModelTrainer
    from sagemaker.train.model_trainer import Mode

    return ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER,  # no AWS session or role needed
        training_image=IMAGE,
        source_code=SourceCode(source_dir=str(source_dir), entry_script=entry_script),
        compute=Compute(instance_type="ml.m5.large", instance_count=1),
        distributed=distributed,
        base_job_name="v3-tuned",
        **kwargs,
    )


@pytest.mark.timeout(600)
def test_the_readme_main_job_tuned_by_sdk3s_tuner(tmp_path: Path) -> None:
    """The README's main job (smddp_mnist.py on MNIST, SMDDP), short and on one host of one process (so that 2 trials
    fit this machine's cores at once): 6 trials, 2 at a time, its learning rate and batch size tuned for held-out
    accuracy by SDK v3's default strategy, Bayesian; the best trial's model is on disk and the trainer is left as it
    was. (The strategies are the kit's, whichever door: Random runs in SDK v2's tuner test of random search,
    tests/estimators/test_local_tuning.py; each strategy's choices are unit tests.)"""
    strategy = "Bayesian"
    from sagemaker.core.parameter import CategoricalParameter, ContinuousParameter
    from sagemaker.train.tuner import HyperparameterTuner

    from smddp_compat.estimators.sdk3 import SMDDPCompat, tune_local

    trainer = _trainer(CHECKOUT / "entry_points", "smddp_mnist.py", SMDDPCompat(processes_per_host=1),
                       hyperparameters={"epochs": 1, "max-steps": 12})
    tuner = HyperparameterTuner(
        trainer, "test_accuracy",
        {"learning-rate": ContinuousParameter(0.0005, 0.01, scaling_type="Logarithmic"),
         "batch-size": CategoricalParameter([32, 64])},
        metric_definitions=ACCURACY, max_jobs=6, max_parallel_jobs=2, strategy=strategy, random_seed=1)
    job = tune_local(tuner, output_path=str(tmp_path / "out"))

    assert job is tuner.latest_tuning_job
    assert job.hyper_parameter_tuning_job_status == "Completed"
    assert job.training_job_status_counters.completed == 6, job.training_job_status_counters
    assert job.objective_status_counters.succeeded == 6
    described = tuner.describe()  # refresh(): read again here, not from SageMaker
    best = described.best_training_job
    assert tuner.best_training_job() == best.training_job_name
    accuracy = best.final_hyper_parameter_tuning_job_objective_metric.value
    print(f"best trial {best.training_job_name}: {best.tuned_hyper_parameters} -> test_accuracy={accuracy:.4f}")
    assert 0.1 < accuracy <= 1.0

    frame = tuner.analytics().dataframe()
    assert len(frame) == 6 and set(frame["TrainingJobStatus"]) == {"Completed"}
    assert frame["learning-rate"].between(0.0005, 0.01).all()
    assert frame.loc[frame["FinalObjectiveValue"].idxmax()]["TrainingJobName"] == best.training_job_name

    folder = tmp_path / "out" / described.hyper_parameter_tuning_job_name
    recorded = json.loads((folder / "tuning-job.json").read_text())
    assert recorded["BestTrainingJob"]["TrainingJobName"] == best.training_job_name
    with tarfile.open(folder / best.training_job_name / "output" / "model.tar.gz") as model:
        assert any(name.endswith("saved_model.pb") or name.endswith(".keras") for name in model.getnames())
    log = (folder / best.training_job_name / "logs" / "algo-1.log").read_text()
    assert "test_accuracy=" in log
    assert trainer.hyperparameters == {"epochs": 1, "max-steps": 12}  # each trial ran a copy
    assert trainer.sagemaker_session is None  # a LOCAL_CONTAINER trainer gains no AWS session


def test_an_objective_without_a_metric_definition_is_refused_before_any_trial(tmp_path: Path) -> None:
    from sagemaker.core.parameter import ContinuousParameter
    from sagemaker.train.tuner import HyperparameterTuner

    from smddp_compat.errors import ConfigurationError
    from smddp_compat.estimators.sdk3 import tune_local

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text("raise SystemExit('a trial ran')\n")
    tuner = HyperparameterTuner(_trainer(source, "train.py"), "accuracy", {"lr": ContinuousParameter(0.001, 0.1)},
                                metric_definitions=ACCURACY, max_jobs=2)
    with pytest.raises(ConfigurationError, match=r"objective_metric_name='accuracy': has no metric definition"):
        tune_local(tuner, output_path=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert tuner.latest_tuning_job is None


def test_a_warm_start_from_an_earlier_local_tuning_job(tmp_path: Path) -> None:
    from sagemaker.core.parameter import ContinuousParameter
    from sagemaker.core.shapes import HyperParameterTuningJobWarmStartConfig, ParentHyperParameterTuningJob
    from sagemaker.train.tuner import HyperparameterTuner

    from smddp_compat.estimators.sdk3 import tune_local

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text("import sys\nlr = float(sys.argv[sys.argv.index('--lr') + 1])\n"
                                     "print(f'val_loss={abs(lr - 0.03):.6f}')\n")
    metrics = [{"Name": "val_loss", "Regex": r"val_loss=([0-9.]+)"}]

    def tuner(**kwargs):
        return HyperparameterTuner(_trainer(source, "train.py"), "val_loss", {"lr": ContinuousParameter(0.001, 0.1)},
                                   metric_definitions=metrics, objective_type="Minimize", **kwargs)

    parent = tune_local(tuner(strategy="Random", max_jobs=3, random_seed=4), output_path=str(tmp_path / "out"),
                        job_name="parent-1")
    warm = HyperParameterTuningJobWarmStartConfig(
        parent_hyper_parameter_tuning_jobs=[ParentHyperParameterTuningJob(hyper_parameter_tuning_job_name="parent-1")],
        warm_start_type="IdenticalDataAndAlgorithm")
    child = tune_local(tuner(strategy="Bayesian", max_jobs=2, warm_start_config=warm),
                       output_path=str(tmp_path / "out"), job_name="child-1")
    assert child.training_job_status_counters.completed == 2
    bests = [parent.best_training_job, child.best_training_job]
    best = min(bests, key=lambda job: job.final_hyper_parameter_tuning_job_objective_metric.value)
    assert child.overall_best_training_job.training_job_name == best.training_job_name


def test_sdk3s_tuner_with_early_stopping_stops_a_trial_worse_than_the_median(tmp_path: Path, monkeypatch,
                                                                             mlflow_server) -> None:
    """``early_stopping_type="Auto"``: SageMaker's median rule, each value of the objective a trial prints an epoch;
    ``MLFLOW_TRACKING_URI``: the tuning job is a run, each trial a run under it (the stopped one ``KILLED``, tagged)."""
    from mlflow import MlflowClient
    from sagemaker.core.parameter import CategoricalParameter
    from sagemaker.train.tuner import HyperparameterTuner

    from smddp_compat.estimators.sdk3 import tune_local
    from tests.epoch_script import VAL_LOSS, epoch_of, epochs_script

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(epochs_script(0.2, 6))
    tuner = HyperparameterTuner(
        _trainer(source, "train.py"), "val_loss", {"lr": CategoricalParameter(["0.04", "0.03", "0.5"])},
        metric_definitions=[VAL_LOSS], objective_type="Minimize", strategy="Grid", early_stopping_type="Auto")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)  # MLflow's own variable: tracked there
    job = tune_local(tuner, output_path=str(tmp_path / "out"), job_name="early-v3")
    assert job.training_job_status_counters.completed == 2 and job.training_job_status_counters.stopped == 1
    frame = tuner.analytics().dataframe()
    stopped = frame[frame["TrainingJobStatus"] == "Stopped"]
    assert list(stopped["lr"]) == [0.5]
    stopped_at = epoch_of(float(stopped["FinalObjectiveValue"].iloc[0]), 0.5, 6)
    assert stopped_at is not None and stopped_at < 6  # the last value it printed before the stop reached it

    client = MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name("early-v3").experiment_id  # the tuning job's name
    [parent] = client.search_runs([experiment], "attributes.run_name = 'early-v3'")
    children = {run.data.params["lr"]: run for run in client.search_runs(
        [experiment], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert sorted(children) == ["0.03", "0.04", "0.5"]
    assert parent.info.status == "FINISHED"
    assert {lr: run.info.status for lr, run in children.items()} == {"0.03": "FINISHED", "0.04": "FINISHED",
                                                                    "0.5": "KILLED"}
    assert [lr for lr, run in children.items() if run.data.tags.get("sagemaker.stopped_early")] == ["0.5"]
    assert len(client.get_metric_history(children["0.5"].info.run_id, "val_loss")) == stopped_at  # its epochs
    assert len(client.get_metric_history(children["0.03"].info.run_id, "val_loss")) == 6
    assert sorted(point.value for point in client.get_metric_history(parent.info.run_id, "val_loss")) == \
        pytest.approx(sorted(frame["FinalObjectiveValue"]))  # each trial's objective
    assert parent.data.tags["sagemaker.best_run_id"] == children["0.03"].info.run_id
