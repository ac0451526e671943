"""Packaging: the wheel puts one name into site-packages, and the code imports the kit's parts through it."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import smddp_compat

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)


def _package_dir(package: str, mapping: dict[str, str]) -> Path:
    """The folder setuptools takes ``package`` from, by the pyproject's package-dir."""
    for prefix in sorted(mapping, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix):].lstrip(".").split(".") if package != prefix else []
            return ROOT / mapping[prefix] / Path(*rest) if rest else ROOT / mapping[prefix]
    return ROOT / Path(*package.split("."))


def test_the_package_list_holds_every_folder_of_code():
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = {_package_dir(name, setuptools["package-dir"]) for name in setuptools["packages"]}
    folders = {
        init.parent
        for part in ("smddp_compat", *smddp_compat.NAMESPACE_PARTS)
        for init in (ROOT / part).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert folders - listed == set(), "folders of code missing from [tool.setuptools] packages"
    assert listed - folders == set(), "packages listed without a folder"
    assert set(smddp_compat.NAMESPACE_PARTS) == {
        name.split(".", 1)[1] for name in setuptools["package-dir"] if name != "smddp_compat"
    }


def _pins(name: str) -> dict[str, str]:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return {line.split("==")[0].lower(): line.split("==")[1] for line in lines if "==" in line and line[0] != "#"}


def test_the_sdk_is_an_extra_never_a_dependency():
    """``pip install smddp-compat`` keeps the user's SageMaker SDK: v2 and v3 are extras, each pinned to what is
    tested (constraints.txt for v2, constraints-sdk3.txt for v3), and setup.sh's .venv takes v2."""
    project = _pyproject()["project"]
    assert [spec for spec in project["dependencies"] if Requirement(spec).name == "sagemaker"] == []
    for extra, constraints, major in (("sdk2", "constraints.txt", "2"), ("sdk3", "constraints-sdk3.txt", "3")):
        (spec,) = [Requirement(spec) for spec in project["optional-dependencies"][extra]]
        tested = _pins(constraints)["sagemaker"]
        assert spec.name == "sagemaker" and tested in spec.specifier and tested.startswith(major + "."), extra
    assert _pins("constraints-sdk3.txt")["sagemaker"] == "3.27.0"
    assert '-e "$ROOT[test,sdk2,tune,mlflow]"' in (ROOT / "setup.sh").read_text(encoding="utf-8")


@pytest.mark.e2e
def test_the_wheel_installs_one_top_level_name(tmp_path):
    # Built from a copy: setuptools builds in the source tree, and a checkout's own build/ could hold stale files.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", "smddp_local_output", "tests"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(source)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"smddp_compat", "smddp_compat-0.1.0.dist-info"}
    for part in smddp_compat.NAMESPACE_PARTS:
        assert f"smddp_compat/{part}/__init__.py" in names
    assert "smddp_compat/bench/programs/train.py" in names
    assert "smddp_compat/commands/install_horovod.sh" in names  # `smddp install-horovod` runs it from the installed kit


_IMPORT_IN_TEXT = re.compile(
    r"(?:^|[;\n(]\s*)(?:import|from)\s+(?:\w+\s*,\s*)*(" + "|".join(smddp_compat.NAMESPACE_PARTS) + r")\b"
)


def _bare_imports(path: Path) -> list[str]:
    """Imports of a part by its bare name: import statements, and code held in strings (for child processes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _IMPORT_IN_TEXT.search(node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
            continue
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {m}" for m in modules
                  if m.split(".")[0] in smddp_compat.NAMESPACE_PARTS]
    return found


def test_no_code_imports_a_part_by_its_bare_folder_name():
    files = [p for part in ("smddp_compat", "tests", *smddp_compat.NAMESPACE_PARTS)
             for p in (ROOT / part).rglob("*.py") if "__pycache__" not in p.parts]
    offenders = [line for path in files for line in _bare_imports(path)]
    assert offenders == []


@pytest.mark.processes
def test_the_parts_import_under_the_namespace_from_a_checkout():
    code = ("import smddp_compat.local_mode, smddp_compat.estimators, smddp_compat.entry_points.common.training_env; "
            "print(smddp_compat.local_mode.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("local_mode/__init__.py")


def _module_name(path: Path) -> tuple[str, str]:
    """The module's installed name and its package (a package's ``__init__`` is in itself)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in smddp_compat.NAMESPACE_PARTS:
        parts.insert(0, "smddp_compat")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def _private_imports(path: Path) -> list[str]:
    """Imports of a private module (a ``_name`` component) that belongs to another package than the importer's."""
    _, package = _module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: `from . import x` is in the importer's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if not target.startswith("smddp_compat."):
                continue
            components = target.split(".")
            for index, component in enumerate(components):
                if component.startswith("_") and not component.startswith("__"):
                    if ".".join(components[:index]) != package:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {package} imports "
                                     f"{'.'.join(components[:index + 1])}")
                    break
    return sorted(set(found))


def test_no_package_imports_another_packages_private_module():
    """What one package shares with another is public (exported by its ``__init__`` or a module without ``_``):
    a ``_module`` is imported only by the modules beside it, not by a subpackage, a parent or a sibling."""
    files = [p for part in ("smddp_compat", *smddp_compat.NAMESPACE_PARTS)
             for p in (ROOT / part).rglob("*.py") if "__pycache__" not in p.parts]
    offenders = [line for path in files for line in _private_imports(path)]
    assert offenders == []
