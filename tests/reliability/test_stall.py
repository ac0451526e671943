"""Stall detection: a rank that waits too long in a collective is reported (naming the collective and the ranks
that are not in it) and ended, so the job stops.

Horovod 0.28.1's own stall inspector is inert under the Gloo controller (its Gloo controller never sizes the list
of global ranks the inspector loops over), so smddp_compat's watchdog (smddp_compat/tensorflow/_stall.py) does it.
"""

from __future__ import annotations

import io
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tensorflow as tf

from tests.reliability.conftest import PROGRAMS, alive, launch, quiet_env, smddprun

from smddp_compat.errors import UsageError
from smddp_compat.tensorflow import _ops, _stall


def _me(rank: int = 0, size: int = 3) -> "_stall.Identity":
    return _stall.Identity(rank=rank, size=size, host="algo-1")


def _write_status(directory: Path, rank: int, **fields: object) -> None:
    status = {"rank": rank, "host": f"algo-{rank + 1}", "pid": 1000 + rank, "state": "running", "collective": None,
              "completed": 0, "updated": time.time()}
    status.update(fields)
    (directory / f"rank-{rank}.json").write_text(json.dumps(status))


def _watchdog(tmp_path: Path, warning: float = 2.0, timeout: float | None = 4.0, directory: bool = True):
    exits: list[int] = []
    out = io.StringIO()
    config = _stall.StallConfig(directory=str(tmp_path) if directory else None, warning_seconds=warning,
                                timeout_seconds=timeout)
    dog = _stall.StallWatchdog(config, identity=_me, stream=out, exit_process=exits.append)
    return dog, exits, out


# -- configuration -------------------------------------------------------------------------------------------------

def test_configuration_from_the_environment() -> None:
    assert _stall.StallConfig.from_environ({}) is None
    config = _stall.StallConfig.from_environ({"SMDDP_STALL_DIR": "/d"})
    assert (config.directory, config.warning_seconds, config.timeout_seconds) == ("/d", 60.0, None)
    config = _stall.StallConfig.from_environ({"SMDDP_STALL_TIMEOUT_SECONDS": "8"})
    assert (config.directory, config.warning_seconds, config.timeout_seconds) == (None, 4.0, 8.0)
    assert 0.05 <= config.poll_seconds <= 1.0
    with pytest.raises(UsageError, match=r"SMDDP_STALL_TIMEOUT_SECONDS=2 is shorter than "
                                                 r"SMDDP_STALL_WARNING_SECONDS=5.*raise the timeout"):
        _stall.StallConfig.from_environ({"SMDDP_STALL_WARNING_SECONDS": "5", "SMDDP_STALL_TIMEOUT_SECONDS": "2"})
    with pytest.raises(UsageError, match=r"SMDDP_STALL_TIMEOUT_SECONDS='soon' must be a positive number"):
        _stall.StallConfig.from_environ({"SMDDP_STALL_TIMEOUT_SECONDS": "soon"})


def test_smddprun_flags_become_the_watchdog_environment() -> None:
    from smddp_compat.launcher._cli import stall_watchdog_env

    assert stall_watchdog_env(None, None, "/d") == {"SMDDP_STALL_DIR": "/d"}
    assert stall_watchdog_env(3, 8, "/d") == {"SMDDP_STALL_DIR": "/d", "SMDDP_STALL_WARNING_SECONDS": "3",
                                              "SMDDP_STALL_TIMEOUT_SECONDS": "8"}
    assert stall_watchdog_env(None, 8, "/d")["SMDDP_STALL_WARNING_SECONDS"] == "4"
    config = _stall.StallConfig.from_environ(stall_watchdog_env(2.5, 6, "/d"))
    assert (config.directory, config.warning_seconds, config.timeout_seconds) == ("/d", 2.5, 6.0)


# -- the watchdog, driven by hand (no thread, no Horovod) -----------------------------------------------------------

