"""Test entry point: every rank prints metric lines quickly, as an unbuffered training loop does.

Under the SMDDP launch (``mpirun --tag-output ... smddprun python -m mpi4py metric_lines.py``) with Python
unbuffered, each ``print`` reaches mpirun as two chunks, its text and its newline, and the ranks' chunks interleave:
the toolkit then prints lines such as ``step=3 rank=1 checksum=-4.9380[1,mpirank:1,algo-1]<stdout>:``. Each line is
``step=S rank=R host=H checksum=V`` with ``V = -1.2345 * (R + 1) * S``, so the last value of each rank is known.
"""

import argparse
import os
import socket
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
args, _unknown = parser.parse_known_args()

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
for step in range(1, args.steps + 1):
    print(f"step={step} rank={rank} host={socket.gethostname()} checksum={-1.2345 * (rank + 1) * step:.4f}")
sys.stdout.flush()
