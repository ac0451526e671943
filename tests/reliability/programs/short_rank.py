"""TF-free rank of a short job: prints its rank; exits 3 when ``--fail-rank`` names it (after a short pause, so the
other rank is still running when the launcher stops the job)."""

import os
import sys
import time

rank = os.environ.get("HOROVOD_RANK", "?")
print(f"rank {rank} of {os.environ.get('HOROVOD_SIZE', '?')} on {os.environ.get('HOROVOD_HOSTNAME', '?')}", flush=True)
if "--fail-rank" in sys.argv and sys.argv[sys.argv.index("--fail-rank") + 1] == rank:
    time.sleep(0.2)
    sys.exit(3)
time.sleep(0.1 if "--fail-rank" not in sys.argv else 5)
