"""Local tuning's rules, in process (local_mode/tuning.py): ranges and their scalings as SageMaker defines them, the
strategies' choices, how trials are counted, the DescribeHyperParameterTuningJob answer. The trials here are a
function of their hyperparameters (no job runs: tests/estimators/test_local_tuning.py runs real ones)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

import pytest

from smddp_compat.errors import ConfigurationError
from smddp_compat.local_mode.search_strategies import ParameterRange, parameter_ranges
from smddp_compat.local_mode.tuning import ParentTuningJob, TuningJob


def _request(ranges: Mapping[str, Any], strategy: str = "Random", max_jobs: int = 6, parallel: int = 1,
             **config: Any) -> dict[str, Any]:
    return {
        "HyperParameterTuningJobName": "tune-1",
        "HyperParameterTuningJobConfig": {
            "Strategy": strategy, "ParameterRanges": ranges,
            "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": "loss"},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": parallel}, **config},
        "TrainingJobDefinition": {"AlgorithmSpecification": {"MetricDefinitions": [{"Name": "loss", "Regex": "x"}]},
                                  "StaticHyperParameters": {"epochs": "1"}},
    }


def _trial(loss_of: Any) -> Any:
    def run(name: str, hyperparameters: Mapping[str, str], control: Any) -> Mapping[str, Any]:
        loss = loss_of(hyperparameters)
        if loss is None:
            raise RuntimeError("the script failed")
        return {"TrainingJobStatus": "Completed", "FinalMetricDataList": [{"MetricName": "loss", "Value": loss}]}
    return run


def test_logarithmic_and_integer_ranges_stay_in_their_bounds_and_spread_by_their_scale() -> None:
    job = TuningJob(_request({"ContinuousParameterRanges": [
        {"Name": "lr", "MinValue": "0.0001", "MaxValue": "1", "ScalingType": "Logarithmic"}],
        "IntegerParameterRanges": [{"Name": "units", "MinValue": "1", "MaxValue": "3", "ScalingType": "Linear"}]},
        max_jobs=200, RandomSeed=1), region="us-east-1")
    seen: list[Mapping[str, str]] = []
    job.run(_trial(lambda hp: seen.append(dict(hp)) or 0.0), stream=io.StringIO())
    lrs = [float(hp["lr"]) for hp in seen]
    assert all(0.0001 <= lr <= 1 for lr in lrs)
    # log scale: each decade about as likely (uniform in log10 from -4 to 0: about a quarter below 0.001)
    assert 0.15 < sum(lr < 0.001 for lr in lrs) / len(lrs) < 0.35
    assert {hp["units"] for hp in seen} == {"1", "2", "3"}  # both bounds reached, nothing beyond
    assert all(hp["epochs"] == "1" and hp["_tuning_objective_metric"] == "loss" for hp in seen)


def test_random_with_a_seed_repeats_its_choices() -> None:
    def choices() -> list[str]:
        seen: list[str] = []
        job = TuningJob(_request({"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "1"}]},
                                 RandomSeed=42), region="us-east-1")
        job.run(_trial(lambda hp: seen.append(hp["lr"]) or 0.0), stream=io.StringIO())
        return seen
    assert choices() == choices()


def test_failed_trials_are_counted_and_the_best_is_the_lowest_objective() -> None:
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2", "3", "4"]}]},
                             strategy="Grid", max_jobs=50, parallel=2), region="us-east-1")
    job.run(_trial(lambda hp: None if hp["x"] == "2" else abs(float(hp["x"]) - 3.2)), stream=io.StringIO())
    described = job.describe()
    assert described["HyperParameterTuningJobStatus"] == "Completed"
    assert described["TrainingJobStatusCounters"]["Completed"] == 3
    assert described["TrainingJobStatusCounters"]["NonRetryableError"] == 1
    assert described["ObjectiveStatusCounters"] == {"Succeeded": 3, "Pending": 0, "Failed": 1}
    assert described["BestTrainingJob"]["TunedHyperParameters"] == {"x": "3"}
    assert math.isclose(described["BestTrainingJob"]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], 0.2)
    assert len(job.training_job_summaries()) == 4


def test_a_tuning_job_whose_every_trial_failed_is_failed_with_the_reason() -> None:
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2"]}]}, strategy="Grid"),
                    region="us-east-1")
    job.run(_trial(lambda hp: None), stream=io.StringIO())
    described = job.describe()
    assert described["HyperParameterTuningJobStatus"] == "Failed"
    assert "no training job gave the objective metric 'loss'" in described["FailureReason"]
    assert "BestTrainingJob" not in described


def test_more_trials_at_once_than_the_cores_hold_is_capped_and_said_once() -> None:
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1"]}]}, parallel=64),
                    region="us-east-1", processes_per_trial=2)
    out = io.StringIO()
    job.run(_trial(lambda hp: 1.0), stream=out)
    assert job.parallel < 64
    assert out.getvalue().count("max_parallel_jobs=64: this machine runs") == 1


@pytest.mark.parametrize("ranges, named", [
    ({"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "1", "ScalingType": "Logarithmic"}]},
     "is logarithmic with values not above 0"),
    ({"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0.5", "MaxValue": "1",
                                     "ScalingType": "ReverseLogarithmic"}]}, "is reverse-logarithmic outside"),
    ({"IntegerParameterRanges": [{"Name": "n", "MinValue": "5", "MaxValue": "1"}]}, "has MinValue above MaxValue"),
    ({"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "a", "MaxValue": "1"}]}, "is not a number"),
    ({"CategoricalParameterRanges": [{"Name": "opt", "Values": []}]}, "has no values"),
    ({}, "has no range"),
])
def test_ranges_sagemaker_refuses_are_refused_by_name(ranges: Mapping[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        parameter_ranges(ranges)


def test_grid_takes_categorical_ranges_only() -> None:
    with pytest.raises(ConfigurationError, match=r"strategy='Grid': takes categorical ranges only \(lr are not\)"):
        TuningJob(_request({"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "1"}]},
                           strategy="Grid"), region="us-east-1")


@pytest.mark.parametrize("field, limits", [("max_parallel_jobs", {"MaxParallelTrainingJobs": 0}),
                                           ("max_jobs", {"MaxNumberOfTrainingJobs": 0})])
def test_zero_trials_or_zero_at_once_is_refused_not_read_as_one(field: str, limits: Mapping[str, int]) -> None:
    request = _request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1"]}]})
    request["HyperParameterTuningJobConfig"]["ResourceLimits"].update(limits)
    with pytest.raises(ConfigurationError, match=f"{field}=0: must be a whole number >= 1"):
        TuningJob(request, region="us-east-1")


def test_each_scale_maps_the_unit_interval_onto_its_range() -> None:
    assert float(ParameterRange("lr", "Continuous", 0.001, 0.1, "Logarithmic").from_unit(0.5)) == pytest.approx(0.01)
    # reverse-logarithmic: 1 - x is log-uniform, so the middle of [0.9, 0.999] is 0.99 (dense near 1)
    assert float(ParameterRange("m", "Continuous", 0.9, 0.999, "ReverseLogarithmic").from_unit(0.5)) == \
        pytest.approx(0.99)
    integer = ParameterRange("n", "Integer", 1, 4)
    assert [integer.from_unit(u) for u in (0.0, 0.3, 0.6, 0.99, 1.0)] == ["1", "2", "3", "4", "4"]  # each as wide


def test_the_answers_have_sagemakers_shapes() -> None:
    job = TuningJob(_request({"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "9"}]},
                             max_jobs=3), region="eu-west-1")
    job.run(_trial(lambda hp: float(hp["x"])), io.StringIO())
    described = job.describe()
    assert described["HyperParameterTuningJobArn"] == \
        "arn:aws:sagemaker:eu-west-1:000000000000:hyper-parameter-tuning-job/tune-1"
    best = described["BestTrainingJob"]
    assert {"TrainingJobName", "TrainingJobArn", "TuningJobName", "CreationTime", "TrainingEndTime",
            "TrainingJobStatus", "TunedHyperParameters", "ObjectiveStatus"} <= set(best)
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["Type"] == "Minimize"
    names = [s["TrainingJobName"] for s in job.training_job_summaries()]
    assert names == sorted(names, reverse=True) and all(n.startswith("tune-1-00") for n in names)  # newest first
    assert described["TrainingJobStatusCounters"] == {"Completed": 3, "InProgress": 0, "RetryableError": 0,
                                                      "NonRetryableError": 0, "Stopped": 0}


# -- warm start ---------------------------------------------------------------------------------------------------

_LR = {"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "1"}]}


def _parent(name: str = "first", objective: str = "Minimize") -> ParentTuningJob:
    """An ended Random tuning job of 5 trials, loss |lr - 0.3|."""
    request = {**_request(_LR, max_jobs=5, RandomSeed=7), "HyperParameterTuningJobName": name}
    request["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["Type"] = objective
    job = TuningJob(request, region="us-east-1")
    job.run(_trial(lambda hp: abs(float(hp["lr"]) - 0.3)), stream=io.StringIO())
    return ParentTuningJob(name, job.describe(), job.training_job_summaries())


def _warm(parents: list[ParentTuningJob], names: list[str] | None = None, strategy: str = "Bayesian",
          warm_type: str = "IdenticalDataAndAlgorithm", ranges: Mapping[str, Any] = _LR) -> TuningJob:
    request = {**_request(ranges, strategy=strategy, max_jobs=2, RandomSeed=3), "WarmStartConfig": {
        "WarmStartType": warm_type, "ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": n} for n in (names if names is not None else [p.name for p in parents])]}}
    return TuningJob(request, region="us-east-1", parents=parents)


def test_a_warm_start_teaches_the_search_its_parents_trials_and_compares_their_best() -> None:
    parent = _parent()
    narrower = {"ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "0.5"}]}
    inside = [t for t in parent.training_jobs if float(t["TunedHyperParameters"]["lr"]) <= 0.5]
    assert 0 < len(inside) < 5  # the seed gives trials on both sides of the new range
    job = _warm([parent], ranges=narrower)
    assert job.learned == len(inside)  # those outside today's range cannot be placed
    out = io.StringIO()
    job.run(_trial(lambda hp: 10 + float(hp["lr"])), stream=out)  # every new trial worse than the parent's best
    assert f"warm start (IdenticalDataAndAlgorithm): the search learned {len(inside)} trial(s) of first" in \
        out.getvalue()
    assert len(job.strategy._study.trials) == len(inside) + 2  # type: ignore[attr-defined]
    described = job.describe()
    assert described["WarmStartConfig"]["ParentHyperParameterTuningJobs"] == [{"HyperParameterTuningJobName": "first"}]
    assert described["BestTrainingJob"]["TuningJobName"] == "tune-1"  # this job's own best
    assert described["OverallBestTrainingJob"] == parent.description["BestTrainingJob"]  # the parent's was better


def test_a_transfer_learning_warm_start_has_no_overall_best() -> None:
    job = _warm([_parent()], warm_type="TransferLearning")
    job.run(_trial(lambda hp: float(hp["lr"])), stream=io.StringIO())
    assert "OverallBestTrainingJob" not in job.describe()


@pytest.mark.parametrize("case, named", [
    ("grid", "is not run by local tuning with strategy 'Grid'"),
    ("six parents", "needs 1 to 5 parent tuning jobs"),
    ("not found", "names tuning jobs that were not found"),
    ("other objective", "tuned another objective"),
    ("not ended", "has not ended"),
])
def test_a_warm_start_sagemaker_refuses_is_refused_before_any_trial(case: str, named: str) -> None:
    parent = _parent()
    if case == "grid":
        make = lambda: _warm([parent], strategy="Grid", ranges={  # noqa: E731
            "CategoricalParameterRanges": [{"Name": "lr", "Values": ["0.1"]}]})
    elif case == "six parents":
        make = lambda: _warm([parent], names=[f"p{i}" for i in range(6)])  # noqa: E731
    elif case == "not found":
        make = lambda: _warm([], names=["first"])  # noqa: E731
    elif case == "other objective":
        make = lambda: _warm([_parent(objective="Maximize")])  # noqa: E731
    else:
        running = ParentTuningJob("first", {**parent.description, "HyperParameterTuningJobStatus": "InProgress"},
                                  parent.training_jobs)
        make = lambda: _warm([running])  # noqa: E731
    with pytest.raises(ConfigurationError, match=named):
        make()


# -- early stopping, Hyperband, Ctrl-C, the end's table and chart -----------------------------------------------------

def _epochs_trial(curve: Any) -> Any:
    """A trial that prints its objective once per epoch (``curve(hyperparameters)``, a list) through its control, as
    a job's log lines reach the metric reader, and ends ``Stopped`` when it was asked to stop."""
    def run(name: str, hyperparameters: Mapping[str, str], control: Any) -> Mapping[str, Any]:
        last = None
        for value in curve(hyperparameters):
            if control.stop_requested.is_set():
                break
            control.on_metric("loss", value)
            last = value
        status = "Stopped" if control.stop_requested.is_set() else "Completed"
        return {"TrainingJobStatus": status, "FinalMetricDataList": [{"MetricName": "loss", "Value": last}]}
    return run


