"""TF-free entry point: writes its argv and SM_HPS to ``$SM_OUTPUT_DATA_DIR/args-<rank>.json``; the process of rank
``--fail-rank`` then raises (through the SageMaker contract, so its failure file is written)."""

import json
import os
import sys

from smddp_compat.entry_points.common.lifecycle import run_entry_point


def main() -> None:
    rank = os.environ.get("HOROVOD_RANK", "0")
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"args-{rank}.json"), "w") as out:
        json.dump({"argv": sys.argv[1:], "hps": json.loads(os.environ.get("SM_HPS", "{}"))}, out)
    print(f"rank {rank} recorded {len(sys.argv) - 1} arguments", flush=True)
    if "--fail-rank" in sys.argv and sys.argv[sys.argv.index("--fail-rank") + 1] == rank:
        raise RuntimeError(f"rank {rank} fails on purpose")


run_entry_point(main)
