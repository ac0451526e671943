"""Writes one rank's results for the test that launched it."""

import json
import os


def write_result(rank: int, **values) -> None:
    path = os.path.join(os.environ["RESULT_DIR"], f"rank{rank}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(values, handle)
    os.replace(path + ".tmp", path)