def test_stalled_rank_is_reported_then_ended_naming_tensor_and_missing_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output_dir = tmp_path / "output"
    monkeypatch.setenv("SM_OUTPUT_DIR", str(output_dir))
    status_dir = tmp_path / "status"
    status_dir.mkdir()
    dog, exits, out = _watchdog(status_dir)
    now = time.time()
    # rank 1 left the collectives behind (it sleeps); rank 2 waits in the same one as rank 0.
    _write_status(status_dir, 1, completed=7, last_completed="allreduce", last_completed_at=now - 12)
    description = "allreduce of tensor 'gradients/dense_1/kernel'"
    _write_status(status_dir, 2, state="waiting", collective=description, since=now - 3)
    dog.enter("broadcast (root rank 0)")
    dog.leave(0)
    token = dog.enter(description)
    started = dog.active[token][1]

    dog.check(started + 1.0)  # below the warning: silent, but the status is published
    assert out.getvalue() == "" and exits == []
    mine = json.loads((status_dir / "rank-0.json").read_text())
    assert mine["collective"] == description and mine["state"] == "waiting" and mine["completed"] == 1
    assert mine["last_completed"] == "broadcast (root rank 0)"

    dog.check(started + 2.5)  # warning, once
    dog.check(started + 3.0)
    warning = out.getvalue()
    assert warning.count("WARNING") == 1, warning
    assert "rank 0 (host algo-1) has waited 2.5 s in allreduce of tensor 'gradients/dense_1/kernel'" in warning
    assert "ranks not in it: 1." in warning
    assert "rank 1 (host algo-2, pid 1001): not in any collective; it completed 7, the last (allreduce) 12" in warning
    assert "rank 2 (" not in warning
    assert exits == []

    dog.check(started + 4.2)  # timeout: reason printed and written, process ended with the stall code
    assert exits == [_stall.STALL_EXIT_CODE]
    reason = (output_dir / "failure").read_text()
    assert reason.startswith("Stalled collective: rank 0 (host algo-1) has waited 4.2 s in allreduce of tensor "
                             "'gradients/dense_1/kernel'")
    assert "ranks not in it: 1." in reason and "SMDDP_STALL_TIMEOUT_SECONDS=4 s" in reason
    assert "smddp_compat: ERROR: " + reason.strip() in out.getvalue()
    assert list(output_dir.iterdir()) == [output_dir / "failure"]  # written atomically, no temporary file left


def test_what_each_missing_rank_does_is_described(tmp_path: Path) -> None:
    now = time.time()
    me = _stall.Identity(rank=0, size=6, host="algo-1")
    _write_status(tmp_path, 1, state="waiting", collective="broadcast (root rank 0)", since=now - 9)
    _write_status(tmp_path, 2, state="finished")
    _write_status(tmp_path, 3, updated=now - 60, collective="allreduce")
    _write_status(tmp_path, 4)
    _write_status(tmp_path, 5, state="waiting", collective="allreduce", since=now - 1)
    missing, lines = _stall.describe_missing_ranks(str(tmp_path), me, "allreduce", now_wall=now)
    assert missing == [1, 2, 3, 4]
    assert lines[0] == "rank 1 (host algo-2, pid 1001): waits in broadcast (root rank 0) instead, for 9.0 s"
    assert lines[1] == "rank 2 (host algo-3, pid 1002): has finished its script"
    assert lines[2] == "rank 3 (host algo-4, pid 1003): no heartbeat for 60.0 s (hung or dead)"
    assert lines[3] == "rank 4 (host algo-5, pid 1004): not in any collective; it has not entered one yet"
    (tmp_path / "rank-1.json").unlink()
    missing, lines = _stall.describe_missing_ranks(str(tmp_path), me, "allreduce", now_wall=now)
    assert lines[0].startswith("rank 1: no status (it has not initialized yet, or its host does not share")


