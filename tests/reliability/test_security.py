"""Security: no shell anywhere (a source scan), shell metacharacters in user input pass literally, and AWS
credentials never reach a job's files, logs or artifacts.

(The estimators' uploaded source tarball is checked for secrets in tests/estimators/test_submit_v2.py, and
local_mode's code copy and config files of a successful job in tests/local_mode/test_reliability.py.)
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.reliability.conftest import PROGRAMS, REPO, quiet_env, smddp, smddprun

# -- no shell -------------------------------------------------------------------------------------------------------

_SKIPPED_DIRS = {".git", "build", "dist", "__pycache__", "node_modules", "smddp_local_output"}
_SUBPROCESS_FUNCTIONS = {"run", "call", "check_call", "check_output", "Popen"}
_ALWAYS_SHELL = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"),
                 ("asyncio", "create_subprocess_shell")}


def _sources() -> tuple[list[Path], list[Path]]:
    """The repository's Python files and shell scripts (virtual environments and build output left out)."""
    python, shell = [], []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(".venv")
                   and not d.endswith(".egg-info") and (not d.startswith(".") or d == ".ci")]
        for name in files:
            path = Path(folder) / name
            if name.endswith(".py"):
                python.append(path)
            elif name.endswith(".sh") or (path.is_file() and _shebang(path).endswith(("sh", "bash"))):
                shell.append(path)
    return python, shell


def _shebang(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return ""
    return first.decode("utf-8", "replace").strip() if first.startswith(b"#!") else ""


def _display(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _is_string_command(node: ast.expr) -> bool:
    """A command given as one string (literal, f-string, concatenation or %-format) rather than a list."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_string_command(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
    return False


def shell_uses(path: Path) -> list[str]:
    """Every call in a Python file that runs a shell or passes a command as a string."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        where = f"{_display(path)}:{node.lineno}"
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
                found.append(f"{where}: shell={ast.unparse(keyword.value)}")
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if (func.value.id, func.attr) in _ALWAYS_SHELL:
                found.append(f"{where}: {func.value.id}.{func.attr}()")
            elif func.value.id == "subprocess" and func.attr in _SUBPROCESS_FUNCTIONS:
                command = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "args"), None)
                if command is not None and _is_string_command(command):
                    found.append(f"{where}: subprocess.{func.attr}({ast.unparse(command)[:60]}) with a string command")
        elif isinstance(func, ast.Name) and func.id in ("system", "popen", "getoutput", "getstatusoutput"):
            found.append(f"{where}: {func.id}() (imported from os/subprocess?)")
    return found


