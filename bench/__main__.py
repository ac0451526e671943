"""``python -m bench``: the same as ``smddp bench``."""

import sys

from bench.run import main

sys.exit(main())
