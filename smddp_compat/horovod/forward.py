"""How the Horovod face hands every name it does not override to Horovod itself.

A face module defines its overrides, then calls :func:`forward_to`: any other attribute (public or private, e.g.
``hvd.alltoall``, ``hvd.ProcessSet``, ``hvd._executing_eagerly``) is read from the Horovod module at access time,
and Horovod's submodules that need no change (``hvd.util``, ``hvd.mpi_ops``...) are importable under the face's
name, as the very same module objects.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from types import ModuleType
from typing import Any, Callable, Iterable

__all__ = ["forward_to", "overridden_names", "horovod_arguments", "with_signature_of"]

_OVERRIDES_ATTRIBUTE = "__smddp_overrides__"


def forward_to(
    namespace: dict[str, Any],
    horovod_module_name: str,
    overrides: Iterable[str],
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Makes the face module whose globals are ``namespace`` fall back to ``horovod_module_name``.

    Args:
        namespace: The face module's ``globals()``.
        horovod_module_name: The Horovod module it stands for, e.g. "horovod.tensorflow".
        overrides: The names the face defines itself (recorded for :func:`overridden_names`).
        submodules: Horovod submodules to register, unchanged, under the face's name.

    Returns:
        The module's ``__getattr__``, ``__dir__`` and ``__all__`` (Horovod's public names plus the overrides).
    """
    horovod_module = importlib.import_module(horovod_module_name)
    face_name = namespace["__name__"]
    for submodule in submodules:
        module = importlib.import_module(f"{horovod_module_name}.{submodule}")
        sys.modules[f"{face_name}.{submodule}"] = module
        namespace.setdefault(submodule, module)
    overrides = tuple(overrides)
    namespace[_OVERRIDES_ATTRIBUTE] = overrides

    # The face's own submodules (e.g. ``keras``, ``elastic``) win over Horovod's modules of the same name.
    own_submodules = {info.name for info in pkgutil.iter_modules(namespace.get("__path__", []))}

    def __getattr__(name: str) -> Any:  # noqa: N807 - module attribute hook (PEP 562)
        if name in own_submodules:
            return importlib.import_module(f"{face_name}.{name}")
        try:
            return getattr(horovod_module, name)
        except AttributeError:
            raise AttributeError(f"module {face_name!r} has no attribute {name!r} (nor has {horovod_module_name})") \
                from None

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(namespace) | set(dir(horovod_module)))

    public = [name for name in dir(horovod_module)
              if not name.startswith("_") and not isinstance(getattr(horovod_module, name), ModuleType)]
    return __getattr__, __dir__, sorted(set(public) | set(overrides))


def overridden_names(face: ModuleType) -> tuple[str, ...]:
    """The names a face module defines itself instead of taking them from Horovod."""
    return tuple(getattr(face, _OVERRIDES_ATTRIBUTE, ()))


def horovod_arguments(horovod_function: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call as ``horovod_function`` would read them, by name, defaults filled in.

    Raises:
        TypeError: The call does not fit Horovod's signature (Python's own message).
    """
    bound = inspect.signature(horovod_function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def with_signature_of(horovod_function: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Gives an override Horovod's exact signature (for ``help()`` and ``inspect``); its own docstring stays."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function.__signature__ = inspect.signature(horovod_function)  # type: ignore[attr-defined]
        return function

    return decorate
