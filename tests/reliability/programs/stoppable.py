"""TF-free training script under the kit's entry-point lifecycle: writes its PID to ``--pid-dir`` (one file per
host), prints ``step N`` until SIGTERM arrives, then returns as the kit's scripts do after their checkpoint."""

import argparse
import os
import time
from pathlib import Path

from smddp_compat.entry_points.common.lifecycle import run_entry_point, termination_requested


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-dir", required=True)
    args, _ = parser.parse_known_args()
    host = os.environ.get("SM_CURRENT_HOST", "algo-1")
    (Path(args.pid_dir) / f"{host}.pid").write_text(str(os.getpid()))
    step = 0
    while not termination_requested() and step < 6000:
        step += 1
        print(f"step {step}", flush=True)
        time.sleep(0.05)
    print(f"stopped on SIGTERM at step {step}; checkpoint saved" if termination_requested() else "done", flush=True)


if __name__ == "__main__":
    run_entry_point(main)