def test_without_a_status_directory_the_rank_is_still_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SM_OUTPUT_DIR", raising=False)
    dog, exits, out = _watchdog(tmp_path, warning=1.0, timeout=2.0, directory=False)
    token = dog.enter("allgather")
    dog.check(dog.active[token][1] + 2.0)
    assert exits == [_stall.STALL_EXIT_CODE]
    assert "the other ranks are unknown (SMDDP_STALL_DIR is not set" in out.getvalue()
    assert list(tmp_path.iterdir()) == []


def test_a_finished_collective_is_not_a_stall(tmp_path: Path) -> None:
    dog, exits, out = _watchdog(tmp_path, warning=1.0, timeout=2.0)
    token = dog.enter("allreduce")
    started = dog.active[token][1]
    dog.leave(token)
    dog.check(started + 10)
    assert exits == [] and out.getvalue() == ""
    assert json.loads((tmp_path / "rank-0.json").read_text())["state"] == "running"
    dog.stop()
    assert json.loads((tmp_path / "rank-0.json").read_text())["state"] == "finished"


def test_watchdog_thread_ends_a_stalled_block_on_its_own(tmp_path: Path) -> None:
    exits: list[int] = []
    out = io.StringIO()
    config = _stall.StallConfig(directory=str(tmp_path), warning_seconds=0.2, timeout_seconds=0.5)
    dog = _stall.StallWatchdog(config, identity=_me, stream=out, exit_process=exits.append)
    dog.start()
    try:
        dog.enter("train_step")
        deadline = time.monotonic() + 10
        while not exits and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        dog.stop()
    assert exits == [_stall.STALL_EXIT_CODE]
    assert "WARNING: rank 0 (host algo-1) has waited" in out.getvalue()
    assert "in train_step" in out.getvalue()


def _best_seconds_per_call(body: Callable[[int], None], calls: int = 20_000, rounds: int = 5) -> float:
    """The fastest of ``rounds`` timings of ``body(calls)``, per call: the cost without the machine's other load."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        body(calls)
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def test_hot_path_cost_per_eager_collective(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What every eager collective pays with the watchdog on: ``_stall.enter`` (description included) and
    ``_stall.leave``, as ``collective_errors`` calls them. Printed with ``-s``; _stall.py quotes the figure."""
    dog, _, _ = _watchdog(tmp_path)
    monkeypatch.setattr(_stall, "_watchdog", dog)
    monkeypatch.setattr(_stall, "_configured", True)

    def collectives(calls: int) -> None:
        for _ in range(calls):
            _stall.leave(_stall.enter("allreduce", "3 gradients", "grad_0"))

    def bare_dict(calls: int) -> None:
        table: dict[int, tuple[str, float]] = {}
        for key in range(calls):
            table[key] = ("allreduce of tensor 'grad_0' (3 gradients)", time.monotonic())
            table.pop(key, None)

    per_call = _best_seconds_per_call(collectives)
    baseline = _best_seconds_per_call(bare_dict)
    print(f"stall watchdog: {per_call * 1e6:.2f} us per eager collective (enter + leave; a bare dict insert + pop: "
          f"{baseline * 1e6:.2f} us)")
    assert per_call < 5e-6  # measured 0.6-1.2 us on the 2-core test machine under load
    assert dog.active == {} and dog.completed == 5 * 20_000


def test_watch_is_a_no_op_when_the_watchdog_is_off() -> None:
    if _stall.active_watchdog() is not None:
        pytest.skip("this test process runs with SMDDP_STALL_* set")
    with _stall.watch("train_step"):
        pass
    assert _stall.enter("allreduce") is None


# -- real ranks under smddprun --------------------------------------------------------------------------------------

