"""TF-free rank for the bounded-output test: prints one line of ``argv[1]`` MiB without a newline, then ``end``."""

import sys

chunk = "x" * (1 << 20)
for _ in range(int(sys.argv[1])):
    sys.stdout.write(chunk)
sys.stdout.write("\nend\n")
sys.stdout.flush()
