"""smddp_compat.contract: the SageMaker names in one place, standard library only, and the one failure-file writer."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from smddp_compat import contract

REPO = Path(__file__).resolve().parents[2]
_KIT_FOLDERS = ("smddp_compat", "local_mode", "estimators", "entry_points", "bench")


def _run(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.processes
def test_the_stdlib_modules_import_without_any_third_party_package() -> None:
    done = _run(
        """
        import sys
        before = set(sys.modules)
        import smddp_compat.contract, smddp_compat.source_files
        loaded = {name.split(".")[0] for name in set(sys.modules) - before}
        print(sorted(loaded - set(sys.stdlib_module_names) - {"smddp_compat"}))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_paths_and_variables_follow_sagemakers_tree() -> None:
    opt_ml = Path(contract.OPT_ML)
    assert opt_ml / contract.HYPERPARAMETERS_FILE == Path("/opt/ml/input/config/hyperparameters.json")
    assert opt_ml / contract.RESOURCE_CONFIG_FILE == Path("/opt/ml/input/config/resourceconfig.json")
    assert opt_ml / contract.INPUT_DATA_CONFIG_FILE == Path("/opt/ml/input/config/inputdataconfig.json")
    assert opt_ml / contract.FAILURE_FILE == Path("/opt/ml/output/failure")
    assert contract.DEFAULT_CHECKPOINT_DIR == "/opt/ml/checkpoints"
    assert contract.failure_file("/x/output") == Path("/x/output/failure")
    assert contract.sm_variable("channel_train") == "SM_CHANNEL_TRAIN" == contract.SM_CHANNEL_PREFIX + "TRAIN"
    assert contract.sm_variable("output_dir") == contract.SM_OUTPUT_DIR
    assert all(name.startswith(contract.SAGEMAKER_PREFIX) for name in contract.DISTRIBUTION_FLAGS)
    assert contract.PROGRAM in contract.TOOLKIT_PARAMETERS and contract.SMDDP_ENABLED not in contract.TOOLKIT_PARAMETERS


def test_local_host_tree_uses_the_contract_names(tmp_path: Path) -> None:
    from smddp_compat.local_mode.layout import HostLayout

    layout = HostLayout("algo-1", tmp_path)
    assert layout.hyperparameters_file == tmp_path / contract.HYPERPARAMETERS_FILE
    assert layout.failure_file == tmp_path / contract.FAILURE_FILE
    assert layout.checkpoints_dir == tmp_path / contract.CHECKPOINTS_DIR


def test_hyperparameter_encoding_refuses_what_sagemaker_refuses() -> None:
    assert contract.encode_hyperparameter("lr", 0.5) == "0.5"
    with pytest.raises(contract.ConfigurationError, match=r"hyperparameters\['lr'\]=nan: is not JSON-serialisable"):
        contract.encode_hyperparameter("lr", float("nan"))
    with pytest.raises(contract.ConfigurationError, match="longer than SageMaker's limit of 2500 characters"):
        contract.encode_hyperparameter("text", "x" * 2500)


def test_failure_file_is_written_whole_with_a_final_newline(tmp_path: Path) -> None:
    path = contract.write_failure_file(tmp_path / "output", "ValueError: bad")
    assert path == tmp_path / "output" / "failure" and path.read_text() == "ValueError: bad\n"
    contract.write_failure_file(tmp_path / "output", "second\n")
    assert path.read_text() == "second\n"
    assert sorted(p.name for p in (tmp_path / "output").iterdir()) == ["failure"]  # no temporary file left


