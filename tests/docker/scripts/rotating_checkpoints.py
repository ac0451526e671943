"""Test entry point (no TensorFlow) for the twin's spot and checkpoint test, on every host of a job.

A training loop that saves a checkpoint each step (``<host>-step-<N>``, written under a temporary name and renamed
into place) in the checkpoint folder that ``/opt/ml/input/config/checkpointconfig.json`` names (as SageMaker Debugger
finds it), keeps only its last ``--keep`` checkpoints (deleting older ones, as a script rotating its checkpoints
does), resumes from the latest of its own it finds there, and appends a line per step to an event file under
``/opt/ml/output/tensorboard/<host>/``. On SIGTERM it exits at once: its checkpoints are already on disk. A fresh
run trains at ``--delay`` seconds a step; a resumed one goes at full speed (it only has to finish). At the end it
records what it saw in ``SM_OUTPUT_DATA_DIR/final-<host>.json`` and writes ``SM_MODEL_DIR/model-<host>.json``.
"""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--delay", type=float, default=0.4)
parser.add_argument("--keep", type=int, default=3)
args, _ = parser.parse_known_args()  # the estimator adds --model_dir
host = os.environ["SM_CURRENT_HOST"]
with open("/opt/ml/input/config/checkpointconfig.json", encoding="utf-8") as handle:
    config = json.load(handle)
folder = config["LocalPath"]
prefix = f"{host}-step-"


def mine() -> list[int]:
    return sorted(int(name[len(prefix):]) for name in os.listdir(folder) if name.startswith(prefix))


def on_sigterm(_signum, _frame):
    print(f"{host} got SIGTERM", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
resumed = (mine() or [0])[-1]
print(f"{host} resumed from step {resumed}", flush=True)
delay = args.delay if resumed == 0 else 0.0
board = os.path.join("/opt/ml/output/tensorboard", host)
os.makedirs(board, exist_ok=True)
with open(os.path.join(board, f"events.out.tfevents.from-{resumed}"), "a", encoding="utf-8") as events:
    for step in range(resumed + 1, args.steps + 1):
        time.sleep(delay)
        temporary = os.path.join(folder, f".{prefix}{step}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(f"{host} step {step}\n")
        os.replace(temporary, os.path.join(folder, f"{prefix}{step}"))
        for old in mine()[: -args.keep]:
            os.unlink(os.path.join(folder, f"{prefix}{old}"))
        events.write(f"step {step}\n")
        events.flush()
record = {"host": host, "resumed_from": resumed, "checkpoints": [f"{prefix}{step}" for step in mine()],
          "checkpointconfig": config}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"final-{host}.json"), "w", encoding="utf-8") as handle:
    json.dump(record, handle)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{host}.json"), "w", encoding="utf-8") as handle:
    json.dump({"steps": args.steps}, handle)
print(f"{host} trained to step {args.steps}", flush=True)
