"""Test entry point (no TensorFlow): waits up to ``--sleep`` seconds; on SIGTERM it says so, writes
``SM_MODEL_DIR/stopped-<host>.txt`` (what a training script does with its checkpoint) and exits 0."""

import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--sleep", type=float, default=120.0)
args = parser.parse_args()
host = os.environ["SM_CURRENT_HOST"]


def on_sigterm(_signum, _frame):
    print(f"{host} got SIGTERM, saving", flush=True)
    time.sleep(0.5)  # a checkpoint takes a moment
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"stopped-{host}.txt"), "w") as handle:
        handle.write("stopped cleanly\n")
    print(f"{host} saved, exiting", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
print(f"{host} waiting", flush=True)
time.sleep(args.sleep)
print(f"{host} slept to the end", flush=True)
