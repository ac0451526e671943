"""One error hierarchy: every exception class of the kit's packages is an SmddpError, each is declared once (the
user's mistakes are smddp_compat.errors' ConfigurationError and HyperparameterError, and smddp_compat.cluster's
ClusterConfigError, whichever package raises them), and the message format ``<field>=<value!r>: <problem>. Fix:
<fix>`` is built in smddp_compat.errors alone.

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
PRIVATE_SIGNALS = {"smddp_compat.launcher._supervisor.StopSignalled"}


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


def test_no_error_class_is_declared_twice():
    declared: dict[str, list[str]] = {}
    for module in MODULES:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                declared.setdefault(node.name, []).append(f"{module.path.relative_to(REPO)}:{node.lineno}")
    assert "ConfigurationError" in declared and "ClusterConfigError" in declared  # the scan reads the classes
    twice = {name: places for name, places in declared.items() if len(places) > 1}
    assert not twice, f"declared more than once (declare it once, re-export it elsewhere): {twice}"


def test_every_package_reexports_the_one_configuration_error():
    import smddp_compat.entry_points.common.errors as entry_points_errors
    import smddp_compat.estimators.errors as estimators_errors
    import smddp_compat.local_mode.docker.errors as docker_errors
    import smddp_compat.local_mode.errors as local_mode_errors
    from smddp_compat import cluster, estimators, local_mode

    assert local_mode.ConfigurationError is local_mode_errors.ConfigurationError is ConfigurationError
    assert estimators.ConfigurationError is estimators_errors.ConfigurationError is ConfigurationError
    assert local_mode.HyperparameterError is entry_points_errors.HyperparameterError is HyperparameterError
    assert entry_points_errors.ClusterConfigError is cluster.ClusterConfigError
    # The kinds declared in a package are the shared class's subclasses, so `except ConfigurationError` catches them.
    for kind in (estimators.UnknownInstanceTypeError, estimators.NoPublishedImageError, docker_errors.ImageNotFoundError,
                 HyperparameterError, cluster.ClusterConfigError):
        assert issubclass(kind, ConfigurationError) and issubclass(kind, ValueError) and issubclass(kind, SmddpError)
    for shared in (ConfigurationError, HyperparameterError):
        error = shared("--epochs", 0, "must be >= 1", "pass --epochs 1 or more")
        assert str(error) == "--epochs=0: must be >= 1. Fix: pass --epochs 1 or more"
        assert error.details() == {"field": "--epochs", "value": 0, "problem": "must be >= 1",
                                   "fix": "pass --epochs 1 or more"}


def test_a_cluster_config_error_takes_the_four_parts_or_a_whole_message():
    from smddp_compat.cluster import ClusterConfigError

    parts = ClusterConfigError("SM_HOSTS", [], "is not a non-empty list of host names", 'give e.g. ["algo-1"]')
    assert str(parts) == "SM_HOSTS=[]: is not a non-empty list of host names. Fix: give e.g. [\"algo-1\"]"
    assert parts.details() == {"field": "SM_HOSTS", "value": [], "problem": "is not a non-empty list of host names",
                               "fix": 'give e.g. ["algo-1"]'}
    whole = ClusterConfigError("SM_NUM_CPUS='many' is not an integer.")  # as the entry points compose theirs
    assert str(whole) == "SM_NUM_CPUS='many' is not an integer." and whole.details() == {}


def test_the_estimator_passes_the_users_mistakes_and_turns_other_failures_into_its_own():
    from smddp_compat.estimators.errors import EstimatorError, JobError, raised_as_estimator_errors
    from smddp_compat.local_mode.errors import ArtifactError, JobFailedError

    bad_name = HyperparameterError("hyperparameters", "my lr", "is not a usable name", "use learning_rate")
    with pytest.raises(HyperparameterError) as raised, raised_as_estimator_errors():
        raise bad_name
    assert raised.value is bad_name  # the one class: nothing to convert

    failed = JobFailedError("job", "Failed", "boom", label="algo-2,1", exit_code=3, host="algo-2")
    with pytest.raises(JobError) as raised, raised_as_estimator_errors():
        raise failed
    job_error = raised.value
    assert str(job_error) == str(failed) and job_error.__cause__ is failed
    assert (job_error.job_name, job_error.status, job_error.reason) == ("job", "Failed", "boom")
    assert (job_error.rank, job_error.host, job_error.exit_code) == ("algo-2,1", "algo-2", 3)

    artifact = ArtifactError("could not write model.tar.gz")
    with pytest.raises(EstimatorError) as raised, raised_as_estimator_errors():
        raise artifact
    assert type(raised.value) is EstimatorError and str(raised.value) == "could not write model.tar.gz"
    assert raised.value.__cause__ is artifact

    with pytest.raises(JobError) as raised, raised_as_estimator_errors():
        raise job_error
    assert raised.value is job_error
