"""A job's process that serves, for the job-network tests (tests/reliability/test_job_network.py).

``--serve socket``: listens on every interface (``0.0.0.0``), as any server a script starts may; ``--serve mwms``:
TensorFlow's MultiWorkerMirroredStrategy (its gRPC server binds every interface) and one all-reduce between the
workers; ``--serve horovod``: ``smddp_compat.tensorflow.init()`` (Gloo or MPI, as launched). Then it downloads each address of ``--fetch URL,...``
(a script fetching its data) and prints ``fetched <URL> <status>`` (or ``<error>``), prints
``serving``, and waits until the file ``--release`` exists (60 s at most) before it exits 0. Unknown arguments
(``smddp local`` hyperparameters) are ignored.
"""

import argparse
import os
import socket
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--serve", choices=["socket", "mwms", "horovod"], required=True)
parser.add_argument("--release", required=True)
parser.add_argument("--fetch", default="")
args, _ = parser.parse_known_args()

held = []
if args.serve == "socket":
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("0.0.0.0", 0))
    server.listen()
    held.append(server)
elif args.serve == "mwms":
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
    print(f"all-reduced {float(total):g}", flush=True)
else:
    import smddp_compat.tensorflow as hvd

    hvd.init()
    print(f"rank {hvd.rank()} of {hvd.size()}", flush=True)

for url in filter(None, args.fetch.split(",")):
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:  # noqa: S310 - the test's own server
            print(f"fetched {url} {answer.status}", flush=True)
    except OSError as exc:
        print(f"fetched {url} {exc}", flush=True)
print(f"serving {os.getpid()}", flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(args.release) and time.monotonic() < deadline:
    time.sleep(0.05)
