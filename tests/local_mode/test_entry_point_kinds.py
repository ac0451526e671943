"""Entry points run as SageMaker's training toolkit runs them (issue 19, item 7).

The toolkit (``sagemaker_training/_entry_point_type.py`` and ``process.py``, ``ProcessRunner._create_command``):
an entry point ending in ``.sh`` (or in neither ``.sh`` nor ``.py``) is a command, made executable and run as
``./script args`` by ``/bin/sh -c`` (so its shebang chooses the interpreter, and ``sh`` reads a script without
one); a ``.py`` entry point runs as ``python -m <name without .py>`` when the code folder holds a ``setup.py``, else
as ``python script.py``.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from smddp_compat.local_mode import JobSpec, run
from smddp_compat.local_mode.layout import HostLayout
from smddp_compat.local_mode.runner import _argv


def _spec(source: Path, entry: str, tmp_path: Path, **extra: object) -> JobSpec:
    return JobSpec(entry_point=entry, source_dir=str(source), output_path=str(tmp_path / "out"), max_run=60,
                   **extra)  # type: ignore[arg-type]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    return folder


def test_the_commands_match_the_toolkits(tmp_path: Path, source: Path) -> None:
    (source / "bash.sh").write_text("#!/bin/bash\necho hi\n")
    (source / "plain.sh").write_text("echo hi\n")
    (source / "train.py").write_text("print('hi')\n")
    layout = HostLayout("algo-1", tmp_path / "algo-1")
    code = layout.code_dir
    code.mkdir(parents=True)
    for name in ("bash.sh", "plain.sh", "train.py"):
        (code / name).write_bytes((source / name).read_bytes())
    args = ["--note", "a b; $(id)"]
    assert _argv(_spec(source, "bash.sh", tmp_path), layout, args) == [str(code / "bash.sh"), *args]
    assert _argv(_spec(source, "plain.sh", tmp_path), layout, args) == ["/bin/sh", str(code / "plain.sh"), *args]
    python = sys.executable
    assert _argv(_spec(source, "train.py", tmp_path), layout, args) == [python, str(code / "train.py"), *args]
    (code / "setup.py").write_text("")
    assert _argv(_spec(source, "train.py", tmp_path), layout, args) == [python, "-m", "train", *args]


@pytest.mark.processes
def test_a_bash_entry_point_runs_under_bash(tmp_path: Path, source: Path) -> None:
    script = source / "train.sh"
    script.write_text(
        "#!/bin/bash\n"
        "words=(zero one two)\n"  # arrays and [[ ]]: bash only (dash, /bin/sh here, stops at them)
        'if [[ ${words[1]} == one ]]; then echo "bash array ok: ${words[2]}"; fi\n'
        'for arg in "$@"; do echo "arg: $arg"; done\n'
    )
    script.chmod(0o644)  # not executable in the source: the toolkit (and the kit) make the copy executable
    stream = io.StringIO()
    result = run(_spec(source, "train.sh", tmp_path, hyperparameters={"note": "a b; $(id)"}), stream=stream)
    output = stream.getvalue()
    assert result.ok, output
    assert "bash array ok: two" in output and "arg: --note" in output and "arg: a b; $(id)" in output
    assert oct(script.stat().st_mode & 0o777) == oct(0o644)  # the user's file is left as it was


@pytest.mark.processes
def test_a_python_entry_point_runs_as_a_script_or_as_a_module_with_setup_py(tmp_path: Path, source: Path) -> None:
    (source / "train.py").write_text(
        "import sys\n"
        "print('spec', __spec__.name if __spec__ else None, 'name', __name__, 'args', sys.argv[1:])\n"
    )
    stream = io.StringIO()
    assert run(_spec(source, "train.py", tmp_path, job_name="as-script"), stream=stream).ok, stream.getvalue()
    assert "spec None name __main__ args []" in stream.getvalue()
    (source / "setup.py").write_text("from setuptools import setup\nsetup(name='train', py_modules=['train'])\n")
    stream = io.StringIO()
    assert run(_spec(source, "train.py", tmp_path, job_name="as-module"), stream=stream).ok, stream.getvalue()
    assert "spec train name __main__ args []" in stream.getvalue()