def test_auto_early_stopping_stops_a_trial_worse_than_the_median_of_the_earlier_running_averages() -> None:
    curves = {"1": [1.0, 1.0, 1.0, 1.0], "2": [0.5, 0.5, 0.5, 0.5], "3": [0.9, 5.0, 5.0, 5.0]}
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2", "3"]}]},
                             strategy="Grid", TrainingJobEarlyStoppingType="Auto"), region="us-east-1")
    out = io.StringIO()
    job.run(_epochs_trial(lambda hp: curves[hp["x"]]), stream=out)
    trials = {t["TunedHyperParameters"]["x"]: t for t in job.training_job_summaries()}
    # x=2 is better than x=1 at each epoch: it runs on; x=3 is better at epoch 1 (0.9 < median 0.75? no: worse
    # than 0.75 but the median of the running averages of 1.0 and 0.5 is 0.75, and 0.9 > 0.75): stopped at once.
    assert trials["1"]["TrainingJobStatus"] == trials["2"]["TrainingJobStatus"] == "Completed"
    assert trials["3"]["TrainingJobStatus"] == "Stopped"
    assert trials["3"]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == 0.9  # its last value
    described = job.describe()
    assert described["TrainingJobStatusCounters"]["Stopped"] == 1
    assert described["BestTrainingJob"]["TunedHyperParameters"] == {"x": "2"}
    assert "stopped early: epoch 1: 0.9 is worse than the median" in out.getvalue()


