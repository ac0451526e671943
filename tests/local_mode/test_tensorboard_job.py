"""TensorBoard in the process backend: each host's tensorboardoutputconfig.json points at its tree's
output/tensorboard (where SageMaker's LocalPath would be), the first host's folder is kept as
<output>/<job>/tensorboard/ for ``tensorboard --logdir`` whatever the job's end, and a short smddp_mnist.py job on 2
hosts writes its summaries there from rank 0 only; a script with ``tf.keras.callbacks.TensorBoard`` in ``fit`` (which needs
the ``tensorboard`` package the kit installs) leaves its event files there, on Keras 3 and on tf-keras."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from smddp_compat import contract
from smddp_compat.local_mode import JobSpec, run
from tests.entry_points.script_runs import SCRIPTS, read_scalars

pytestmark = pytest.mark.processes

# Each host writes a file where its configuration says; algo-1 also a link out of the folder, then, once algo-2 has
# written its own, fails the job.
_SCRIPT = """#!/bin/sh
folder=$(python3 -c 'import json, os; print(json.load(open(os.environ["TENSORBOARD_CONFIG_FILE_PATH"]))["LocalPath"])')
mkdir -p "$folder/run"
echo "$SM_CURRENT_HOST" > "$folder/run/events-$SM_CURRENT_HOST"
[ "$SM_CURRENT_HOST" = algo-2 ] && exit 0
ln -s /etc/hostname "$folder/leak"
for _ in $(seq 100); do [ -f "$SAGEMAKER_BASE_DIR/../algo-2/output/tensorboard/run/events-algo-2" ] && break; sleep 0.1; done
exit 3
"""


def _failing_job(tmp_path: Path, output: str) -> tuple[str, str]:
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.sh").write_text(_SCRIPT)
    stream = io.StringIO()
    result = run(JobSpec(entry_point="train.sh", source_dir=str(source), instance_count=2, output_path=output,
                         job_name="tb-fails", max_run=60), stream=stream)
    return result.status, stream.getvalue()


def test_the_first_hosts_folder_is_kept_beside_the_logs_even_when_the_job_fails(
    tmp_path: Path, no_leftover_job_dirs: None
) -> None:
    status, printed = _failing_job(tmp_path, str(tmp_path / "out"))
    assert status == "Failed", printed
    kept = tmp_path / "out" / "tb-fails" / "tensorboard"
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*")) == ["run", "run/events-algo-1"]
    assert (kept / "run" / "events-algo-1").read_text() == "algo-1\n"  # not algo-2's, and no link followed
    assert f"  tensorboard: {kept}; view: tensorboard --logdir {kept}" in printed, printed


def test_the_folder_of_a_job_with_an_s3_output_is_uploaded_beside_its_logs(
    tmp_path: Path, moto_s3: str, no_leftover_job_dirs: None
) -> None:
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="jobs")
    status, printed = _failing_job(tmp_path, "s3://jobs/runs")
    assert status == "Failed", printed
    listed = s3.list_objects_v2(Bucket="jobs", Prefix="runs/tb-fails/tensorboard/")
    assert [item["Key"] for item in listed["Contents"]] == ["runs/tb-fails/tensorboard/run/events-algo-1"]
    assert "  tensorboard: s3://jobs/runs/tb-fails/tensorboard\n" in printed, printed


def test_smddp_mnist_job_keeps_the_summaries_rank_0_wrote(tmp_path: Path, no_leftover_job_dirs: None) -> None:
    from smddp_compat.entry_points.common.tensorboard_summaries import TRAIN_TAGS

    spec = JobSpec(entry_point=str(SCRIPTS / "smddp_mnist.py"), instance_count=2, distribution="smddp",
                   hyperparameters={"max-steps": 12, "log-steps": 4, "save-model": "false"},
                   output_path=str(tmp_path / "out"), job_name="tb", work_dir=str(tmp_path / "work"), max_run=300)
    stream = io.StringIO()
    result = run(spec, stream=stream)
    printed = stream.getvalue()
    assert result.ok, printed[-4000:]

    kept = tmp_path / "out" / "tb" / "tensorboard"
    assert f"  tensorboard: {kept}; view: tensorboard --logdir {kept}" in printed, printed[-2000:]
    # One event file: one writer, rank 0 (a second rank writing would add its own file, named by its pid).
    (events,) = kept.glob("events.out.tfevents.*")
    scalars = read_scalars(kept)
    for tag in TRAIN_TAGS:  # loss, accuracy, learning rate, seconds per step, at every logged step
        assert [step for step, _ in scalars[tag]] == [4, 8, 12], (tag, scalars[tag])
    assert all(value == pytest.approx(0.001 * 2) for _, value in scalars["train/learning_rate"])  # x size()
    assert all(value > 0 for _, value in scalars["train/step_seconds"])
    assert [step for step, _ in scalars["test/accuracy"]][-1] == 12

    hosts = tmp_path / "work" / "tb"
    for host in ("algo-1", "algo-2"):  # where each host's scripts read TensorBoardOutputConfig.LocalPath
        config = json.loads((hosts / host / contract.TENSORBOARD_CONFIG_FILE).read_text())
        assert config == {"LocalPath": str(hosts / host / contract.TENSORBOARD_DIR)}
    assert [p.name for p in (hosts / "algo-1" / contract.TENSORBOARD_DIR).iterdir()] == [events.name]
    assert not (hosts / "algo-2" / contract.TENSORBOARD_DIR).exists()  # rank 1 wrote nothing


@pytest.mark.parametrize("legacy, keras_module", [("0", "keras."), ("1", "tf_keras.")], ids=["keras3", "tf-keras"])
def test_the_keras_tensorboard_callback_writes_its_events_in_the_jobs_folder(
    tmp_path: Path, no_leftover_job_dirs: None, legacy: str, keras_module: str
) -> None:
    spec = JobSpec(entry_point=str(Path(__file__).parent / "scripts" / "keras_fit_per_host.py"),
                   hyperparameters={"epochs": 2, "tensorboard": "true"}, environment={"TF_USE_LEGACY_KERAS": legacy},
                   output_path=str(tmp_path / "out"), job_name="tb-callback", max_run=300)
    stream = io.StringIO()
    result = run(spec, stream=stream)
    printed = stream.getvalue()
    assert result.ok, printed[-4000:]
    assert f"keras={keras_module}" in printed, printed[-2000:]  # the flavour asked for
    kept = tmp_path / "out" / "tb-callback" / "tensorboard"
    events = sorted(kept.glob("train/events.out.tfevents.*"))
    assert events, sorted(str(p.relative_to(kept)) for p in kept.rglob("*"))
    import tensorflow as tf

    tags = [(value.tag, event.step) for path in events for event in tf.compat.v1.train.summary_iterator(str(path))
            for value in event.summary.value]
    assert [step for tag, step in tags if tag == "epoch_loss"] == [0, 1], tags  # the callback's scalar, per epoch
