"""Error cases inside a job: usage: errors.py mismatch|twice|before."""

import sys

import tensorflow as tf

import smddp_compat.tensorflow as sdp
from smddp_compat.errors import CollectiveError

case = sys.argv[1]
if case == "before":
    sdp.rank()
sdp.init()
if case == "twice":
    sdp.init()
if case == "mismatch":
    try:
        sdp.allreduce(tf.ones([2 + sdp.rank()]), 0, 1)
    except CollectiveError as exc:
        print(f"COLLECTIVE ERROR: {exc}", flush=True)
        sys.exit(3)
