"""``python -m smddp_compat.bench``: the same as ``smddp bench``."""

import sys

from smddp_compat.bench.run import main

sys.exit(main())
