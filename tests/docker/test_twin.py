"""The SageMaker twin replays real requests: each request is built against moto (an estimator, the plain SDK v2, the
SDK v3 plug-ins) and captured as SageMaker would receive it, then run by the twin on 2 hosts in the kit's image,
started with ``train`` as SageMaker starts it. Every process must see the whole world, the weights must end
identical, and the artifacts must land in moto's S3."""

from __future__ import annotations

import io
import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from local_mode.docker import SageMakerTwin, TrainingJobRequest
from tests.fake_aws import ROLE, Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

SCRIPTS = Path(__file__).resolve().parent / "scripts"
ENTRY_POINTS = Path(__file__).resolve().parents[2] / "entry_points"
GPU_TYPE = "ml.p4d.24xlarge"
CPU_TYPE = "ml.c5.xlarge"


def _estimator(aws: Aws, image: str, **kwargs: Any) -> Any:
    from estimators import TensorFlow

    settings: dict[str, Any] = dict(
        entry_point="world_probe.py", source_dir=str(SCRIPTS), role=ROLE, instance_type=GPU_TYPE, instance_count=2,
        framework_version="2.21", py_version="py311", image_uri=image, sagemaker_session=aws.sagemaker_session(),
        disable_profiler=True, debugger_hook_config=False,
    )
    settings.update(kwargs)
    return TensorFlow(**settings)


def _replay(aws: Aws, **options: Any) -> tuple[Any, str]:
    """Replays the last captured request; returns the twin's result and everything it printed."""
    stream = io.StringIO()
    request = TrainingJobRequest.from_params(aws.requests[-1])
    result = SageMakerTwin(request, stream=stream, **options).run()
    return result, stream.getvalue()


def _worlds(aws: Aws, result: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """Every process's world record from output.tar.gz (algo-1's at the top, the others' under algo-N/)."""
    path = aws.download(result.output_artifacts, str(tmp_path / "output.tar.gz"))
    with tarfile.open(path) as archive:
        return [
            json.loads(archive.extractfile(member).read())  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile() and Path(member.name).name.startswith("world-")
        ]


def _assert_one_world(worlds: list[dict[str, Any]], size: int, per_host: int) -> None:
    assert sorted(w["rank"] for w in worlds) == list(range(size)), worlds
    assert {w["size"] for w in worlds} == {size}
    assert {w["allreduce_sum"] for w in worlds} == {float(size)}
    assert {w["local_size"] for w in worlds} == {per_host}
    assert sorted(w["host"] for w in worlds) == sorted(f"algo-{1 + i // per_host}" for i in range(size))
    first = worlds[0]["weights"]
    for world in worlds[1:]:
        assert world["weights"] == pytest.approx(first, abs=1e-6), "the ranks' weights differ after training"


def test_smdistributed_through_the_kits_estimator(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    est = _estimator(aws, kit_image, distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
                     hyperparameters={"kind": "smddp", "note": "a b; $(id)"})
    est.fit(wait=False, job_name="twin-smddp-kit")
    result, printed = _replay(aws, gpus_per_host=2)
    assert result.status == "Completed", printed[-4000:]
    assert "smddprun" in printed and "mpirun" in printed  # SageMaker's SMDDP launch: mpirun ... smddprun python ...
    worlds = _worlds(aws, result, tmp_path)
    _assert_one_world(worlds, size=4, per_host=2)
    assert {w["note"] for w in worlds} == {"a b; $(id)"}  # one argument, never run by a shell
    assert result.model_artifacts == f"{est.output_path.rstrip('/')}/twin-smddp-kit/output/model.tar.gz"
    with tarfile.open(aws.download(result.model_artifacts, str(tmp_path / "model.tar.gz"))) as archive:
        assert "weights.npy" in archive.getnames()
