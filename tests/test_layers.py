"""The house's layers hold: import-linter's contracts (``[tool.importlinter]`` in pyproject.toml) pass on the package
as it installs, and the kit's own imports inside functions stay within their budget.

The repository's folders (``estimators/``, ``local_mode/``, ...) become ``smddp_compat.<folder>`` only when installed
(pyproject's ``package-dir``), and import-linter reads a package from its folder; so the test first lays the product
code out as it installs, in a temporary folder, and runs ``lint-imports`` there."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"

#: Imports of the kit's own modules inside a function (or method). Lower it with each step of the house; the goal
#: (issue 31) is at most 25, each keeping TensorFlow or the SageMaker SDK out of a light import.
IN_FUNCTION_BUDGET = 7  # 7th: the Keras 3 adaptation, loaded only once Keras is (it imports TensorFlow)

#: Folders the product's Python files come from, as pyproject maps them, without outputs and caches.
_SKIPPED = {"__pycache__", "results"}


def _package_dirs() -> dict[str, Path]:
    mapping = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    return {package: REPO / folder for package, folder in mapping.items()}


def _product_files() -> dict[Path, Path]:
    """Each product ``.py`` file -> where it lands when installed (relative to site-packages)."""
    files: dict[Path, Path] = {}
    for package, folder in _package_dirs().items():
        target = Path(*package.split("."))
        for source in folder.rglob("*.py"):
            relative = source.relative_to(folder)
            if _SKIPPED & set(relative.parts):
                continue
            if package == "smddp_compat" and relative.parts[0] in {d.name for d in REPO.iterdir()}:
                continue
            files[source] = target / relative
    return files


@pytest.mark.processes
def test_the_layer_contracts_hold(tmp_path: Path) -> None:
    tree = tmp_path / "site"
    for source, target in _product_files().items():
        (tree / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tree / target)
    shutil.copyfile(PYPROJECT, tmp_path / "pyproject.toml")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--config", str(tmp_path / "pyproject.toml"), "--no-cache"], cwd=tmp_path,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "0 broken" in done.stdout, done.stdout[-3000:]


def _kit_module(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "smddp_compat"
    return any(alias.name.split(".")[0] == "smddp_compat" for alias in node.names)


def in_function_kit_imports() -> list[str]:
    """``file:line`` of every import of the kit's own modules inside a function, in the product code."""
    found = []
    for source in _product_files():
        tree = ast.parse(source.read_text(), filename=str(source))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and _kit_module(node):
                    found.append(f"{source.relative_to(REPO)}:{node.lineno}")
    return sorted(set(found))


def test_in_function_imports_of_the_kit_stay_within_the_budget() -> None:
    found = in_function_kit_imports()
    assert len(found) <= IN_FUNCTION_BUDGET, (
        f"{len(found)} imports of the kit's own modules inside functions (budget {IN_FUNCTION_BUDGET}): move them to "
        "the top of their module, or say in a comment which heavy import (TensorFlow, the SageMaker SDK) they keep "
        f"out: {found}")
