"""Benchmarks of smddp-compat: compat overhead, allreduce bandwidth per engine, small tensors, fp16, scaling,
start-up and memory, each as a ratio measured in one run. Run ``smddp bench`` (``python -m smddp_compat.bench``).

Importing this package does not import TensorFlow: the measurements run in separate rank programs.
"""

from smddp_compat.bench.run import main

__all__ = ["main"]
