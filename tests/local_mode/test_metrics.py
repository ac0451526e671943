"""Metrics as SageMaker reads them (``MetricDefinitions`` -> ``FinalMetricDataList``), in both backends and in the
status displays; the twin's status transitions and times, checked against botocore's DescribeTrainingJob shape."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from smddp_compat.errors import ConfigurationError as SharedConfigurationError
from smddp_compat.local_mode import JobSpec
from smddp_compat.commands.local_cli import build_parser, spec_from_args
from smddp_compat.local_mode.api_model import check_response
from smddp_compat.local_mode.artifacts import ArtifactPaths
from smddp_compat.local_mode.outcome import TWIN_NOTES, JobResult, SecondaryStatusLog
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.metrics import (
    MetricTap,
    MetricWatch,
    check_metric_definitions,
    watchable_definitions,
)

SCRIPTS = Path(__file__).resolve().parent / "scripts"
T0 = datetime(2026, 11, 24, 10, 0, 0, 500000, tzinfo=timezone.utc)


def test_the_last_value_of_each_metric_counts_read_from_its_first_group() -> None:
    # The developer guide's own example line and regexes ("Define metrics and environment variables").
    watch = MetricWatch(check_metric_definitions([
        {"Name": "loss", "Regex": "Loss = (.*?);"},
        {"Name": "ganloss", "Regex": "GAN_loss=(.*?);"},
        {"Name": "epoch", "Regex": r"'epoch': ([0-9]+(.|e\-)[0-9]+),?"},  # two groups: the first is the value
        {"Name": "whole", "Regex": r"[0-9]+\.[0-9]+(?=s;  Elapsed)"},  # no group: the whole match
        {"Name": "never", "Regex": "absent=(.*)"},
    ]))
    watch.observe("GAN_loss=0.138318;  Scaled_reg=2.654134; Loss = 16.020744;  Iteration 0 took 0.704s;  Elapsed=0s",
                  when=T0)
    watch.observe("{'epoch': 2.0, 'loss': 0.5}", when=T0)
    watch.observe("GAN_loss=nan;  Loss = not-a-number;", when=T0 + timedelta(seconds=5))  # no value: kept
    watch.observe("{'epoch': 3.0}", when=T0 + timedelta(seconds=9))
    assert watch.values() == {"loss": 16.020744, "ganloss": 0.138318, "epoch": 3.0, "whole": 0.704}
    final = watch.final_metric_data()
    assert [m["MetricName"] for m in final] == ["loss", "ganloss", "epoch", "whole"]  # the definitions' order
    assert final[2]["Timestamp"] == (T0 + timedelta(seconds=9)).replace(microsecond=0)  # whole seconds


@pytest.mark.parametrize(("given", "field"), [
    ("loss=(.*)", "metric_definitions"),
    ([{"Name": "loss"}], "metric_definitions[0]"),
    ([{"Name": "loss", "Regex": "loss=(", "Extra": 1}], "metric_definitions[0]"),
    ([{"Name": "", "Regex": "x"}], "metric_definitions[0].Name"),
    ([{"Name": "loss", "Regex": "x" * 501}], "metric_definitions[0].Regex"),
    ([{"Name": "loss", "Regex": "loss=([0-9.]+"}], "metric_definitions['loss'].Regex"),
    ([{"Name": "loss", "Regex": "a=(.*)"}, {"Name": "loss", "Regex": "b=(.*)"}], "metric_definitions[1].Name"),
    ([{"Name": f"m{i}", "Regex": "x"} for i in range(41)], "metric_definitions"),
], ids=["not-a-list", "no-regex", "extra-key", "empty-name", "regex-too-long", "regex-broken", "twice", "over-40"])
def test_bad_metric_definitions_are_refused_naming_the_field(given: object, field: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        JobSpec(entry_point=str(SCRIPTS / "allreduce.py"), metric_definitions=given)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_smddp_local_metric_options_become_the_specs_definitions() -> None:
    args = build_parser().parse_args([str(SCRIPTS / "allreduce.py"), "--metric", "loss=loss=([0-9.]+)",
                                      "--metric", "acc=acc: ([0-9.]+)"])
    assert [dict(d) for d in spec_from_args(args).metric_definitions] == [
        {"Name": "loss", "Regex": "loss=([0-9.]+)"}, {"Name": "acc", "Regex": "acc: ([0-9.]+)"}
    ]
    with pytest.raises(SharedConfigurationError, match="--metric"):
        spec_from_args(build_parser().parse_args([str(SCRIPTS / "allreduce.py"), "--metric", "loss"]))


def test_the_process_backend_reads_each_processs_whole_lines_as_they_are_printed() -> None:
    import io

    definitions = check_metric_definitions([{"Name": "loss", "Regex": r"loss=([0-9.]+)"},
                                            {"Name": "acc", "Regex": r"acc=([0-9.]+)"}])
    shown = io.StringIO()
    tap = MetricTap(shown, MetricWatch(definitions, keep_series=True))
    for text in ("[algo-1,0] loss=0.9\n[algo-2,0] lo", "ss=0.7\n[local_mode] loss=0.1 (not the job's)\n",
                 "[algo-2,0] acc=0.8\n[algo-1,0] loss=0.5\n[algo-1,0] loss=0.4"):
        tap.write(text)
    assert tap.watch.values() == {"loss": 0.5, "acc": 0.8}  # algo-1's last; the unfinished last line is not read
    assert [(name, value) for _when, name, value in tap.watch.series] == [
        ("loss", 0.9), ("loss", 0.7), ("acc", 0.8), ("loss", 0.5)]
    tap.write("\n[algo-2,0] loss=0.3\n")
    assert tap.watch.values()["loss"] == 0.4  # algo-1's last value stands against a later one of algo-2
    assert shown.getvalue().endswith("[algo-1,0] loss=0.4\n[algo-2,0] loss=0.3\n")  # everything passed on


def test_a_request_regex_python_cannot_compile_is_left_out_and_said() -> None:
    definitions, left_out = watchable_definitions(
        [{"Name": "java", "Regex": r"(?<value>[0-9]+)"}, {"Name": "ok", "Regex": r"ok=([0-9]+)"}],
        "AlgorithmSpecification.MetricDefinitions",
    )
    assert [d.name for d in definitions] == ["ok"]
    assert left_out and left_out[0].startswith("AlgorithmSpecification.MetricDefinitions[0] (java): ")


def test_status_displays_show_the_final_metrics() -> None:
    from smddp_compat.estimators._jobs import format_status
    shown = format_status({"TrainingJobName": "j", "TrainingJobStatus": "Completed", "FinalMetricDataList": [
        {"MetricName": "loss", "Value": 0.25, "Timestamp": T0}]})
    assert f"metric:    loss = 0.25 (at {T0})" in shown.splitlines()
    result = JobResult("j", "Completed", "Completed", None, 0, ArtifactPaths(None, None), final_metric_data=[
        {"MetricName": "acc", "Value": 0.9721, "Timestamp": T0}])
    assert "  metric acc = 0.9721" in result.summary().splitlines()


def test_the_estimators_local_process_path_passes_metric_definitions_through() -> None:
    from smddp_compat.estimators._distribution import DistributionPlan
    from smddp_compat.estimators._local_process import build_job_spec

    definitions = [{"Name": "loss", "Regex": r"loss=([0-9.]+)"}]
    spec = build_job_spec(
        entry_point="allreduce.py", source_dir=str(SCRIPTS), instance_count=1, plan=DistributionPlan(kind="none", processes_per_host=1),
        hyperparameters={}, inputs=None, output_path=None, max_run=None, job_name=None, environment=None,
        checkpoint_local_path=None, metric_definitions=definitions,
    )
    assert [dict(d) for d in spec.metric_definitions] == definitions


def _answer(statuses: list[tuple[str, float]], *, status: str, failed_at: float | None = None) -> dict:
    log = SecondaryStatusLog()
    for name, seconds in statuses[:-1]:
        log.enter(name, when=T0 + timedelta(seconds=seconds))
    final, seconds = statuses[-1]
    end = log.finish(final, when=T0 + timedelta(seconds=seconds))
    result = JobResult(
        job_name="job-1", status=status, secondary_status=final, failure_reason="AlgorithmError: boom" if
        status == "Failed" else None, exit_code=0, artifacts=ArtifactPaths(None, None), start=T0, end=end,
        transitions=log.transitions, model_location="s3://bucket/out/job-1/output/model.tar.gz",
        failure_detected=T0 + timedelta(seconds=failed_at) if failed_at is not None else None, notes={},
    )
    answer = result.describe()
    answer.pop(TWIN_NOTES)
    check_response(answer)  # botocore's DescribeTrainingJob output shape
    return answer


def test_the_answers_times_follow_the_transitions_as_sagemakers_do() -> None:
    answer = _answer([("Starting", 0), ("Downloading", 20.4), ("Training", 31), ("Uploading", 91.9),
                      ("Completed", 93.2)], status="Completed")
    assert answer["CreationTime"] == T0 and answer["TrainingStartTime"] == T0 + timedelta(seconds=20.4)
    assert answer["TrainingEndTime"] == answer["LastModifiedTime"] == T0 + timedelta(seconds=93.2)
    assert answer["TrainingTimeInSeconds"] == answer["BillableTimeInSeconds"] == 72
    assert answer["ModelArtifacts"] == {"S3ModelArtifacts": "s3://bucket/out/job-1/output/model.tar.gz"}
    assert [t["StatusMessage"] for t in answer["SecondaryStatusTransitions"]] == [
        "Preparing the instances for training", "Downloading input data",
        "Training image download completed. Training in progress.", "Uploading generated training model",
        "Training job completed",
    ]
    # A failed job's TrainingEndTime is when the failure was detected, before its artifacts were uploaded.
    failed = _answer([("Starting", 0), ("Downloading", 10), ("Training", 12), ("Uploading", 40), ("Failed", 45)],
                     status="Failed", failed_at=39.5)
    assert failed["TrainingEndTime"] == T0 + timedelta(seconds=39.5) and failed["TrainingTimeInSeconds"] == 29
    assert failed["SecondaryStatusTransitions"][-1]["StatusMessage"] == "Training job failed"
    # A stop goes through Stopping; a spot job's interruption is not billed.
    stopped = _answer([("Starting", 0), ("Downloading", 1), ("Training", 2), ("Interrupted", 10),
                       ("Restarting", 12), ("Training", 20), ("Stopping", 30), ("Uploading", 31), ("Stopped", 32)],
                      status="Stopped")
    assert [t["Status"] for t in stopped["SecondaryStatusTransitions"]][-4:] == ["Training", "Stopping", "Uploading",
                                                                                "Stopped"]
    assert (stopped["TrainingTimeInSeconds"], stopped["BillableTimeInSeconds"]) == (31, 21)


@pytest.mark.parametrize("status, exceeded, secondary", [
    ("Completed", False, "Completed"), ("Failed", False, "Failed"), ("Stopped", False, "Stopped"),
    ("Stopped", True, "MaxRuntimeExceeded"),
])
def test_a_jobs_end_is_data_not_words_in_its_reason(status, exceeded, secondary):
    """The process backend's result says a time limit stopped the job (SageMaker's secondary status), whatever its
    failure reason reads; the estimator's local view reads that, not the reason's text."""
    result = JobResult("j", status, secondary, "anything at all", 124 if exceeded else 0, ArtifactPaths(None, None))
    assert result.max_run_exceeded is exceeded
    assert result.secondary_status == secondary


@pytest.mark.parametrize("status, secondary, has_reason", [
    ("Failed", "Failed", True), ("Stopped", "Stopped", False), ("Stopped", "MaxRuntimeExceeded", False),
])
def test_only_a_failed_job_answers_a_failure_reason(status: str, secondary: str, has_reason: bool) -> None:
    """DescribeTrainingJob's FailureReason is why a failed job failed: a stopped job (StopTrainingJob, a stop signal,
    its time limit) has none, in both backends (the twin's answer had none already; the process backend's said
    "interrupted by SIGTERM"). The summary still prints the reason."""
    result = JobResult("j", status, secondary, "the job was interrupted by SIGTERM and stopped", 143,
                       ArtifactPaths(None, None))
    assert ("FailureReason" in result.describe()) is has_reason
    assert "interrupted by SIGTERM" in result.summary()
