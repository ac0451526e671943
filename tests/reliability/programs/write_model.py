"""TF-free entry point: writes ``--files`` files of ``--file-bytes`` random bytes into the model directory."""

import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--files", type=int, default=4)
parser.add_argument("--file-bytes", type=int, default=100_000)
args, _ = parser.parse_known_args()
for index in range(args.files):
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"part-{index}.bin"), "wb") as out:
        out.write(os.urandom(args.file_bytes))
print("model written", flush=True)
