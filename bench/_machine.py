"""A description of the machine and software stack the bench ran on (for the report; no TensorFlow import)."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata

__all__ = ["describe_machine"]


def _proc_value(path: str, name: str) -> str | None:
    """What follows ``name:`` on its first line in ``/proc``'s file `path` (None when absent or unreadable)."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _memory_gib() -> float | None:
    total = _proc_value("/proc/meminfo", "MemTotal:")  # in KiB
    return int(total.split()[0]) / 2**20 if total else None


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _open_mpi() -> str:
    try:
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    first = out.strip().splitlines()[0] if out.strip() else "unknown"
    return first.replace("mpirun (Open MPI) ", "Open MPI ")


def describe_machine() -> dict[str, str | int | float | None]:
    """CPU, cores, memory, load, OS and the versions of the stack."""
    memory = _memory_gib()
    try:
        load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "cpu": _proc_value("/proc/cpuinfo", "model name") or platform.processor() or "unknown CPU",
        "cores": os.cpu_count(),
        "memory_gib": round(memory, 1) if memory else None,
        "load_average_at_start": load,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow"),
        "tf_keras": _version("tf-keras"),
        "horovod": _version("horovod"),
        "mpi": _open_mpi(),
    }
