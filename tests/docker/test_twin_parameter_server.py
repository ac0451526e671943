"""The estimator's ``parameter_server`` request, replayed by the twin on 2 hosts in the kit's image: SageMaker's
TensorFlow toolkit starts a parameter server on every host and runs the script with its own ``TF_CONFIG`` (the
master on algo-1, a worker on algo-2); the bundled entry point trains under TF 2.21's ParameterServerStrategy to its
held-out target, and its artifacts and metrics are the job's answer. SDK v3's plug-in (the kit's driver starting the
same layout, the entry point training through the servers) runs in SDK v3's own local mode in the same image
(test_sagemaker_local_mode.py); a script that never uses the servers, as AWS's ``parameter_server`` example trains:
the probe's parameter_server job in test_one_command.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest
from smddp_compat.local_mode.outcome import JobResult
from tests.fake_aws import ROLE, Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

ENTRY_POINTS = Path(__file__).resolve().parents[2] / "entry_points"
TARGET_ACCURACY = 0.90
METRICS = [{"Name": "test_accuracy", "Regex": r"test_accuracy=([0-9.]+);"}]


def _sdk2_request(aws: Aws, kit_image: str, source_dir: Path, entry_point: str, hyperparameters: dict[str, object],
                  job_name: str) -> TrainingJobRequest:
    """The request the kit's estimator sends for a 2-host parameter_server job."""
    from smddp_compat.estimators import TensorFlow

    est = TensorFlow(
        entry_point=entry_point, source_dir=str(source_dir), role=ROLE,
        instance_type="ml.c5.xlarge", instance_count=2, framework_version="2.21", py_version="py311",
        image_uri=kit_image, sagemaker_session=aws.sagemaker_session(), disable_profiler=True,
        debugger_hook_config=False, hyperparameters=hyperparameters, metric_definitions=METRICS,
        distribution={"parameter_server": {"enabled": True}},
    )
    est.fit(wait=False, job_name=job_name)
    request = TrainingJobRequest.from_params(aws.requests[-1])
    assert request.hyperparameters["sagemaker_parameter_server_enabled"] == "true"
    return request


def _replay(request: TrainingJobRequest) -> tuple[JobResult, str]:
    """The twin's run of the request, and what it printed; the job must have completed."""
    stream = io.StringIO()
    result = SageMakerTwin(request, stream=stream, job_name=request.job_name, output=request.output_path.uri).run()
    printed = stream.getvalue()
    assert result.status == "Completed", printed[-5000:]
    return result, printed


def test_the_estimators_parameter_server_request_trains_on_two_hosts(aws: Aws, kit_image: str,
                                                                      tmp_path: Path) -> None:
    request = _sdk2_request(aws, kit_image, ENTRY_POINTS, "parameter_server_mnist.py", {"epochs": 2}, "twin-ps")
    result, printed = _replay(request)
    # The toolkit's own launch: a parameter server per host, the master's script coordinating.
    assert "Launching parameter server process" in printed, printed[-5000:]
    assert "1 worker(s), 2 parameter server(s)" in printed
    final = {m["MetricName"]: m["Value"] for m in result.describe()["FinalMetricDataList"]}
    assert final["test_accuracy"] >= TARGET_ACCURACY, final
    model = aws.download(result.model_artifacts, str(tmp_path / "model.tar.gz"))
    with tarfile.open(model) as archive:
        assert any(name.endswith("saved_model.pb") for name in archive.getnames())