@pytest.mark.processes
@pytest.mark.parametrize("engine, mode", [("gloo", "graph"), ("mpi", "eager")])
def test_smddprun_reports_the_stall_and_ends_the_job(tmp_path: Path, private_tmp: Path, engine: str, mode: str) -> None:
    """Inside a ``tf.function`` (where Horovod's own inspector is inert, under Gloo too), or eagerly: each engine
    and each mode once (the watchdog is the kit's, the same for both engines; each engine ends the job its way)."""
    entered: list[float] = []
    output_dir = tmp_path / "output"
    job = launch(
        smddprun("-np", "2", f"--{engine}", "--timeout", "150", "--grace", "3", "--stall-check-seconds", "2",
                 "--stall-shutdown-seconds", "6", sys.executable, str(PROGRAMS / "stall.py"), mode),
        env=quiet_env(SM_OUTPUT_DIR=str(output_dir)),
        timeout=200,
        on_line=lambda line: entered.extend(float(m) for m in re.findall(r"^\[0\] ENTERING ([0-9.]+)$", line)),
    )
    output = job.output
    assert job.returncode == _stall.STALL_EXIT_CODE, output
    assert entered, output
    stall_to_end = job.ended - entered[0]
    print(f"stall ({mode}): rank 0 entered the collective {stall_to_end:.1f} s before smddprun ended (limit 6 s)")
    assert 6.0 <= stall_to_end < 6.0 + 8.0, output
    assert "[0] smddp_compat: WARNING: rank 0 (host localhost) has waited 2." in output
    assert re.search(r"\[0\] smddp_compat: ERROR: Stalled collective: rank 0 \(host localhost\) has waited 6\.\d s in "
                     r"allreduce of tensor 'gradients/dense_1/kernel'.* for the other ranks; ranks not in it: 1\. \[rank 1 \(host localhost, pid \d+\): "
                     r"not in any collective; it completed 2, the last \(allreduce\) [0-9.]+ s ago\]", output), output
    assert "process [0] on host localhost exited with code 70" in job.stderr
    assert "unreachable" not in output
    failure = (output_dir / "failure").read_text()
    assert failure.startswith("Stalled collective: rank 0 (host localhost)") and "ranks not in it: 1." in failure
    assert alive(job.descendants) == []
    # smddprun removed its status directory (TensorFlow's autograph files of the ended ranks may stay).
    assert [p for p in private_tmp.iterdir() if not p.name.startswith("__autograph_generated_file")] == []


@pytest.mark.processes
@pytest.mark.parametrize("operation, mode, tensor", [
    ("alltoall", "graph", "exchange"), ("reducescatter", "eager", "scattered"), ("allgather", "graph", "gathered"),
])
def test_a_horovod_script_stall_is_reported_and_ended(tmp_path: Path, private_tmp: Path, operation: str, mode: str,
                                                      tensor: str) -> None:
    """A Horovod script whose import line was swapped: Horovod's own collectives (``hvd.alltoall``...), called
    through the Horovod face, report to the watchdog too, so a stall under Gloo ends (Horovod's inspector never
    fires there) and names the collective and the missing rank."""
    entered: list[float] = []
    job = launch(
        smddprun("-np", "2", "--gloo", "--timeout", "150", "--grace", "3", "--stall-check-seconds", "2",
                 "--stall-shutdown-seconds", "6", sys.executable, str(PROGRAMS / "stall.py"), mode, operation),
        timeout=200,
        on_line=lambda line: entered.extend(float(m) for m in re.findall(r"^\[0\] ENTERING ([0-9.]+)$", line)),
    )
    output = job.output
    assert job.returncode == _stall.STALL_EXIT_CODE, output
    assert entered, output
    assert 6.0 <= job.ended - entered[0] < 6.0 + 8.0, output
    assert re.search(rf"\[0\] smddp_compat: ERROR: Stalled collective: rank 0 \(host localhost\) has waited 6\.\d s in "
                     rf"{operation} of tensor '{tensor}'.* for the other ranks; ranks not in it: 1\.", output), output
    assert "unreachable" not in output
    assert alive(job.descendants) == []


