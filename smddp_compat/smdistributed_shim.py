"""The ``smdistributed`` alias: lets an unchanged SMDDP script (``import smdistributed.dataparallel.tensorflow``)
run on smddp_compat.

``smddprun`` puts the alias on ``PYTHONPATH`` of every rank. To opt in by hand, either prepend :func:`path` to
``PYTHONPATH`` (``export PYTHONPATH=$(smddp shim-path):$PYTHONPATH``) or call :func:`activate` before the import.
A real SMDDP installation is never shadowed silently: both refuse unless forced.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from smddp_compat.errors import UsageError

__all__ = ["path", "real_smddp_location", "activate"]


def path() -> str:
    """Directory holding the ``smdistributed`` alias package: an absolute path to put on ``sys.path`` /
    ``PYTHONPATH``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shim_root")


def real_smddp_location(search_path: list[str] | None = None) -> str | None:
    """The directory where a real (AWS) ``smdistributed.dataparallel`` is installed, or None; ``search_path``
    defaults to ``sys.path``, and the alias directory is always skipped."""
    alias = path()
    for entry in search_path if search_path is not None else sys.path:
        if not entry or os.path.abspath(entry) == alias:
            continue
        candidate = os.path.join(entry, "smdistributed", "dataparallel")
        if os.path.isdir(candidate) and os.path.exists(os.path.join(candidate, "__init__.py")):
            return candidate
    return None


def activate(force: bool = False) -> None:
    """Makes ``import smdistributed.dataparallel.tensorflow`` resolve to smddp_compat in this process.

    Args:
        force: Use the alias even when a real SMDDP is installed.

    Raises:
        UsageError: A real SMDDP is installed and ``force`` is False, or ``smdistributed`` was already imported
            from elsewhere.
    """
    real = real_smddp_location()
    if real and not force:
        raise UsageError(
            f"a real smdistributed.dataparallel is installed at {real}; smddp_compat will not shadow it. "
            "Use it as is, or call activate(force=True) to use smddp_compat instead."
        )
    loaded = sys.modules.get("smdistributed")
    if loaded is not None and not os.path.abspath(getattr(loaded, "__file__", "") or "").startswith(path()):
        raise UsageError(
            f"smdistributed is already imported from {getattr(loaded, '__file__', '?')}; "
            "call activate() before importing it."
        )
    if path() not in sys.path:
        sys.path.insert(0, path())
    importlib.invalidate_caches()
    assert importlib.util.find_spec("smdistributed") is not None
