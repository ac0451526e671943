"""One error base: every exception class of the kit's packages is an SmddpError, and the message format
``<field>=<value!r>: <problem>. Fix: <fix>`` is built in smddp_compat.errors alone.

The classes are found by reading the sources (so that no TensorFlow module is imported); each base class is then
resolved through the module's own imports, which import only the light ``errors`` modules.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from smddp_compat import NAMESPACE_PARTS

from smddp_compat.errors import ConfigurationError, HyperparameterError, SmddpError

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("smddp_compat", *NAMESPACE_PARTS)
SHARED_ERRORS = REPO / "smddp_compat" / "errors.py"

# Classes that are not errors a user sees: control flow inside one function, never raised out of it.
PRIVATE_SIGNALS = {"smddp_compat.local_mode.lifecycle._StoppedBeforeStart"}


class _Module:
    """One source file: its classes and the names its imports bind."""

    def __init__(self, path: Path) -> None:
        self.path = path
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[0] in NAMESPACE_PARTS:  # installed as smddp_compat.<folder>
            parts = ("smddp_compat", *parts)
        self.name = ".".join(parts)
        self.tree = ast.parse(path.read_text(), str(path))
        self.classes = {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}
        self.imports: dict[str, tuple[str, str | None]] = {}  # bound name -> (module, attribute or None)
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, None)

    def resolve(self, expression: ast.expr) -> type | None:
        """The class a base-class expression names, or None when it is a class of this file (see `bases`)."""
        parts = ast.unparse(expression).split(".")
        head, rest = parts[0], parts[1:]
        if head in self.classes and not rest:
            return None
        if head in self.imports:
            module, attribute = self.imports[head]
            target = _import(module, attribute)
        else:
            target = getattr(builtins, head)
        for part in rest:
            target = getattr(target, part)
        return target

    def bases(self, name: str) -> list[type]:
        """The imported or built-in classes ``name`` derives from, following the classes of this file."""
        found: list[type] = []
        for base in self.classes[name].bases:
            resolved = self.resolve(base)
            found.extend(self.bases(ast.unparse(base)) if resolved is None else [resolved])
        return found


def _import(module: str, attribute: str | None) -> object:
    if attribute is None:
        return importlib.import_module(module)
    try:
        return getattr(importlib.import_module(module), attribute)
    except AttributeError:  # `from package import submodule`
        return importlib.import_module(f"{module}.{attribute}")


def _is_exception_class(module: _Module, name: str) -> bool:
    names = {ast.unparse(base).split(".")[-1] for base in module.classes[name].bases}
    return name.endswith("Error") or any(base.endswith(("Error", "Exception")) for base in names)


def _modules() -> list[_Module]:
    return [_Module(path) for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]


MODULES = _modules()
EXCEPTION_CLASSES = [
    (module, name) for module in MODULES for name in module.classes if _is_exception_class(module, name)
]


def test_the_walk_finds_every_package_errors():
    found = {f"{module.name}.{name}" for module, name in EXCEPTION_CLASSES}
    for expected in ("smddp_compat.local_mode.errors.LocalModeError", "smddp_compat.estimators.errors.EstimatorError",
                     "smddp_compat.entry_points.common.errors.EntryPointError",
                     "smddp_compat.image.errors.DockerError", "smddp_compat.bench.errors.BenchError",
                     "smddp_compat.entry_points.common.dtensor_mesh.MeshConfigError"):
        assert expected in found


@pytest.mark.parametrize("module, name", EXCEPTION_CLASSES,
                         ids=[f"{module.name}.{name}" for module, name in EXCEPTION_CLASSES])
def test_every_exception_class_is_an_smddp_error(module: _Module, name: str) -> None:
    qualified = f"{module.name}.{name}"
    if qualified in PRIVATE_SIGNALS or module.path == SHARED_ERRORS:
        return
    bases = module.bases(name)
    assert any(issubclass(base, SmddpError) for base in bases), f"{qualified} derives from {bases}, not SmddpError"


def _builds_fix_text(node: ast.AST) -> bool:
    return any(isinstance(part, ast.Constant) and isinstance(part.value, str) and "Fix:" in part.value
               for part in ast.walk(node))


@pytest.mark.parametrize("module, name", EXCEPTION_CLASSES,
                         ids=[f"{module.name}.{name}" for module, name in EXCEPTION_CLASSES])
def test_only_the_shared_module_builds_the_field_value_problem_fix_message(module: _Module, name: str) -> None:
    if module.path == SHARED_ERRORS:
        return
    node = module.classes[name]
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            parameters = [argument.arg for argument in item.args.args[1:]]
            assert parameters[:4] != ["field", "value", "problem", "fix"], (
                f"{module.name}.{name} repeats ConfigurationError's constructor: inherit it instead")
            assert not _builds_fix_text(item), (
                f"{module.name}.{name} composes its own '... Fix: ...' message: pass field, value, problem and fix "
                "to SmddpError instead")


def test_package_configuration_errors_are_the_shared_ones_marked_with_their_package():
    import smddp_compat.entry_points.common.errors as entry_points_errors
    import smddp_compat.estimators.errors as estimators_errors
    import smddp_compat.local_mode.errors as local_mode_errors

    pairs = [
        (local_mode_errors.ConfigurationError, ConfigurationError, local_mode_errors.LocalModeError),
        (local_mode_errors.HyperparameterError, HyperparameterError, local_mode_errors.LocalModeError),
        (estimators_errors.ConfigurationError, ConfigurationError, estimators_errors.EstimatorError),
        (entry_points_errors.HyperparameterError, HyperparameterError, entry_points_errors.EntryPointError),
    ]
    for package_class, shared_class, package_base in pairs:
        assert issubclass(package_class, shared_class) and issubclass(package_class, package_base)
        error = package_class("--epochs", 0, "must be >= 1", "pass --epochs 1 or more")
        assert str(error) == "--epochs=0: must be >= 1. Fix: pass --epochs 1 or more"
        assert error.details() == {"field": "--epochs", "value": 0, "problem": "must be >= 1",
                                   "fix": "pass --epochs 1 or more"}


def test_an_error_a_called_package_raised_becomes_the_estimators_own_with_its_fields():
    from smddp_compat.estimators.errors import ConfigurationError as EstimatorConfigurationError
    from smddp_compat.estimators.errors import EstimatorError, JobError, as_estimator_error
    from smddp_compat.local_mode.errors import ArtifactError, HyperparameterError as LocalHyperparameterError, JobFailedError

    bad_name = LocalHyperparameterError("hyperparameters", "my lr", "is not a usable name", "use learning_rate")
    converted = as_estimator_error(bad_name)
    assert type(converted) is EstimatorConfigurationError and converted.details() == bad_name.details()
    assert str(converted) == str(bad_name)

    failed = JobFailedError("job", "Failed", "boom", label="algo-2,1", exit_code=3, host="algo-2")
    job_error = as_estimator_error(failed)
    assert type(job_error) is JobError and str(job_error) == str(failed)
    assert (job_error.job_name, job_error.status, job_error.reason) == ("job", "Failed", "boom")
    assert (job_error.rank, job_error.host, job_error.exit_code) == ("algo-2,1", "algo-2", 3)

    other = as_estimator_error(ArtifactError("could not write model.tar.gz"))
    assert type(other) is EstimatorError and str(other) == "could not write model.tar.gz"
    assert as_estimator_error(converted) is converted