def test_failure_file_content_is_flushed_to_disk_before_the_rename(tmp_path: Path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = contract.os.fsync, contract.os.replace
    monkeypatch.setattr(contract.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(contract.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    contract.write_failure_file(tmp_path, "reason")
    assert events == ["fsync", "replace"]


@pytest.mark.processes
def test_a_crash_before_the_rename_leaves_the_previous_failure_file(tmp_path: Path) -> None:
    contract.write_failure_file(tmp_path, "the first reason")
    done = _run(
        f"""
        import os
        from smddp_compat import contract
        os.replace = lambda *args: os._exit(9)   # the process dies between writing and renaming
        contract.write_failure_file({str(tmp_path)!r}, "the second reason")
        """
    )
    assert done.returncode == 9, done.stderr
    assert (tmp_path / "failure").read_text() == "the first reason\n"


def test_a_reader_never_sees_a_partial_failure_file(tmp_path: Path) -> None:
    texts = ["A" * 300_000, "B" * 200_000]
    contract.write_failure_file(tmp_path, texts[0])
    seen: set[int] = set()
    partial: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            content = (tmp_path / "failure").read_text()
            if content in (texts[0] + "\n", texts[1] + "\n"):
                seen.add(len(content))
            else:
                partial.append(len(content))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for index in range(200):
            contract.write_failure_file(tmp_path, texts[index % 2])
    finally:
        stop.set()
        reader.join(timeout=30)
    assert not reader.is_alive()
    assert partial == []
    assert len(seen) == 2  # both versions were read, never anything else


def test_failure_reason_is_cut_to_sagemakers_limit(tmp_path: Path) -> None:
    contract.write_failure_file(tmp_path, "x" * 5000)
    reason = contract.read_failure_reason(tmp_path / "failure")
    assert reason is not None and len(reason) == contract.FAILURE_REASON_LIMIT == 1024 and reason.endswith("...")
    assert contract.read_failure_reason(tmp_path / "missing") is None
    (tmp_path / "blank").write_text("  \n")
    assert contract.read_failure_reason(tmp_path / "blank") is None


def _kit_sources() -> list[Path]:
    return [path for folder in _KIT_FOLDERS for path in (REPO / folder).rglob("*.py")]


def test_only_the_contract_module_spells_the_failure_file() -> None:
    spelled = []
    for path in _kit_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("failure", "output/failure"):
                spelled.append(str(path.relative_to(REPO)))
    assert spelled == ["smddp_compat/contract.py"]


@pytest.mark.parametrize("module", ["entry_points/common/lifecycle.py", "smddp_compat/tensorflow/_stall.py"])
def test_every_writer_of_the_failure_file_calls_the_contract_writer(module: str) -> None:
    names = {
        node.attr if isinstance(node, ast.Attribute) else node.id
        for node in ast.walk(ast.parse((REPO / module).read_text(encoding="utf-8")))
        if isinstance(node, (ast.Attribute, ast.Name))
    }
    assert "write_failure_file" in names


def test_run_entry_point_writes_the_failure_through_the_contract(tmp_path: Path, monkeypatch) -> None:
    from smddp_compat.entry_points.common import lifecycle

    monkeypatch.setattr(lifecycle, "install_termination_handler", lambda: None)  # keep pytest's SIGTERM
    calls: list[tuple[Path, str]] = []
    real = contract.write_failure_file
    monkeypatch.setattr(contract, "write_failure_file", lambda folder, reason: (calls.append((folder, reason)),
                                                                               real(folder, reason))[1])

    def main() -> None:
        raise ValueError("the loss became NaN")

    with pytest.raises(SystemExit) as ended:
        lifecycle.run_entry_point(main, output_dir=tmp_path)
    assert ended.value.code == 1
    assert len(calls) == 1 and calls[0][0] == tmp_path
    assert (tmp_path / "failure").read_text().startswith("ValueError: the loss became NaN\n")


def test_a_launcher_in_the_scripts_place_names_the_users_script_as_the_toolkit_would() -> None:
    launcher = {"SM_USER_ENTRY_POINT": "smddp_compat_dtensor_launch.py", "SM_MODULE_NAME": "smddp_compat_dtensor_launch",
                "SM_TRAINING_ENV": '{"module_name":"smddp_compat_dtensor_launch","hosts":["algo-1"],'
                                   '"user_entry_point":"smddp_compat_dtensor_launch.py"}'}
    named = contract.naming_the_entry_point(launcher, "train.py")
    assert named["SM_USER_ENTRY_POINT"] == "train.py" and named["SM_MODULE_NAME"] == "train"
    assert json.loads(named["SM_TRAINING_ENV"]) == {"module_name": "train", "hosts": ["algo-1"],
                                                    "user_entry_point": "train.py"}
    assert contract.naming_the_entry_point({"SM_TRAINING_ENV": "not json"}, "run.sh") == {}
    assert contract.module_name("run.sh") == "run.sh"
