"""Request members the twin reproduces beyond the start sequence, on 2 hosts (two jobs in all):

* a script that uses S3 itself finds its channel's objects in the twin's S3 (boto3, the channel's S3Uri), and what
  it writes there is listed and kept under ``<output>/<job>/s3/``, never written to the request's S3; the Debugger's
  and profiler's config files are written as SageMaker writes them; a member the twin does not reproduce is warned
  about once, by name, and listed in the answer; a GPU type's world size is stated next to the twin's;
* ``EnableNetworkIsolation``: no S3 endpoint, no credentials and no route out in the containers, the hosts still
  reach one another, and the job runs from the source the SDK hands over as its ``code`` channel.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest
from tests.docker.test_twin import CPU_TYPE, _estimator
from tests.fake_aws import Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

BUCKET = "twin-fields"


def _run(params: dict[str, Any], output: Path, **options: Any) -> tuple[Any, str]:
    stream = io.StringIO()
    request = TrainingJobRequest.from_params(params)
    result = SageMakerTwin(request, stream=stream, job_name=request.job_name, output=str(output), **options).run()
    return result, stream.getvalue()


def _probes(result: Any) -> dict[str, dict[str, Any]]:
    with tarfile.open(result.output_artifacts) as archive:
        return {
            record["host"]: record
            for member in archive.getmembers()
            if member.isfile() and Path(member.name).name.startswith("probe-")
            for record in [json.loads(archive.extractfile(member).read())]  # type: ignore[union-attr]
        }


def test_a_scripts_own_s3_config_files_warnings_and_world_size(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    data = {"data/train/a.txt": "alpha", "data/train/sub/b.txt": "beta"}
    for key, body in {**data, "data/labels.txt": "original labels"}.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    est = _estimator(aws, kit_image, entry_point="s3_probe.py", hyperparameters={
        "mode": "s3", "data-uri": f"s3://{BUCKET}/data/train", "write-uri": f"s3://{BUCKET}/from-script",
        "overwrite-uri": f"s3://{BUCKET}/data/labels.txt"})
    est.fit({"train": f"s3://{BUCKET}/data/"}, wait=False, job_name="twin-fields-s3")
    hook = {"S3OutputPath": f"s3://{BUCKET}/debug", "HookParameters": {"save_interval": "5"}}
    profiler = {"S3OutputPath": f"s3://{BUCKET}/profile", "ProfilingIntervalInMilliseconds": 500,
                "ProfilingParameters": {"DataloaderProfilingConfig": '{"StartStep": 1, "NumSteps": 2}'}}
    params = {**aws.requests[-1], "DebugHookConfig": hook, "ProfilerConfig": profiler,
              "EnableInterContainerTrafficEncryption": True}

    result, printed = _run(params, tmp_path / "out", gpus_per_host=1)

    assert result.status == "Completed", printed[-4000:]
    probes = _probes(result)
    assert sorted(probes) == ["algo-1", "algo-2"]
    for probe in probes.values():
        assert probe["read"] == data  # read with boto3 from the channel's S3Uri, in the twin's S3
        assert probe["configs"] == {"debughookconfig.json": hook, "profilerconfig.json": profiler}
    # What the script wrote is listed (the answer's Twin.S3Writes) and kept; the request's S3 never sees it.
    writes = result.describe()["Twin"]["S3Writes"]
    kept = tmp_path / "out" / "twin-fields-s3" / "s3" / BUCKET
    for host in ("algo-1", "algo-2"):
        assert (kept / "from-script" / f"{host}.txt").read_text() == f"written by {host}"
        assert any(w.startswith(f"s3://{BUCKET}/from-script/{host}.txt: written by the job") for w in writes)
    assert any(w.startswith(f"s3://{BUCKET}/data/labels.txt: a staged input overwritten") for w in writes)
    assert (kept / "data" / "labels.txt").read_text() == "overwritten by algo-2"
    assert s3.get_object(Bucket=BUCKET, Key="data/labels.txt")["Body"].read() == b"original labels"
    assert not s3.list_objects_v2(Bucket=BUCKET, Prefix="from-script/").get("KeyCount")
    assert f"[twin] S3 write: s3://{BUCKET}/from-script/algo-1.txt" in printed
    # A member the twin does not reproduce: said once at the start, by name, and in the answer.
    said = "EnableInterContainerTrafficEncryption = True: not reproduced"
    assert printed.count(f"[twin] warning: {said}") == 1, printed[:4000]
    assert printed.index(f"[twin] warning: {said}") < printed.index("[algo-1]")
    answer = result.describe()["Twin"]
    assert any(w.startswith(said) for w in answer["Warnings"])
    assert any(w.startswith("DebugHookConfig: written to /opt/ml/input/config/") for w in answer["Warnings"])
    # ml.p4d.24xlarge: 8 GPUs per host on SageMaker, 1 stand-in here.
    assert answer["WorldSize"] == {"SageMaker": 16, "Twin": 2}
    assert "world size 2 here (2 x 1), 16 on SageMaker (2 x 8)" in printed


def test_network_isolation_leaves_no_s3_and_no_route_out(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    # model_dir=False: AWS's TF container would ask S3 for the model_dir bucket's region (aws/sagemaker-python-sdk#2702)
    est = _estimator(aws, kit_image, entry_point="s3_probe.py", instance_type=CPU_TYPE, model_dir=False,
                     enable_network_isolation=True, hyperparameters={"mode": "isolated"})
    est.fit(wait=False, job_name="twin-fields-isolated")
    params = aws.requests[-1]
    # As the SDK sends it: the source as a 'code' channel, the toolkit pointed at its file.
    assert params["EnableNetworkIsolation"] is True
    assert [c["ChannelName"] for c in params["InputDataConfig"]] == ["code"]
    assert json.loads(params["HyperParameters"]["sagemaker_submit_directory"]) == \
        "/opt/ml/input/data/code/sourcedir.tar.gz"
    assert "model_dir" not in params["HyperParameters"]

    result, printed = _run(params, tmp_path / "out")

    assert result.status == "Completed", printed[-4000:]
    assert "EnableNetworkIsolation: no S3, no credentials and no route out" in printed
    probes = _probes(result)
    assert sorted(probes) == ["algo-1", "algo-2"]
    for probe in probes.values():
        assert (probe["credentials"], probe["endpoint"]) == (False, None), probe
        assert probe["way_out"].startswith(("no default route", "unreachable")), probe  # not even this machine
        assert probe["peer_resolves"], probe  # the hosts still reach one another
        assert probe["source"] == ["sourcedir.tar.gz"]
    assert "S3Writes" not in result.describe()["Twin"]
