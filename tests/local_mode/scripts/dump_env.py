"""Test entry point: records what the process saw (argv, environment, cwd) as JSON, one file per process.

The file goes to ``$SM_OUTPUT_DATA_DIR/env-<index>.json`` (index: HOROVOD_RANK, DTENSOR_CLIENT_ID, the TF_CONFIG
task index, or 0). With ``--write-model 1`` it also writes ``model.txt`` into ``SM_MODEL_DIR``.
"""

import json
import os
import sys


def _index() -> int:
    for name in ("HOROVOD_RANK", "DTENSOR_CLIENT_ID"):
        if name in os.environ:
            return int(os.environ[name])
    if "TF_CONFIG" in os.environ:
        return int(json.loads(os.environ["TF_CONFIG"])["task"]["index"])
    return 0


index = _index()
record = {"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(), "path": sys.path}
target = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{index}.json")
with open(target + ".tmp", "w") as handle:
    json.dump(record, handle)
os.replace(target + ".tmp", target)
if "--write-model" in sys.argv:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{index}.txt"), "w") as handle:
        handle.write(f"weights of process {index}\n")
print(f"dumped environment of process {index} on {os.environ['SM_CURRENT_HOST']}")
