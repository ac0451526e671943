"""Which process of the job this is, from the variables local_mode sets (shared by the test entry points)."""

import json
import os


def process_index() -> int:
    """HOROVOD_RANK, DTENSOR_CLIENT_ID or the TF_CONFIG task index; for distribution none, the host number - 1."""
    for name in ("HOROVOD_RANK", "DTENSOR_CLIENT_ID"):
        if name in os.environ:
            return int(os.environ[name])
    if "TF_CONFIG" in os.environ:
        return int(json.loads(os.environ["TF_CONFIG"])["task"]["index"])
    return int(os.environ["SM_CURRENT_HOST"].rsplit("-", 1)[1]) - 1
