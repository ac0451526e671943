"""SageMaker SDK v3 driver of ``smddp_compat.estimators.sdk3.Horovod``: runs a Horovod script (Horovod's API, or the
kit's Horovod face ``smddp_compat.horovod``) as SDK v2's ``distribution={"mpi": ...}`` runs it: ``smddp_driver.py``
with the ``mpi`` distribution's default of one process per GPU, else one per host.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import smddp_driver  # noqa: E402  (a sibling script, found through the line above)

if __name__ == "__main__":
    sys.exit(smddp_driver.main("mpi"))