def shell_script_evals(path: Path) -> list[str]:
    """Lines of a shell script that re-parse text as shell code (eval, sh -c with an expansion)."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        words = code.replace(";", " ").split()
        if "eval" in words or (("sh" in words or "bash" in words) and "-c" in words and "$" in code):
            found.append(f"{_display(path)}:{number}: {line.strip()}")
        for pattern in ("shell=True", "os.system(", "os.popen("):
            if pattern in code:
                found.append(f"{_display(path)}:{number}: {pattern}")
    return found


def test_the_scanner_finds_each_kind_of_shell_use(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, subprocess\n"
        "subprocess.run('ls ' + name)\n"
        "subprocess.Popen(f'touch {x}')\n"
        "subprocess.check_output(['ls'], shell=True)\n"
        "os.system('ls')\n"
        "os.popen(cmd)\n"
        "subprocess.run(['ls', name], shell=False)\n"
        "subprocess.run(argv)\n"
    )
    assert [f.split(": ", 1)[0].rsplit(":", 1)[1] for f in shell_uses(sample)] == ["2", "3", "4", "5", "6"]
    script = tmp_path / "x.sh"
    script.write_text('#!/bin/sh\necho "$(date)"\neval "$CMD"\nsh -c "run $ARG"\nexec "$@"\n'
                      'python -c "import os; os.system(1)"\n')
    assert [f.split(": ", 1)[0].rsplit(":", 1)[1] for f in shell_script_evals(script)] == ["3", "4", "6"]


def test_no_shell_and_no_string_commands_in_the_repository() -> None:
    python, shell = _sources()
    assert len(python) > 50 and any(p.name == "setup.sh" for p in shell), (len(python), shell)
    found = [use for path in python for use in shell_uses(path)]
    found += [use for path in shell for use in shell_script_evals(path)]
    assert found == [], "\n".join(found)


# -- metacharacters pass literally ----------------------------------------------------------------------------------

@pytest.mark.processes
def test_smddp_local_passes_hyperparameters_with_metacharacters_literally(tmp_path: Path) -> None:
    marks = {name: tmp_path / name for name in ("pwned-subst", "pwned-semicolon", "pwned-backtick", "pwned-env")}
    values = {
        "command": f"$(touch {marks['pwned-subst']})",
        "chain": f"; touch {marks['pwned-semicolon']}",
        "tick": f"`touch {marks['pwned-backtick']}`",
        "quote": "it's \"quoted\" | cat > /dev/null &",
    }
    args = ["local", "record_args.py", "--source-dir", str(PROGRAMS), "--distribution", "smddp", "--instance-count",
            "2", "--output", str(tmp_path / "out"), "--job-name", "metachars", "--work-dir", str(tmp_path / "work"),
            "--env", f"NOTE=$(touch {marks['pwned-env']})", "--model-dir", "none", "--hyperparameters"]
    args += [f"{name}={value}" for name, value in values.items()]
    proc = subprocess.run(smddp(*args), env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in ("0", "1"):
        host = f"algo-{int(rank) + 1}"
        recorded = json.loads((tmp_path / "work" / "metachars" / host / "output" / "data" / f"args-{rank}.json")
                              .read_text())
        argv = recorded["argv"]
        assert dict(zip(argv[::2], argv[1::2])) == {f"--{name}": value for name, value in values.items()}
        assert {k: v for k, v in recorded["hps"].items() if k in values} == values
        stored = json.loads((tmp_path / "work" / "metachars" / host / "input" / "config" / "hyperparameters.json")
                            .read_text())
        assert {k: json.loads(v) for k, v in stored.items() if k in values} == values
    assert [m.name for m in marks.values() if m.exists()] == []


@pytest.mark.processes
def test_smddprun_passes_arguments_with_metacharacters_literally(tmp_path: Path) -> None:
    marks = [tmp_path / "pwned-a", tmp_path / "pwned-b", tmp_path / "pwned-c"]
    hostile = [f"; touch {marks[0]}", f"$(touch {marks[1]})", f"`touch {marks[2]}` && echo done", "*", "$HOME"]
    code = "import json, sys; print('ARGS ' + json.dumps(sys.argv[1:]))"
    proc = subprocess.run(smddprun("-np", "2", "--stall-check-seconds", "5", sys.executable, "-c", code, *hostile),
                          env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = [json.loads(line.split(" ARGS ", 1)[1]) for line in proc.stdout.splitlines() if " ARGS " in line]
    assert seen == [hostile, hostile]
    assert [m.name for m in marks if m.exists()] == []


@pytest.mark.processes
def test_custom_mpi_options_reach_local_process_literally_and_are_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """``smddp submit --instance-type local_process`` runs the job here through local_mode, whose ranks start over
    Gloo: the options reach the estimator's local_process path, which reports them, literally, as not applying."""
    pytest.importorskip("sagemaker.tensorflow", reason="smddp submit needs the SageMaker SDK v2")
    from smddp_compat.commands.cli import main

    mark = tmp_path / "pwned"
    options = f"; touch {mark} $(touch {mark}) `touch {mark}`"
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING", logger="smddp_compat.estimators._local_process"):
        code = main(["submit", str(PROGRAMS / "record_args.py"), "--instance-type", "local_process",
                     "--instance-count", "2", "--distribution", "smddp", "--custom-mpi-options", options,
                     "--output", str(tmp_path / "out"), "--job-name", "mpi-options", "--hyperparameters", "x=1"])
    assert code == 0, capsys.readouterr()
    ignored = [r.getMessage() for r in caplog.records if "are ignored by instance_type='local_process'" in
               r.getMessage()]
    assert ignored == [f"custom_mpi_options {options!r} are ignored by instance_type='local_process' (ranks start "
                       "over Gloo, or as the kit's own mpirun group on one host, without the job's mpirun options)"], \
        caplog.text
    assert not mark.exists()
    assert (tmp_path / "out" / "mpi-options" / "output" / "model.tar.gz").is_file()


# -- credentials never leak -----------------------------------------------------------------------------------------

SECRET = "smddpReliabilitySecretKey0123456789MustNotLeak"
ACCESS_KEY = "AKIASMDDPRELIABILITY"


def _texts_under(folder: Path) -> dict[str, bytes]:
    """Every file's bytes under ``folder``, and every member of every tarball, by name."""
    texts: dict[str, bytes] = {}
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        texts[str(path)] = data
        if path.name.endswith(".tar.gz"):
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        texts[f"{path}!{member.name}"] = extracted.read() if extracted else b""
    return texts


@pytest.mark.processes
def test_aws_credentials_never_reach_files_logs_failure_files_or_artifacts(tmp_path: Path) -> None:
    env = quiet_env(AWS_SECRET_ACCESS_KEY=SECRET, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SESSION_TOKEN=SECRET + "token")
    proc = subprocess.run(
        smddp("local", "record_args.py", "--source-dir", str(PROGRAMS), "--distribution", "smddp", "--instance-count",
              "2", "--output", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"), "--job-name", "creds",
              "--hyperparameters", "fail-rank=1", "lr=0.1"),
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # rank 1 failed on purpose
    assert "RuntimeError: rank 1 fails on purpose" in proc.stdout + proc.stderr
    texts = _texts_under(tmp_path)
    names = {Path(name.split("!")[0]).name for name in texts}
    assert {"resourceconfig.json", "hyperparameters.json", "failure", "algo-1.log", "output.tar.gz"} <= names, names
    for name, data in texts.items():
        assert SECRET.encode() not in data and ACCESS_KEY.encode() not in data, name
    assert SECRET not in proc.stdout + proc.stderr and ACCESS_KEY not in proc.stdout + proc.stderr
