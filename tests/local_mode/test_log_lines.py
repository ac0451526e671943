"""Whole lines in the logs: mpirun's tagged output reassembled per tag, from recorded torn sequences.

The sequences below were recorded on this machine (Open MPI 4.1.4, the image's version): 4 ranks, unbuffered
Python, each printing ``step=S rank=R checksum=V`` 5 times, run by ``mpirun --tag-output`` directly (the process
backend's MPI engine reads that) and under sagemaker-training 5.1.4's own output watcher (``process.create``, what
the twin's containers print: the tags rewritten to ``[1,mpirank:R,algo-H]``). Each is verbatim, torn lines included.
"""

from __future__ import annotations

import io
import re
import sys
import threading
from pathlib import Path

import pytest
from smddp_compat.image import Engine
from smddp_compat.local_mode.docker._containers import TwinEngine

from smddp_compat.launcher._mpi_group import MpirunOutput, TaggedLines
from smddp_compat.launcher._supervisor import ProcessSpec

# mpirun --tag-output, raw (recorded run 4 of 8): rank 3's first text and rank 0's last line share a line.
RAW_MPIRUN = b"""[1,0]<stdout>:step=1 rank=0 checksum=-3.4567[1,0]<stdout>:
[1,0]<stdout>:step=2 rank=0 checksum=-6.9134[1,0]<stdout>:
[1,0]<stdout>:step=3 rank=0 checksum=-10.3701[1,0]<stdout>:
[1,0]<stdout>:step=4 rank=0 checksum=-13.8268[1,0]<stdout>:
[1,3]<stdout>:step=1 rank=3 checksum=-13.8268[1,0]<stdout>:step=5 rank=0 checksum=-17.2835
[1,3]<stdout>:
[1,3]<stdout>:step=2 rank=3 checksum=-27.6536
[1,3]<stdout>:step=3 rank=3 checksum=-41.4804
[1,3]<stdout>:step=4 rank=3 checksum=-55.3072
[1,3]<stdout>:step=5 rank=3 checksum=-69.1340
[1,1]<stdout>:step=1 rank=1 checksum=-6.9134
[1,2]<stdout>:step=1 rank=2 checksum=-10.3701
[1,1]<stdout>:step=2 rank=1 checksum=-13.8268
[1,1]<stdout>:step=3 rank=1 checksum=-20.7402
[1,1]<stdout>:step=4 rank=1 checksum=-27.6536
[1,2]<stdout>:step=2 rank=2 checksum=-20.7402
[1,1]<stdout>:step=5 rank=1 checksum=-34.5670
[1,2]<stdout>:step=3 rank=2 checksum=-31.1103
[1,2]<stdout>:step=4 rank=2 checksum=-41.4804
[1,2]<stdout>:step=5 rank=2 checksum=-51.8505
"""

# The same under sagemaker-training's watcher (recorded runs 5 and 6 of 6, spliced): rank 2's step 2 waits three
# lines for its newline; rank 1 and rank 0 lines end with the tag that carries their newline.
TOOLKIT = b"""[1,mpirank:0,algo-1]<stdout>:step=1 rank=0 checksum=-3.4567
[1,mpirank:2,algo-2]<stdout>:step=1 rank=2 checksum=-10.3701
[1,mpirank:2,algo-2]<stdout>:step=2 rank=2 checksum=-20.7402[1,mpirank:0,algo-1]<stdout>:step=2 rank=0 checksum=-6.9134
[1,mpirank:0,algo-1]<stdout>:step=3 rank=0 checksum=-10.3701
[1,mpirank:2,algo-2]<stdout>:
[1,mpirank:1,algo-1]<stdout>:step=1 rank=1 checksum=-6.9134[1,mpirank:1,algo-1]<stdout>:
[1,mpirank:0,algo-1]<stdout>:step=4 rank=0 checksum=-13.8268[1,mpirank:0,algo-1]<stdout>:
[1,mpirank:1,algo-1]<stdout>:step=2 rank=1 checksum=-13.8268[1,mpirank:1,algo-1]<stdout>:
2026-11-24 09:59:01,123 sagemaker-training-toolkit INFO     Done waiting for a return code. Received 0
"""

LINE = re.compile(r"^step=(\d) rank=(\d) checksum=(-[0-9.]+)$")


def _value(rank: int, step: int) -> float:
    return round(-3.4567 * (rank + 1) * step, 4)


def _specs(count: int) -> list[ProcessSpec]:
    return [ProcessSpec(argv=["x"], env={}, label=f"algo-1,{rank}", host="algo-1") for rank in range(count)]


