"""``python -m smddp_compat.launcher`` is ``smddprun``."""

import sys

from smddp_compat.launcher import main

sys.exit(main())
