"""Test entry point (no TensorFlow): records what the process saw as ``$SM_OUTPUT_DATA_DIR/env-<index>.json``.

Recorded: argv, environment, working directory, pid, sys.path, the three config files, the channel folders' file
lists, and where ``smdistributed`` would be imported from. ``--write-model 1`` also writes ``model-<index>.txt``
into ``SM_MODEL_DIR``.
"""

import importlib.util
import json
import os
import sys

from _process_index import process_index

index = process_index()
config_dir = os.environ["SM_INPUT_CONFIG_DIR"]
configs = {}
for name in ("hyperparameters.json", "resourceconfig.json", "inputdataconfig.json"):
    with open(os.path.join(config_dir, name)) as handle:
        configs[name] = json.load(handle)
channels = {}
for name in json.loads(os.environ["SM_CHANNELS"]):
    folder = os.environ[f"SM_CHANNEL_{name.upper()}"]
    channels[name] = sorted(
        os.path.relpath(os.path.join(d, f), folder) for d, _, files in os.walk(folder, followlinks=True) for f in files
    )
spec = importlib.util.find_spec("smdistributed")
record = {
    "argv": sys.argv[1:],
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "pid": os.getpid(),
    "path": sys.path,
    "configs": configs,
    "channels": channels,
    "smdistributed": None if spec is None else list(spec.submodule_search_locations or []),
}
target = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{index}.json")
with open(target + ".tmp", "w") as handle:
    json.dump(record, handle)
os.replace(target + ".tmp", target)
if "--write-model" in sys.argv:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{index}.txt"), "w") as handle:
        handle.write(f"weights of process {index}\n")
print(f"dumped environment of process {index} on {os.environ['SM_CURRENT_HOST']}")
