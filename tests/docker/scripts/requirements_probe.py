"""Test entry point (no TensorFlow): proves requirements.txt was installed and the S3 channel was downloaded.

Imports ``twin_probe_dependency`` (a wheel shipped in the source and listed in requirements.txt) and copies the
``train`` channel's ``data.txt`` with the package's marker into ``SM_OUTPUT_DATA_DIR/probe-<host>.json``.
"""

import json
import os

import twin_probe_dependency

channel = os.environ["SM_CHANNEL_TRAIN"]
record = {
    "marker": twin_probe_dependency.MARKER,
    "data": open(os.path.join(channel, "data.txt"), encoding="utf-8").read(),
    "host": os.environ["SM_CURRENT_HOST"],
    "hosts": json.loads(os.environ["SM_HOSTS"]),
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"probe-{record['host']}.json"), "w", encoding="utf-8") as handle:
    json.dump(record, handle)
open(os.path.join(os.environ["SM_MODEL_DIR"], "done.txt"), "w").write(record["host"])
print("requirements_probe", record, flush=True)
