"""The twin's DescribeTrainingJob answer, whole, for one 2-host SMDDP job: every rank prints metric lines under
SageMaker's SMDDP launch (mpirun ``--tag-output``, unbuffered Python), so lines reach the toolkit torn; the logs must
hold every line whole, with its rank and host, and ``FinalMetricDataList`` must read them. The request is built
against moto by the kit's estimator, with ``metric_definitions``, as ``tests/docker/test_twin.py`` builds its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smddp_compat.local_mode.api_model import check_response
from smddp_compat.local_mode.outcome import TWIN_NOTES
from tests.docker.test_twin import _estimator, _replay
from tests.fake_aws import Aws

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("no_leftovers")]

STEPS = 50
RANKS = 4  # 2 hosts x 2 stand-in GPUs
# The value at the end of its line: a torn line ("...checksum=-1.2345[1,mpirank:0,algo-1]<stdout>:") never matches.
METRICS = [{"Name": f"rank{rank}_checksum", "Regex": rf"rank={rank} host=\S+ checksum=(-?[0-9.]+)$"}
           for rank in range(RANKS)] + [{"Name": "never_printed", "Regex": r"absent=([0-9.]+)"}]
TORN = re.compile(r".\[\d+,mpirank:\d+,algo-\d+\]<std(out|err)>:")


def _value(rank: int, step: int) -> float:
    return round(-1.2345 * (rank + 1) * step, 4)


def test_the_answer_of_a_2_host_smddp_job_is_sagemakers_whole(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    est = _estimator(aws, kit_image, entry_point="metric_lines.py", hyperparameters={"steps": STEPS},
                     distribution={"smdistributed": {"dataparallel": {"enabled": True}}}, metric_definitions=METRICS)
    est.fit(wait=False, job_name="twin-answer")
    request = aws.requests[-1]
    result, printed = _replay(aws, gpus_per_host=2)
    assert result.status == "Completed", printed[-4000:]
    answer = result.describe()

    # The answer is one SageMaker could give (botocore's output shape), plus the twin's own notes.
    answer.pop(TWIN_NOTES)
    check_response(answer)
    # The request's members, echoed as sent.
    for member in ("AlgorithmSpecification", "ResourceConfig", "HyperParameters", "StoppingCondition", "RoleArn",
                   "OutputDataConfig"):
        assert answer[member] == request[member], member
    assert answer["AlgorithmSpecification"]["MetricDefinitions"] == METRICS
    assert answer["TrainingJobName"] == "twin-answer"
    assert answer["TrainingJobArn"].endswith(":training-job/twin-answer")
    assert answer["ModelArtifacts"]["S3ModelArtifacts"] == result.model_artifacts
    assert (answer["TrainingJobStatus"], answer["SecondaryStatus"]) == ("Completed", "Completed")

    # Transitions in SageMaker's order, with its messages, each ending when the next starts.
    transitions = answer["SecondaryStatusTransitions"]
    assert [(t["Status"], t["StatusMessage"]) for t in transitions] == [
        ("Starting", "Preparing the instances for training"),
        ("Downloading", "Downloading input data"),
        ("Training", "Training image download completed. Training in progress."),
        ("Uploading", "Uploading generated training model"),
        ("Completed", "Training job completed"),
    ]
    for this, following in zip(transitions, transitions[1:]):
        assert this["StartTime"] <= this["EndTime"] == following["StartTime"]
    assert transitions[-1]["EndTime"] == transitions[-1]["StartTime"]

    # Times consistent with the transitions, as in SageMaker's answers.
    start, end = answer["TrainingStartTime"], answer["TrainingEndTime"]
    assert answer["CreationTime"] == transitions[0]["StartTime"] < start == transitions[1]["StartTime"]
    assert end == answer["LastModifiedTime"] == transitions[-1]["StartTime"]
    assert answer["TrainingTimeInSeconds"] == int((end - start).total_seconds())
    assert answer["BillableTimeInSeconds"] == answer["TrainingTimeInSeconds"]

    # Every rank's last value, read from whole lines; a metric never printed is left out.
    final = {m["MetricName"]: m for m in answer["FinalMetricDataList"]}
    assert {name: m["Value"] for name, m in final.items()} == {
        f"rank{rank}_checksum": _value(rank, STEPS) for rank in range(RANKS)
    }
    training = next(t for t in transitions if t["Status"] == "Training")
    for metric in final.values():
        assert training["StartTime"].replace(microsecond=0) <= metric["Timestamp"] <= training["EndTime"]

    # The log holds every rank's line whole, under its rank's tag and host; so does the console.
    uri = result.logs["algo-1"]  # every rank's lines are on algo-1, where mpirun runs
    log = Path(aws.download(uri, str(tmp_path / "algo-1.log")) if uri.startswith("s3://") else uri).read_text()
    assert not [line for line in log.splitlines() if TORN.search(line)], "a torn line reached the log"
    for rank in range(RANKS):
        host = f"algo-{1 + rank // 2}"
        whole = re.findall(rf"^\[1,mpirank:{rank},{host}\]<stdout>:step=(\d+) rank={rank} host={host} "
                           rf"checksum=(-?[0-9.]+)$", log, flags=re.MULTILINE)
        assert [(int(step), float(value)) for step, value in whole] == [
            (step, _value(rank, step)) for step in range(1, STEPS + 1)
        ], f"rank {rank}'s lines"
    shown = [re.sub(r"^\[algo-\d+\] ", "", line) for line in printed.splitlines()]  # the console's host prefix
    assert not [line for line in shown if TORN.search(line)], "a torn line reached the console"