@pytest.mark.processes
@pytest.mark.parametrize("flavour", ["keras", "tf_keras"])
def test_collectives_in_tf_function_are_watched_and_finished_ones_are_no_stall(tmp_path: Path, flavour: str) -> None:
    """Each collective that can be traced (single, in a loop, DistributedGradientTape, DistributedOptimizer, Keras
    ``fit``) registers with the watchdog when it runs and leaves it when done, with the names the eager path uses;
    collectives built in a different order on each rank still run concurrently; sleeping past the limit after them
    is no stall."""
    job = launch(
        smddprun("-np", "2", "--gloo", "--timeout", "150", "--stall-check-seconds", "4", "--stall-shutdown-seconds",
                 "8", sys.executable, str(PROGRAMS / "graph_collectives.py")),
        env=quiet_env(RESULT_DIR=str(tmp_path), SLEEP_SECONDS="9",
                      **({"TF_USE_LEGACY_KERAS": "1"} if flavour == "tf_keras" else {})),
        timeout=200,
    )
    assert job.returncode == 0, job.output  # (a warning may come while the other rank still traces a step)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for phases in ranks:
        assert phases.pop("keras") == flavour
        assert {name: (p["completed"], p["open"]) for name, p in phases.items()} == {
            "singles": (5, 0), "loop": (3, 0), "tape": (2, 0), "optimizer": (1, 0), "fit": (4, 0)}
        singles = sorted(phases["singles"]["seen"])
        assert singles[:3] == ["allgather of tensor 'gathered'", "allreduce of tensor 'named'",
                               "broadcast of tensor 'broadcasted' (root rank 0)"]
        assert re.fullmatch(r"grouped_allreduce of tensor 'HorovodGroupedAllreduce_\w+' \(2 tensors\)", singles[3])
        assert re.fullmatch(r"oob_allreduce of tensor 'HorovodAllreduce_\w+'", singles[4])
        assert phases["loop"]["seen"] == ["allreduce of tensor 'looped'"] * 3
        gradients = r"gradient allreduce of tensor '[\w/]*HorovodGroupedAllreduce_\w+' \(4 gradients, bucket 1 of 1\)"
        assert re.fullmatch(gradients, phases["tape"]["seen"][0])
        assert phases["tape"]["seen"][1] == "broadcast_variables (4 variables from rank 0)"
        assert all(re.fullmatch(gradients, seen) for seen in phases["optimizer"]["seen"] + phases["fit"]["seen"])
    assert {k: sorted(p["seen"]) for k, p in ranks[0].items()} == {k: sorted(p["seen"]) for k, p in ranks[1].items()}


@tf.function
def _traced_step(x):
    """One collective of the kit's kind in a ``tf.function`` (``x * 2`` stands for the Horovod op)."""
    with _ops.collective_errors("allreduce", tensor="grad") as watched:
        return watched(x, lambda: x * 2)


def _python_calls(function: Callable) -> int:
    return sum(op.type == "PyFunc" for op in function.get_concrete_function(tf.ones([2])).graph.get_operations())


def test_a_traced_collective_is_watched_each_time_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dog, exits, out = _watchdog(tmp_path)
    monkeypatch.setattr(_stall, "_watchdog", dog)
    monkeypatch.setattr(_stall, "_configured", True)
    step = tf.function(_traced_step.python_function)
    for calls in (1, 2):
        assert step(tf.ones([2])).numpy().tolist() == [2.0, 2.0]
        assert dog.active == {} and dog.completed == calls  # entered and left at run time, once per call
    assert dog.last_completed[0] == "allreduce of tensor 'grad'"  # named as the eager path names it
    assert exits == [] and out.getvalue() == ""
    assert _python_calls(step) == 2
    assert _python_calls(tf.function(_traced_step.python_function, jit_compile=True)) == 0  # XLA runs no Python


def test_collectives_traced_without_the_watchdog_add_nothing_to_the_graph() -> None:
    if _stall.active_watchdog() is not None:
        pytest.skip("this test process runs with SMDDP_STALL_* set")
    assert _traced_step(tf.ones([2])).numpy().tolist() == [2.0, 2.0]
    assert _python_calls(_traced_step) == 0
