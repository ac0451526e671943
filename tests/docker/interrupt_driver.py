"""Runs one local job with the docker backend in its own process, for the Ctrl-C test.

Usage: python interrupt_driver.py SOURCE_DIR OUTPUT_PATH (with the repository root on PYTHONPATH). The job: 2 hosts,
every process sleeps 120 s. Exits with the job's exit code.
"""

import sys

from local_mode import JobSpec
from local_mode.docker import DockerBackend
from tests.docker.docker_job_helpers import run_in_docker

spec = JobSpec(
    entry_point="fail_or_sleep.py",
    source_dir=sys.argv[1],
    instance_count=2,
    hyperparameters={"sleep": 120, "spawn-child": 1},
    output_path=sys.argv[2],
    job_name="docker-interrupted",
    max_run=300,
)
result, _ = run_in_docker(spec, DockerBackend(job_name="interrupted"), live=sys.stdout)
sys.exit(result.exit_code)