def test_the_median_rule_compares_running_averages_up_to_the_same_epoch() -> None:
    from smddp_compat.local_mode.early_stopping import MedianStoppingRule

    rule = MedianStoppingRule(maximize=True)
    earlier = [[0.1, 0.9], [0.2, 0.4], [0.3]]  # running averages at epoch 2: 0.5 and 0.3 (the third has no epoch 2)
    assert not rule.should_stop([0.0, 0.41], earlier)  # 0.41 is not below the median 0.4
    assert rule.should_stop([0.0, 0.39], earlier)
    assert not rule.should_stop([0.0, 0.0, 0.0], earlier)  # no earlier trial reached epoch 3: it goes on
    assert not rule.should_stop([0.1], [])


def test_hyperband_stops_trials_between_min_and_max_resource_epochs() -> None:
    job = TuningJob(_request({"ContinuousParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "1"}]},
                             strategy="Hyperband", max_jobs=16, RandomSeed=3,
                             StrategyConfig={"HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 9}}),
                    region="us-east-1")
    heard: dict[str, int] = {}

    def curve(hp: Mapping[str, str]) -> list[float]:
        return [float(hp["x"]) + 1 / epoch for epoch in range(1, 30)]  # runs past MaxResource unless stopped

    def counting(name: str, hp: Mapping[str, str], control: Any) -> Mapping[str, Any]:
        listener = control.on_metric

        def count(metric: str, value: float) -> None:
            heard[name] = heard.get(name, 0) + 1
            listener(metric, value)
        control.on_metric = count
        return _epochs_trial(curve)(name, hp, control)

    out = io.StringIO()
    job.run(counting, stream=out)
    assert max(heard.values()) == 9  # MaxResource: no trial printed more than 9 epochs
    assert "MaxResource (9 epochs) reached" in out.getvalue()
    assert any(count < 9 for count in heard.values()), heard  # Hyperband's own stops, before MaxResource
    assert "stopped early: Hyperband at epoch" in out.getvalue()
    assert all(t["ObjectiveStatus"] == "Succeeded" for t in job.training_job_summaries())


@pytest.mark.parametrize("config, static, named", [
    ({"TrainingJobEarlyStoppingType": "Auto"}, {"epochs": "3"}, "is not 'Off' with strategy 'Hyperband'"),
    ({}, {}, "cannot be read from the static hyperparameters"),
    ({}, {"num_epochs": "\"0\""}, "is outside 1 to 20000"),
    ({"StrategyConfig": {"HyperbandStrategyConfig": {"MinResource": 5, "MaxResource": 4}}}, {}, "is above MaxResource"),
])
def test_hyperband_resources_are_checked_as_sagemaker_checks_them(config: dict[str, Any], static: dict[str, str],
                                                                  named: str) -> None:
    request = _request({"ContinuousParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "1"}]},
                       strategy="Hyperband", **config)
    request["TrainingJobDefinition"]["StaticHyperParameters"] = static
    with pytest.raises(ConfigurationError, match=named):
        TuningJob(request, region="us-east-1")


def test_hyperband_reads_max_resource_from_the_static_epochs() -> None:
    job = TuningJob(_request({"ContinuousParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "1"}]},
                             strategy="Hyperband"), region="us-east-1")  # StaticHyperParameters epochs "1"
    assert (job.strategy.min_resource, job.strategy.max_resource) == (1, 1)  # type: ignore[attr-defined]


def test_ctrl_c_stops_the_running_trials_and_keeps_them() -> None:
    import _thread
    import threading

    started = threading.Barrier(2)

    def run(name: str, hp: Mapping[str, str], control: Any) -> Mapping[str, Any]:
        control.on_metric("loss", 1.0)
        if started.wait(timeout=10) == 0:
            _thread.interrupt_main()  # Ctrl-C, while both trials run
        asked = control.stop_requested.wait(timeout=10)
        return {"TrainingJobStatus": "Stopped" if asked else "Completed",
                "FinalMetricDataList": [{"MetricName": "loss", "Value": 1.0}]}

    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2", "3", "4"]}]},
                             strategy="Grid", parallel=2), region="us-east-1")
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        job.run(run, stream=out)
    described = job.describe()
    assert described["HyperParameterTuningJobStatus"] == "Stopped"
    assert described["TrainingJobStatusCounters"]["Stopped"] == 2  # both asked to stop, kept; none started after
    assert len(job.training_job_summaries()) == 2
    assert "interrupted (Ctrl-C): stopping 2 running trial(s)" in out.getvalue()


def test_the_end_has_a_table_a_chart_and_progress_says_the_time_left(tmp_path: Any) -> None:
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2", "3"]}]},
                             strategy="Grid"), region="us-east-1")
    out = io.StringIO()
    job.run(_trial(lambda hp: None if hp["x"] == "3" else float(hp["x"])), stream=out)
    lines = [line for line in out.getvalue().splitlines() if " trial " in line]
    assert [line.endswith("s left") for line in lines] == [True, True, False]  # nothing left after the last
    table = job.table(str(tmp_path))
    best = next(line for line in table.splitlines() if line.startswith("*"))
    assert best.split()[2:] == ["1", "Completed", "1"]
    assert "Failed" in table and f"its model: {tmp_path}" in table and "tuning job tune-1: Completed" in table
    assert job.write_chart(str(tmp_path / "tuning.png"))
    assert (tmp_path / "tuning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hyperband_over_a_categorical_range_tells_each_trial_apart() -> None:
    """Trials with the same values (a categorical range, more trials than values) are reported to Hyperband each as
    its own trial: every trial is told and judged once."""
    job = TuningJob(_request({"CategoricalParameterRanges": [{"Name": "x", "Values": ["1", "2"]}]},
                             strategy="Hyperband", max_jobs=8, RandomSeed=1,
                             StrategyConfig={"HyperbandStrategyConfig": {"MaxResource": 4}}), region="us-east-1")
    job.run(_epochs_trial(lambda hp: [float(hp["x"]) + 1 / e for e in range(1, 10)]), stream=io.StringIO())
    study = job.strategy._study  # type: ignore[attr-defined]
    assert len(study.trials) == 8 and all(t.state.is_finished() for t in study.trials)
    assert all(len(t.intermediate_values) >= 1 for t in study.trials)
