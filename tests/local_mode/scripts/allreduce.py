"""Test entry point: one Horovod allreduce through the SMDDP API, result written to SM_OUTPUT_DATA_DIR/allreduce-<rank>.json.

Imports ``smdistributed.dataparallel.tensorflow`` (the unchanged SMDDP import) when ``--smddp-import 1`` is given,
else ``smddp_compat.tensorflow``.
"""

import json
import os
import sys

if "--smddp-import" in sys.argv and sys.argv[sys.argv.index("--smddp-import") + 1] == "1":
    import smdistributed.dataparallel.tensorflow as sdp
else:
    import smddp_compat.tensorflow as sdp
import tensorflow as tf

sdp.init()
total = sdp.allreduce(tf.constant(float(sdp.rank() + 1)), 0, 1, op=sdp.ReduceOp.SUM)
record = {
    "rank": sdp.rank(),
    "size": sdp.size(),
    "local_rank": sdp.local_rank(),
    "local_size": sdp.local_size(),
    "sum": float(total.numpy()),
    "module": sdp.__name__,
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"allreduce-{sdp.rank()}.json"), "w") as handle:
    json.dump(record, handle)
print("allreduce", record)
