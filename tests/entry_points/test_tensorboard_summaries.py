"""TensorBoard summaries of the entry points: where they go (the rule SageMaker's containers follow) and what the one
writer records. The end-to-end runs are in tests/local_mode/test_tensorboard_job.py and test_smddp_mnist.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smddp_compat import contract
from smddp_compat.entry_points.common.errors import EntryPointError
from smddp_compat.entry_points.common.training_env import TrainingEnv, resolve_tensorboard_dir
from tests.entry_points.script_runs import read_scalars


def _sagemaker_environ(tmp_path: Path, config: object | None) -> dict[str, str]:
    """A container's variables for the rule; `config` is the content of tensorboardoutputconfig.json (None: absent)."""
    config_file = tmp_path / "tensorboardoutputconfig.json"
    if isinstance(config, str):
        config_file.write_text(config, encoding="utf-8")
    elif config is not None:
        config_file.write_text(json.dumps(config), encoding="utf-8")
    return {"SM_MODEL_DIR": "/opt/ml/model", "SM_OUTPUT_DIR": "/opt/ml/output",
            contract.TENSORBOARD_CONFIG_FILE_PATH: str(config_file)}


def test_tensorboard_dir_follows_the_jobs_tensorboard_output_config(tmp_path: Path) -> None:
    # No TensorBoardOutputConfig: <SM_OUTPUT_DIR>/tensorboard, which on SageMaker is the API's default LocalPath.
    plain = TrainingEnv.from_environ(_sagemaker_environ(tmp_path, None))
    assert plain.tensorboard_dir == Path(contract.DEFAULT_TENSORBOARD_DIR) == Path("/opt/ml/output/tensorboard")
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    documented = model.shape_for("TensorBoardOutputConfig").members["LocalPath"].documentation
    assert f"Defaults to <code>{contract.DEFAULT_TENSORBOARD_DIR}</code>" in documented
    # The job's TensorBoardOutputConfig, as the container reads it (as AWS's SageMaker Debugger does).
    configured = TrainingEnv.from_environ(_sagemaker_environ(tmp_path, {"LocalPath": "/opt/ml/output/tb"}))
    assert configured.tensorboard_dir == Path("/opt/ml/output/tb")
    assert TrainingEnv.from_environ(_sagemaker_environ(tmp_path, {})).tensorboard_dir == Path(
        contract.DEFAULT_TENSORBOARD_DIR)
    # --tensorboard-dir wins over both; an empty one counts as not given.
    assert TrainingEnv.from_environ(_sagemaker_environ(tmp_path, {"LocalPath": "/x"}),
                                    tensorboard_dir=tmp_path / "tb").tensorboard_dir == tmp_path / "tb"
    no_config = {contract.TENSORBOARD_CONFIG_FILE_PATH: str(tmp_path / "absent.json")}
    assert resolve_tensorboard_dir(no_config, "/o", "") == Path("/o/tensorboard")
    # A plain `python script.py` run: under the local output folder.
    local = TrainingEnv.from_environ({"SMDDP_LOCAL_ROOT": str(tmp_path / "local"), **no_config})
    assert local.tensorboard_dir == local.output_dir / "tensorboard"


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "cannot read the TensorBoard configuration"),
    (["/opt/ml/output/tb"], 'not {"LocalPath": "<folder>"}'),
    ({"LocalPath": 7}, 'not {"LocalPath": "<folder>"}'),
])
def test_a_malformed_tensorboard_config_names_the_file_and_the_fix(tmp_path: Path, content: object,
                                                                   message: str) -> None:
    with pytest.raises(EntryPointError, match="tensorboardoutputconfig.json") as raised:
        TrainingEnv.from_environ(_sagemaker_environ(tmp_path, content))
    assert message in str(raised.value) and "--tensorboard-dir" in str(raised.value)


def test_the_writer_records_the_four_training_scalars_and_only_where_enabled(tmp_path: Path) -> None:
    import time

    from smddp_compat.entry_points.common.tensorboard_summaries import TEST_TAGS, TRAIN_TAGS, TrainingSummaries

    with TrainingSummaries(None, learning_rate=lambda: pytest.fail("a disabled writer reads nothing")) as off:
        off.start(0)
        off.log_step(10, loss=1.0, accuracy=0.5)
        off.log_evaluation(10, loss=1.0, accuracy=0.5)
        assert not off.enabled
    rates = iter([0.002, 0.001])
    with TrainingSummaries(tmp_path / "tb", learning_rate=lambda: next(rates)) as summaries:
        summaries.start(100)
        time.sleep(0.2)
        summaries.log_step(110, loss=2.0, accuracy=0.25)
        time.sleep(0.3)  # an evaluation
        summaries.log_evaluation(110, loss=1.5, accuracy=0.5)
        summaries.log_evaluation(110, loss=1.5, accuracy=0.5)  # a final evaluation at the same step
        summaries.log_step(120, loss=1.0, accuracy=0.75)
    assert not summaries.enabled  # closed
    scalars = read_scalars(tmp_path / "tb")
    assert set(scalars) == {*TRAIN_TAGS, *TEST_TAGS}
    assert scalars["train/loss"] == [(110, 2.0), (120, 1.0)]
    assert scalars["train/accuracy"] == [(110, 0.25), (120, 0.75)]
    assert [step for step, _ in scalars["train/learning_rate"]] == [110, 120]
    assert scalars["train/learning_rate"][0][1] == pytest.approx(0.002)
    assert scalars["test/loss"] == [(110, 1.5)] and scalars["test/accuracy"] == [(110, 0.5)]
    # Seconds per step since start(100): 10 steps in >= 0.2 s; the evaluation's 0.3 s do not count for the next 10.
    first, second = (value for _, value in scalars["train/step_seconds"])
    assert 0.02 <= first < 1.0 and 0 < second < 0.01
    assert len(list((tmp_path / "tb").iterdir())) == 1
