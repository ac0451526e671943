"""Checkpoints, TensorBoard output and managed spot training in the twin, as SageMaker runs them: ONE 2-host job.

A managed spot request (built by the kit's estimator against moto) whose script keeps its last three checkpoints
on every host is interrupted by the twin (``interrupt_after``): SIGTERM to every container, ``Interrupted``, then
``Restarting`` and a new start of every container with the checkpoints synced to ``CheckpointConfig.S3Uri``, under
the same job name; it resumes there and completes. The S3 location then holds exactly each host's last three
checkpoints (what a host deleted was deleted there too), ``checkpointconfig.json`` was where SageMaker puts it, the
TensorBoard folder of both runs reached S3, and the billable time is below the training time.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest
from tests.docker.test_twin import CPU_TYPE, SCRIPTS, _as_the_service, _estimator
from tests.fake_aws import Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

CHECKPOINTS = "s3://twin-spot/checkpoints"


def test_a_spot_job_keeping_its_last_checkpoints_is_interrupted_restarts_from_them_and_completes(
    aws: Aws, kit_image: str, tmp_path: Path
) -> None:
    from sagemaker.debugger import TensorBoardOutputConfig

    est = _estimator(
        aws, kit_image, entry_point="rotating_checkpoints.py", source_dir=str(SCRIPTS), instance_type=CPU_TYPE,
        hyperparameters={"steps": 150, "delay": 0.4, "keep": 3}, checkpoint_s3_uri=CHECKPOINTS,
        use_spot_instances=True, max_run=600, max_wait=1200,
        tensorboard_output_config=TensorBoardOutputConfig(s3_output_path="s3://twin-spot/tensorboard"),
    )
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="twin-spot")
    est.fit(wait=False, job_name="twin-spot-rotation")
    request = TrainingJobRequest.from_params(aws.requests[-1])
    assert request.spot and request.max_wait == 1200
    stream = io.StringIO()
    # 40 s after the containers start: the toolkit has started the script, which has saved a few checkpoints and
    # cannot have finished (150 steps at 0.4 s). 15 s, then 25 s, were too short with 3 pytest-xdist workers on 2
    # cores: the script on algo-1 had not yet saved its first checkpoint (the containers took ~24 s to start it).
    result = SageMakerTwin(request, stream=stream, checkpoint_sync_seconds=1, stop_grace=20, interrupt_after=40,
                           checkpoints=CHECKPOINTS, **_as_the_service(request)).run()
    printed = stream.getvalue()
    assert (result.status, result.secondary_status) == ("Completed", "Completed"), printed[-4000:]
    assert result.job_name == "twin-spot-rotation"  # one job, one name, throughout

    for host in ("algo-1", "algo-2"):
        assert f"[{host}] {host} resumed from step 0" in printed and f"[{host}] {host} got SIGTERM" in printed
    assert printed.count("[twin] restarting every container") == 1, printed[-4000:]

    output = aws.download(result.output_artifacts, str(tmp_path / "output.tar.gz"))
    with tarfile.open(output) as archive:
        finals = {record["host"]: record for record in (
            json.loads(archive.extractfile(member).read())  # type: ignore[union-attr]
            for member in archive.getmembers() if member.name.startswith("final-"))}
    assert sorted(finals) == ["algo-1", "algo-2"]
    for host, final in finals.items():
        assert final["resumed_from"] >= 1, f"{host} restarted without its synced checkpoints: {printed[-4000:]}"
        assert final["checkpoints"] == [f"{host}-step-{step}" for step in (148, 149, 150)]
        assert final["checkpointconfig"] == {"LocalPath": "/opt/ml/checkpoints", "S3Uri": CHECKPOINTS}
    # What each host deleted was deleted in S3: exactly every host's last three are left.
    stored = sorted(item["Key"] for item in s3.list_objects_v2(Bucket="twin-spot", Prefix="checkpoints/")["Contents"])
    assert stored == sorted(f"checkpoints/{name}" for final in finals.values() for name in final["checkpoints"])

    tensorboard = f"{request.output_path.prefix}/twin-spot-rotation/tensorboard/".lstrip("/")
    boards = {item["Key"][len(tensorboard):] for item in s3.list_objects_v2(
        Bucket=request.output_path.bucket, Prefix=tensorboard).get("Contents", [])}
    for host, final in finals.items():  # one way: the first run's file stays though its instance is gone
        assert {f"{host}/events.out.tfevents.from-0", f"{host}/events.out.tfevents.from-{final['resumed_from']}"} <= boards

    described = result.describe()
    statuses = [entry["Status"] for entry in described["SecondaryStatusTransitions"]]
    assert statuses[statuses.index("Training"):] == [
        "Training", "Interrupted", "Restarting", "Training", "Uploading", "Completed"], statuses
    assert described["BillableTimeInSeconds"] < described["TrainingTimeInSeconds"], described
