"""TF-free rank for the launcher fault tests (tests/reliability/test_launcher_faults.py).

Writes its PID to ``--pid-dir`` (``rank.<rank>.pid``, atomically) so a test can check afterwards that it is gone.
``--ignore-sigterm``: answers SIGTERM with a ``got SIGTERM`` line and keeps running, so the launcher's grace period
runs in full. ``--fail-rank R``: rank R exits with ``--exit-code`` once every rank has written its PID (so the others
are running when the launcher stops the job). ``--lines N``: prints N lines of about 100 bytes (far more than a pipe
holds), then exits 0. ``--mpi-init``: initializes MPI first (mpi4py), so that Open MPI maps its shared-memory
segments. Otherwise it sleeps until it is stopped. Unknown arguments (``smddp local`` hyperparameters)
are ignored.
"""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--pid-dir", required=True)
parser.add_argument("--ignore-sigterm", action="store_true")
parser.add_argument("--fail-rank", default=None)
parser.add_argument("--exit-code", type=int, default=3)
parser.add_argument("--lines", type=int, default=0)
parser.add_argument("--mpi-init", action="store_true")
args, _ = parser.parse_known_args()
if args.mpi_init:
    from mpi4py import MPI  # noqa: F401 - importing it initializes MPI

rank = os.environ.get("HOROVOD_RANK", "0")
size = int(os.environ.get("HOROVOD_SIZE", "1"))
pid_dir = Path(args.pid_dir)

if args.ignore_sigterm:
    signal.signal(signal.SIGTERM, lambda *_: print("got SIGTERM", flush=True))

partial = pid_dir / f".rank.{rank}.pid.partial"
partial.write_text(str(os.getpid()))
partial.rename(pid_dir / f"rank.{rank}.pid")
print(f"rank {rank} up", flush=True)

if args.lines:
    for index in range(args.lines):
        print(f"line {index:06d} " + "x" * 88)
    sys.exit(0)

if args.fail_rank == rank:
    deadline = time.monotonic() + 30
    while len(list(pid_dir.glob("rank.*.pid"))) < size and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    sys.exit(args.exit_code)

while True:
    time.sleep(1)
