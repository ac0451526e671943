"""Real collectives across hosts: each distribution's variables are enough for TensorFlow/Horovod to form the job.
(MultiWorkerMirroredStrategy's cluster across hosts: tests/test_keras3_strategies.py trains one.)

2 hosts x 1 process each (the machine has 2 cores); every run is bounded by max_run.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from smddp_compat.local_mode import JobSpec, run

pytestmark = pytest.mark.processes


def _results(tarball: str, prefix: str) -> list[dict[str, Any]]:
    with tarfile.open(tarball) as archive:
        found = []
        for member in archive.getmembers():
            if member.isfile() and Path(member.name).name.startswith(prefix):
                handle = archive.extractfile(member)
                assert handle is not None
                found.append(json.load(handle))
        return sorted(found, key=lambda r: json.dumps(r, sort_keys=True))


def _run(tmp_path: Path, scripts_dir: Path, **fields: Any):
    stream = io.StringIO()
    spec = JobSpec(source_dir=str(scripts_dir), instance_count=2, output_path=str(tmp_path / "out"), max_run=240, **fields)
    result = run(spec, stream=stream)
    assert result.ok, stream.getvalue()[-4000:]
    return result


def test_smddp_job_runs_an_unchanged_smdistributed_script(tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None) -> None:
    result = _run(tmp_path, scripts_dir, entry_point="allreduce.py", distribution="smddp", hyperparameters={"smddp-import": 1})
    records = _results(result.artifacts.output, "allreduce-")
    assert [(r["rank"], r["size"], r["local_rank"], r["local_size"], r["sum"]) for r in records] == [
        (0, 2, 0, 1, 3.0),
        (1, 2, 0, 1, 3.0),
    ]
    assert {r["module"] for r in records} == {"smdistributed.dataparallel.tensorflow"}


def test_dtensor_job_spans_a_mesh_over_both_clients(tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None) -> None:
    result = _run(tmp_path, scripts_dir, entry_point="dtensor_sum.py", distribution="dtensor", dtensor_mesh={"batch": 4})
    assert _results(result.artifacts.output, "dtensor-") == [
        {"client": 0, "clients": 2, "sum": 4.0},
        {"client": 1, "clients": 2, "sum": 4.0},
    ]
