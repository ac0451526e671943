"""Runs one local job with the docker backend in its own process, for the Ctrl-C test.

Usage: python interrupt_driver.py SOURCE_DIR OUTPUT_PATH. The job: 2 hosts, every process sleeps 120 s. Exits with the
job's exit code.
"""

import sys
from unittest import mock

import smddp_compat.launcher
from local_mode import JobSpec, run
from local_mode.docker import DockerBackend

backend = DockerBackend(job_name="interrupted")
spec = JobSpec(
    entry_point="fail_or_sleep.py",
    source_dir=sys.argv[1],
    instance_count=2,
    hyperparameters={"sleep": 120, "spawn-child": 1},
    output_path=sys.argv[2],
    job_name="docker-interrupted",
    max_run=300,
)
with mock.patch.object(smddp_compat.launcher, "run_process_group", backend.run_process_group):
    result = run(spec)
sys.exit(result.exit_code)
