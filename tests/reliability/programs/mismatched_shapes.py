"""SageMaker-style entry point whose ranks all-reduce tensors of different shapes (rank r sends 2 + r floats).

Had the collective succeeded, rank 0 would save a model; it must fail instead, with the reason in the failure file.
"""

import os

from smddp_compat.entry_points.common.lifecycle import run_entry_point


def main() -> None:
    import tensorflow as tf

    import smddp_compat.tensorflow as sdp

    sdp.init()
    total = sdp.allreduce(tf.ones([2 + sdp.rank()]), 0, 1, op=sdp.ReduceOp.SUM)
    if sdp.rank() == 0:
        with open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.txt"), "w") as out:
            out.write(str(total.numpy()))


run_entry_point(main)
