"""``smddp matrix``: the cells (every one a job), the one-line reasons read from a job's output, the options,
and the ``--quick`` subset run for real (its Docker cell needs an engine: run under
``flock /tmp/smddp-docker-tests.lock``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.bench import matrix
from smddp_compat.bench.matrix import Cell
from tests.conftest import skip_or_fail_without_docker

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------------ the cells


def test_every_cell_is_a_job_and_the_tensorflow_strategies_run_under_smddprun_too() -> None:
    cells = matrix.all_cells()
    assert len(cells) == len(matrix.STRATEGIES) * len(matrix.KERAS) * len(matrix.LAUNCHERS) == 84
    ctx = matrix.RunContext(work=Path("/nonexistent"), job_timeout=60)
    argv, env = matrix._argv_and_env(Cell("parameter_server", "keras3", "smddprun"), Path("/nonexistent"), ctx)
    assert argv[argv.index("-np") + 1:argv.index("-np") + 4] == ["2", "--parameter-servers", "1"]
    assert env["TF_USE_LEGACY_KERAS"] == "0"
    _, env = matrix._argv_and_env(Cell("dtensor", "tf-keras", "smddprun"), Path("/nonexistent"), ctx)
    assert env["SMDDP_DTENSOR_DEVICES_PER_CLIENT"] == "2" and env["TF_USE_LEGACY_KERAS"] == "1"
    assert Cell("mwms", "keras3", "local").program.name == "keras_mwms.py"  # the entry point, on Keras 3


# -------------------------------------------------------------------------------------------- reading a job's log


def test_failure_line_prefers_the_kits_one_line_reason() -> None:
    log = "\n".join([
        "[algo-1,0] Traceback (most recent call last):",
        "[algo-1,0] ValueError: Attempt to convert a value (PerReplica:{...}) with an unsupported type",
        "[algo-1,0] smddp-compat: Keras 3 cannot fit under MultiWorkerMirroredStrategy with 2 workers (a Keras limit)",
        "ExecuteUserScriptError:",
    ])
    assert matrix.failure_line(log).startswith("Keras 3 cannot fit under MultiWorkerMirroredStrategy")
    raised = "[algo-2,1] NotImplementedError: smddp-compat: Keras 3 cannot fit (a Keras limit)\n[algo-2,1] \n"
    assert matrix.failure_line(raised) == "Keras 3 cannot fit (a Keras limit)"


def test_failure_line_takes_the_scripts_last_exception_not_the_wrappers() -> None:
    log = "\n".join([
        "[1,mpirank:0,algo-1]<stderr>:Traceback (most recent call last):",
        "[1,mpirank:0,algo-1]<stderr>:AttributeError: 'Variable' object has no attribute 'ref'",
        "[algo-1] 2026-11-24 18:49:22,720 sagemaker-training-toolkit ERROR    ExecuteUserScriptError:",
        "matrix: the SDK's local mode job failed: UnexpectedStatusException: Error for Training job x: Failed.",
    ])
    assert matrix.failure_line(log) == "AttributeError: 'Variable' object has no attribute 'ref'"
    assert matrix.failure_line("all good\n") == ""


def test_failure_line_reads_docker_composes_coloured_lines() -> None:
    log = "\n".join([
        "[sdk3-container] \x1b[36malgo-1_1  |\x1b[0m ValueError: Attempt to convert a value (PerReplica:{...})",
        "[sdk3-container] \x1b[33malgo-2_1  |\x1b[0m [1,1]<stderr>:KeyError: 'weights'",
        "[sdk3-container] matrix: the SDK's local container job failed: RuntimeError: Failed to run: [...]",
    ])
    assert matrix.failure_line(log) == "KeyError: 'weights'"
    kit = "[sdk3-container] \x1b[36malgo-1_1  |\x1b[0m smddp-compat: Keras 3 cannot fit (a Keras limit)"
    assert matrix.failure_line(kit) == "Keras 3 cannot fit (a Keras limit)"


def test_accuracy_is_the_last_reported_value() -> None:
    assert matrix.accuracy_of("[algo-1,0] test_accuracy=0.5;\nstep=30; test_accuracy=0.9180; x") == 0.918
    assert matrix.accuracy_of("no metric here") is None


# ---------------------------------------------------------------------------------------------------- the options


def test_help_lists_exit_codes_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert matrix.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "exit codes:" in text and "examples:" in text and "smddp matrix --quick" in text


@pytest.mark.parametrize("argv", [["--only", "nonsense"], ["--job-timeout", "0"], ["--docker-jobs", "0"],
                                  ["--quick", "--only", "dtensor"], ["--bogus"]])
def test_bad_options_exit_2_naming_the_value(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert matrix.main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip()
    if argv[0] == "--only" and argv[1] == "nonsense":
        assert "nonsense" in err and "mwms" in err


def test_only_filters_by_every_kind_given() -> None:
    import argparse

    args = argparse.Namespace(quick=False, only="mwms,keras3,local,twin")
    cells, partial = matrix._select(args)  # noqa: SLF001 - the selection rule itself
    assert {(c.strategy, c.keras, c.launcher) for c in cells} == {("mwms", "keras3", "local"),
                                                                  ("mwms", "keras3", "twin")}
    assert "only" in partial


def test_markdown_grid_numbers_each_reason_once() -> None:
    results = [
        matrix.CellResult(Cell("mwms", "keras3", "local"), "does not", "Keras 3 cannot fit", "use tf-keras",
                          seconds=6.0),
        matrix.CellResult(Cell("mwms", "keras3", "twin"), "does not", "Keras 3 cannot fit", "use tf-keras",
                          seconds=60.0),
        matrix.CellResult(Cell("mwms", "tf-keras", "local"), "works", seconds=12.0, accuracy=0.9),
    ]
    header = {"date": "d", "commit": "c", "command": "smddp matrix", "total_seconds": 80, "cores": 2, "ran": 3}
    text = matrix.render_markdown(results, header)
    assert text.count("1. Keras 3 cannot fit. **Fix:** use tf-keras") == 1
    assert "❌ does not [1], 6 s" in text and "❌ does not [1], 60 s" in text and "✅ works (0.90, 12 s)" in text


# ------------------------------------------------------------------------------------------- the quick subset, real


def _docker_or_skip() -> None:
    from smddp_compat.image import DockerUnavailableError, find_engine

    try:
        find_engine()
    except DockerUnavailableError as exc:
        skip_or_fail_without_docker(exc)


@pytest.mark.e2e  # Docker (its twin cell) without the docker_engine fixture
@pytest.mark.usefixtures("cores_to_itself")
@pytest.mark.timeout(600)  # 2 real jobs, one in Docker: ~1 min idle, longer under load
def test_quick_matrix_runs_its_smddprun_and_docker_cells_and_writes_the_report(tmp_path: Path) -> None:
    """The --quick cells the README's matrix block does not run: the smddprun and the Docker launcher's (that block,
    tests/test_docs.py README.md's `smddp matrix --quick --only mwms,local`, runs the local-mode cells, Keras 3 and
    tf-keras under 2-worker MWMS, and expects both to work); each cell works, the report and its JSON are written."""
    _docker_or_skip()
    out = tmp_path / "matrix.md"
    done = subprocess.run([sys.executable, "-m", "smddp_compat.bench.matrix", "--quick", "--only",
                           "smddprun,local-docker", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=580)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wanted = {cell for cell in matrix.QUICK if cell[2] in ("smddprun", "local-docker")}
    assert f"[{len(wanted)}/{len(wanted)}]" in done.stdout and "min left" in done.stdout
    text = out.read_text()
    assert "Total run time:" in text and "Commit:" in text and "smddp matrix --quick" in text
    report = json.loads(out.with_suffix(".json").read_text())
    cells = {(c["strategy"], c["keras"], c["launcher"]): c for c in report["cells"]}
    assert set(cells) == wanted and {launcher for _, _, launcher in cells} == {"smddprun", "local-docker"}
    for cell in cells.values():
        assert cell["result"] == "works" and cell["accuracy"] >= matrix.SANE_ACCURACY, cell
        assert cell["seconds"] > 0 and not cell["contradicts"], cell
    assert report["total_seconds"] > 0


def test_the_readme_block_runs_the_quick_local_cells_the_smoke_leaves_out() -> None:
    """What the smoke above leaves to README.md's matrix block: its shortened command selects the quick subset's
    local-mode cells (Keras 3 and tf-keras under 2-worker MWMS) and expects every one to work."""
    import argparse

    readme = (REPO / "README.md").read_text()
    assert ('replace "smddp matrix --quick" "smddp matrix --quick --only mwms,local --out matrix.md" ; '
            'expect "2 works, 0 does not"') in readme
    cells, _ = matrix._select(argparse.Namespace(quick=True, only="mwms,local"))  # noqa: SLF001 - the block's cells
    assert {(c.strategy, c.keras, c.launcher) for c in cells} == {("mwms", "keras3", "local"),
                                                                  ("mwms", "tf-keras", "local")}
    assert {cell for cell in matrix.QUICK if cell[2] not in ("smddprun", "local-docker")} == {
        (c.strategy, c.keras, c.launcher) for c in cells}
