"""kill -9 of one rank of a real TensorFlow job under smddprun ends the whole job within 10 s, with a non-zero
exit, a reason naming the rank and its host, and no process left.

(The launcher's own tests kill plain Python processes; tests/local_mode/test_reliability.py kills a process of a
local job. Here the ranks are TensorFlow + Horovod processes in the middle of all-reduces, on both engines.)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.conftest import PROGRAMS, alive, launch, processes_running, smddprun

pytestmark = pytest.mark.processes

STOP_LIMIT_SECONDS = 10.0


@pytest.mark.parametrize("engine", ["gloo", "mpi"])
def test_kill_9_of_a_training_rank_ends_the_job(private_tmp, engine: str) -> None:
    # A copy of its own: the check that no rank is left looks for the program's path, and the other engine's run
    # of this test may be training at the same time in another pytest-xdist worker.
    program = str(shutil.copy(PROGRAMS / "train_forever.py", private_tmp / f"train_forever_{engine}.py"))
    pids: dict[str, int] = {}
    killed_at: list[float] = []

    def on_line(line: str) -> None:
        match = re.match(r"^\[(\d)\] PID (\d+)$", line)
        if match:
            pids[match.group(1)] = int(match.group(2))
        if line.startswith("[1] STEP 30 ") and not killed_at:
            killed_at.append(time.time())
            os.kill(pids["1"], signal.SIGKILL)

    job = launch(smddprun("-np", "2", f"--{engine}", "--timeout", "240", sys.executable, program), timeout=300,
                 on_line=on_line)
    assert killed_at, job.output
    kill_to_end = job.ended - killed_at[0]
    print(f"rank death ({engine}): kill -9 of rank 1 -> smddprun ended {kill_to_end:.2f} s later")
    assert kill_to_end < STOP_LIMIT_SECONDS, job.output
    assert job.returncode == 128 + signal.SIGKILL, job.output
    assert "smddprun: job failed after" in job.stderr
    assert "process [1] on host localhost was killed by signal SIGKILL; the other processes were stopped" in job.stderr
    assert "[0] STEP" in job.stdout  # rank 0 was training when its peer died
    assert alive(job.descendants) == [], "processes left behind"
    assert processes_running(program) == []
    # Nothing is left in the temporary folder: smddprun's own folders are gone, and so are the files the killed rank's
    # TensorFlow wrote there (autograph's generated source of the tf.function step, removed only at a normal exit).
    assert sorted(p.name for p in private_tmp.iterdir()) == [Path(program).name]


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    """A cgroup v1 memory group of 200 MiB below this process's own (skipped where it cannot be made: no root, or
    cgroup v2 without the memory controller delegated)."""
    try:
        own = next(line.split(":", 2)[2].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if "memory" in line.split(":", 2)[1].split(","))
        group = Path(f"/sys/fs/cgroup/memory{own}") / f"smddp-oom-{os.getpid()}"
        group.mkdir()
    except (StopIteration, OSError) as exc:
        pytest.skip(f"no cgroup v1 memory group can be made here ({exc!r})")
    try:
        (group / "memory.limit_in_bytes").write_text(str(200 << 20))
        with contextlib.suppress(OSError):
            (group / "memory.swappiness").write_text("0")
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_a_rank_the_out_of_memory_killer_ends_is_named_so(memory_cgroup: Path) -> None:
    """A rank allocates more than its memory group holds: the kernel kills it (SIGKILL) and the reason says that it
    was the out-of-memory killer (it used to say only 'killed by signal SIGKILL')."""
    rank = "import os, time\nif os.environ['HOROVOD_RANK'] == '1':\n    x = bytearray(600 << 20)\ntime.sleep(60)\n"
    argv = ["sh", "-c", f'echo $$ > {memory_cgroup / "cgroup.procs"} && exec "$@"', "sh",
            *smddprun("-np", "2", "--gloo", sys.executable, "-c", rank)]
    done = launch(argv, timeout=120)
    assert done.returncode == 128 + signal.SIGKILL, done.output
    assert "process [1] on host localhost was killed by signal SIGKILL" in done.stderr
    assert "the kernel's out-of-memory killer ended 1 process(es) while the job ran" in done.stderr
