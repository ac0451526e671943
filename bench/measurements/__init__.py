"""The bench's measurements, one module each, in the issue's order.

Each module has ``NAME``, ``TITLE``, ``jobs(config) -> list[Job]`` (the jobs it needs; shared jobs are merged) and
``summarise_runs(config, runs) -> MeasurementResult`` (its rows of the table from those jobs' runs).
"""

from smddp_compat.bench.measurements import (
    bandwidth, compression, keras3, memory, overhead, profile, scaling, small_tensors, startup, strategies)

__all__ = [
    "MEASUREMENTS", "bandwidth", "compression", "keras3", "memory", "overhead", "profile", "scaling", "small_tensors", "startup",
    "strategies",
]

#: Name -> module, in the order of the table.
MEASUREMENTS = {
    module.NAME: module
    for module in (overhead, bandwidth, small_tensors, compression, scaling, startup, memory, profile, strategies,
                   keras3)
}
