"""smddp-compat: SageMaker's smdistributed.dataparallel TensorFlow API on Horovod, for TensorFlow 2.21.

``import smddp_compat.tensorflow as sdp`` gives the SMDDP (and Horovod) API; importing this package itself loads
nothing heavy.

The kit's parts live under this one name: ``smddp_compat.estimators``, ``smddp_compat.local_mode``,
``smddp_compat.entry_points``, ``smddp_compat.bench``, ``smddp_compat.image`` and ``smddp_compat.commands`` (the
``smddp`` command). An installed kit holds them
inside this package; a checkout keeps them as the repository's top-level folders, found here through ``__path__``.
A copy of this package shipped in a job's ``sourcedir.tar.gz`` (which shadows the image's installed kit) reaches the
installed parts the same way.
"""

import os as _os
from pkgutil import extend_path as _extend_path

__all__ = ["__version__"]

__version__ = "0.1.0"

#: The repository's folders that install as ``smddp_compat.<name>``.
NAMESPACE_PARTS = ("estimators", "local_mode", "entry_points", "bench", "image", "commands")

__path__ = _extend_path(__path__, __name__)  # every smddp_compat on sys.path: a shipped copy, then the installed kit
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_checkout, "pyproject.toml")) and all(
    _os.path.isdir(_os.path.join(_checkout, part)) for part in NAMESPACE_PARTS
):
    __path__.append(_checkout)