def test_the_process_backends_mpirun_router_gives_every_rank_line_whole() -> None:
    output = MpirunOutput(_specs(4))
    routed = [item for line in RAW_MPIRUN.decode().splitlines() for item in output.route(line)]
    routed += output.route(None)
    by_rank: dict[int, list[tuple[int, float]]] = {}
    for label, text, _log in routed:
        assert label.startswith("algo-1,"), (label, text)
        if text:
            match = LINE.match(text)
            assert match, f"not a whole line: {text!r}"
            step, rank, value = int(match[1]), int(match[2]), float(match[3])
            assert label == f"algo-1,{rank}"
            by_rank.setdefault(rank, []).append((step, value))
    assert by_rank == {rank: [(step, _value(rank, step)) for step in range(1, 6)] for rank in range(4)}


def test_tagged_lines_joins_the_toolkits_torn_lines_under_their_own_tags() -> None:
    joined = TaggedLines()
    lines = [(tag.group(0) if tag else "", text) for line in TOOLKIT.decode().splitlines()
             for tag, text in joined.feed(line)]
    lines += [(tag.group(0) if tag else "", text) for tag, text in joined.feed(None)]
    assert lines == [
        ("[1,mpirank:0,algo-1]<stdout>:", "step=1 rank=0 checksum=-3.4567"),
        ("[1,mpirank:2,algo-2]<stdout>:", "step=1 rank=2 checksum=-10.3701"),
        ("[1,mpirank:0,algo-1]<stdout>:", "step=2 rank=0 checksum=-6.9134"),
        ("[1,mpirank:0,algo-1]<stdout>:", "step=3 rank=0 checksum=-10.3701"),
        ("[1,mpirank:2,algo-2]<stdout>:", "step=2 rank=2 checksum=-20.7402"),
        ("[1,mpirank:1,algo-1]<stdout>:", "step=1 rank=1 checksum=-6.9134"),
        ("[1,mpirank:0,algo-1]<stdout>:", "step=4 rank=0 checksum=-13.8268"),
        ("[1,mpirank:1,algo-1]<stdout>:", "step=2 rank=1 checksum=-13.8268"),
        ("", "2026-11-24 09:59:01,123 sagemaker-training-toolkit INFO     Done waiting for a return code. Received 0"),
    ]
    # A rank's text still waiting for its newline when the output ends is given back, whole as it is.
    ended = TaggedLines()
    fed = ended.feed("[1,mpirank:3,algo-2]<stdout>:last=1.5[1,mpirank:0,algo-1]<stdout>:x")
    assert [(tag.group(1), text) for tag, text in fed if tag is not None] == [("0", "x")]
    assert [(tag.group(1), text) for tag, text in ended.feed(None)] == [("3", "last=1.5")]


def _fake_docker(tmp_path: Path, recorded: bytes) -> Engine:
    """A docker CLI whose ``logs --follow`` prints ``recorded`` (the container's output, as recorded)."""
    data = tmp_path / "recorded.bin"
    data.write_bytes(recorded)
    docker = tmp_path / "docker"
    docker.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(open({str(data)!r}, 'rb').read())\n")
    docker.chmod(0o755)
    return Engine(docker=str(docker), server_version="test", docker_host="")


@pytest.mark.processes
def test_the_twins_log_pump_writes_every_rank_line_whole_to_the_log_the_console_and_the_watch(tmp_path: Path) -> None:
    engine = TwinEngine(_fake_docker(tmp_path, TOOLKIT), "job")
    console, seen, log = io.StringIO(), [], tmp_path / "algo-1.log"
    lock = threading.Lock()

    def watch(line: str) -> None:
        with lock:
            seen.append(line)

    engine.follow_logs("algo-1", console, log, on_line=watch)
    engine.wait_for_logs()
    written = log.read_text().splitlines()
    assert written == seen
    assert written[4] == "[1,mpirank:2,algo-2]<stdout>:step=2 rank=2 checksum=-20.7402"
    torn = re.compile(r".\[1,mpirank:\d,algo-\d\]<stdout>:")
    assert not [line for line in written if torn.search(line)]
    ranks = [LINE.match(line.split(">:", 1)[1]) for line in written if ">:" in line]
    assert all(ranks) and len(ranks) == 8
    assert console.getvalue().splitlines()[2] == "[algo-1] [1,mpirank:0,algo-1]<stdout>:step=2 rank=0 checksum=-6.9134"


@pytest.mark.processes
def test_the_pump_survives_a_failing_watch_and_a_closed_console(tmp_path: Path) -> None:
    engine = TwinEngine(_fake_docker(tmp_path, TOOLKIT), "job")
    console = io.StringIO()
    console.close()  # writes raise ValueError: the console is dropped, the log goes on

    def broken(_line: str) -> None:
        raise RuntimeError("a bug in the watch")

    engine.follow_logs("algo-1", console, tmp_path / "algo-1.log", on_line=broken)
    engine.wait_for_logs()
    assert len((tmp_path / "algo-1.log").read_text().splitlines()) == 9
