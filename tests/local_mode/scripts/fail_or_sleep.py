"""Test entry point (no TensorFlow): process ``--fail-index`` writes a failure file and exits 3 after ``--delay``
seconds; every other process sleeps ``--sleep`` seconds. Each writes its pid to ``$SM_OUTPUT_DATA_DIR/pid-<index>``;
with ``--spawn-child 1`` it also starts a ``sleep`` grandchild and writes its pid to ``child-<index>``.
"""

import argparse
import os
import subprocess
import time

from _process_index import process_index

parser = argparse.ArgumentParser()
parser.add_argument("--fail-index", type=int, default=-1)
parser.add_argument("--delay", type=float, default=1.0)
parser.add_argument("--sleep", type=float, default=120.0)
parser.add_argument("--reason", default="ValueError: the loss became NaN at step 7")
parser.add_argument("--write-failure", type=int, default=1)
parser.add_argument("--spawn-child", type=int, default=0)
parser.add_argument("--model_dir")  # smddp local passes it, as SageMaker's TensorFlow estimator does
args = parser.parse_args()

index = process_index()
if args.spawn_child:
    child = subprocess.Popen(["sleep", "300"])
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"child-{index}"), "w") as handle:
        handle.write(str(child.pid))
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"pid-{index}"), "w") as handle:
    handle.write(str(os.getpid()))
print(f"process {index} started", flush=True)
if index == args.fail_index:
    time.sleep(args.delay)
    if args.write_failure:
        with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as handle:
            handle.write(args.reason)
    print(f"process {index} failing", flush=True)
    raise SystemExit(3)
time.sleep(args.sleep)
print(f"process {index} done", flush=True)
