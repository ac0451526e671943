"""smddp_compat.parameter_server: TF_CONFIG roles, the renamed cluster, errors, the probes and waits (real sockets),
the watch, and ``python -m smddp_compat.parameter_server`` as a real process (no training here)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from smddp_compat import parameter_server as ps
from smddp_compat.cluster import parameter_server_tf_config
from smddp_compat.errors import ConfigurationError

REPO = Path(__file__).resolve().parents[1]
HOSTS = ["algo-1", "algo-2", "algo-3"]
LOCAL = {"SM_HOSTS": '["algo-1","algo-2"]',
         "SMDDP_HOST_ADDRESSES": '{"algo-1":"127.0.0.2","algo-2":"127.0.0.3"}'}


def _sagemaker(current: str, *, ps_task: bool = False) -> dict[str, str]:
    """The environment of a process on a 3-host SageMaker job (TF_CONFIG as the toolkit builds it)."""
    config = parameter_server_tf_config(HOSTS, current, ps_task=ps_task)
    return {"TF_CONFIG": json.dumps(config), "SM_HOSTS": json.dumps(HOSTS), "SM_CURRENT_HOST": current}


def _local_tf_config(task_type: str, index: int, ports: list[int]) -> str:
    master, worker, ps0, ps1 = ports
    return json.dumps({"cluster": {"master": [f"127.0.0.2:{master}"], "ps": [f"127.0.0.2:{ps0}", f"127.0.0.3:{ps1}"],
                                   "worker": [f"127.0.0.3:{worker}"]},
                       "environment": "cloud", "task": {"type": task_type, "index": index}})


# --------------------------------------------------------------------------------------------------- roles


def test_sagemaker_tf_config_gives_each_process_its_role() -> None:
    master = ps.read_tf_config(_sagemaker("algo-1"))
    assert master.role is ps.Role.COORDINATOR
    assert master.task == ps.Task("chief", 0, "algo-1:2222", "algo-1", "master")
    assert master.task.describe() == "coordinator (master 0) at algo-1:2222 (host algo-1)"
    assert master.cluster_spec() == {"chief": ["algo-1:2222"], "worker": ["algo-2:2222", "algo-3:2222"],
                                     "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"]}
    assert master.cluster_spec(as_written=True)["master"] == ["algo-1:2222"]
    assert [t.label for t in master.tasks] == ["coordinator (master 0)", "worker 0", "worker 1", "ps 0", "ps 1", "ps 2"]

    worker = ps.read_tf_config(_sagemaker("algo-3"))
    assert worker.role is ps.Role.WORKER and worker.task is not None
    assert worker.task.describe() == "worker 1 at algo-3:2222 (host algo-3)"
    assert worker.coordinator == master.task
    assert [t.host for t in worker.parameter_servers] == HOSTS

    server = ps.read_tf_config(_sagemaker("algo-2", ps_task=True))
    assert server.role is ps.Role.PS and server.task is not None and server.task.label == "ps 1"


def test_local_mode_addresses_name_their_hosts() -> None:
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("ps", 1, [11, 21, 12, 22])})
    assert config.task is not None and config.task.describe() == "ps 1 at 127.0.0.3:22 (host algo-2)"
    assert config.coordinator is not None
    assert config.coordinator.describe() == "coordinator (master 0) at 127.0.0.2:11 (host algo-1)"
    unknown = ps.read_tf_config({"TF_CONFIG": _local_tf_config("worker", 0, [11, 21, 12, 22])})
    assert unknown.task is not None and unknown.task.describe() == "worker 0 at 127.0.0.3:21"


def test_plain_chief_tf_config_and_single() -> None:
    plain = {"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1"]},
             "task": {"type": "worker", "index": "1"}}
    config = ps.read_tf_config({"TF_CONFIG": json.dumps(plain)})
    assert config.role is ps.Role.WORKER and config.task == ps.Task("worker", 1, "h2:1", None, "worker")
    assert config.cluster_spec(as_written=True) == config.cluster_spec() == {
        "chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1"]}
    chief = ps.read_tf_config({"TF_CONFIG": json.dumps({**plain, "task": {"type": "chief", "index": 0}})})
    assert chief.role is ps.Role.COORDINATOR and chief.task is not None and chief.task.label == "coordinator (chief 0)"

    assert ps.read_tf_config({}).role is ps.Role.SINGLE
    assert ps.read_tf_config({"TF_CONFIG": "  "}).role is ps.Role.SINGLE
    mwms = {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}
    assert ps.read_tf_config({"TF_CONFIG": json.dumps(mwms)}).role is ps.Role.SINGLE
    one_host = parameter_server_tf_config(["algo-1"], "algo-1")  # the toolkit passes none; a master alone is single
    assert ps.read_tf_config({"TF_CONFIG": json.dumps(one_host)}).role is ps.Role.SINGLE


BAD = [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"task": {"type": "worker", "index": 0}}', "has no 'cluster' object"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"], "worker": ["c:1"], "boss": ["d:1"]}, "task": {"type": "ps"}}',
     "names the job(s) ['boss']"),
    ('{"cluster": {"master": ["a:1"], "chief": ["x:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps"}}',
     "has both a master and a chief job"),
    ('{"cluster": {"ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps", "index": 0}}',
     "has parameter servers but no master (or chief) task"),
    ('{"cluster": {"master": ["a:1", "a:2"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps"}}',
     "lists 2 master tasks"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"]}, "task": {"type": "ps", "index": 0}}',
     "has parameter servers but no worker task"),
    ('{"cluster": {"master": ["a"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps", "index": 0}}',
     "task master 0 has the address 'a', not 'host:port'"),
    ('{"cluster": {"master": ["a:99999"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps", "index": 0}}',
     "the port must be 1..65535"),
    ('{"cluster": {"master": ["a:1"], "ps": ["a:1"], "worker": ["c:1"]}, "task": {"type": "ps", "index": 0}}',
     "gives ps 0 the address 'a:1' of master 0"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}}', "has no 'task' object"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "ps", "index": true}}',
     "has the task index True, not an integer"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "worker", "index": 3}}',
     "makes this process task 'worker' 3, which its cluster does not list"),
    ('{"cluster": {"master": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "chief", "index": 0}}',
     "makes this process a chief, but the cluster's coordinator job is master"),
    (('{"cluster": {"chief": ["a:1"], "ps": ["b:1"], "worker": ["c:1"], "evaluator": ["e:1"]}, '
      '"task": {"type": "evaluator", "index": 0}}'), "makes this process an evaluator"),
]


@pytest.mark.parametrize("raw, problem", BAD)
def test_malformed_tf_config_is_named_with_its_fix(raw: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ps.read_tf_config({"TF_CONFIG": raw})
    error = caught.value
    assert error.field == "TF_CONFIG" and error.value == raw
    assert problem in str(error)
    assert str(error).startswith(f"TF_CONFIG={raw!r}: ") and ". Fix: " in str(error)


def test_start_timeout_variable() -> None:
    assert ps.start_timeout_from_environ({}) == ps.DEFAULT_START_TIMEOUT_SECONDS
    assert ps.start_timeout_from_environ({ps.START_TIMEOUT_VARIABLE: "2.5"}) == 2.5
    for bad in ("0", "-3", "soon", "inf", "nan"):
        with pytest.raises(ConfigurationError, match=rf"SMDDP_PS_START_TIMEOUT_SECONDS='{bad}': is not a number of "
                                                     r"seconds > 0\. Fix: give e\.g\. 900"):
            ps.start_timeout_from_environ({ps.START_TIMEOUT_VARIABLE: bad})


def test_cluster_resolver_renames_master_to_chief() -> None:
    resolver = ps.cluster_resolver(ps.read_tf_config(_sagemaker("algo-1")))
    assert resolver.cluster_spec().as_dict() == {
        "chief": ["algo-1:2222"], "worker": ["algo-2:2222", "algo-3:2222"],
        "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"]}
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("chief", 0, "grpc")
    with pytest.raises(ConfigurationError, match=r"TF_CONFIG=None: describes no parameter-server cluster, which "
                                                 r"cluster_resolver\(\) needs"):
        ps.cluster_resolver(ps.read_tf_config({}))


# ------------------------------------------------------------------------------------------ probes and waits


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@contextmanager
def _listening(address: str, *, answer: bool = True) -> Iterator[socket.socket]:
    """A TCP listener at `address`; with `answer`, a thread that answers each connection with a few bytes (as a
    gRPC server answers the HTTP/2 preface), else connections are only queued by the kernel (a stopped process)."""
    host, port = address.rsplit(":", 1)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, int(port)))
    server.listen(16)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    thread = threading.Thread(target=serve, daemon=True)
    if answer:
        thread.start()
    try:
        yield server
    finally:
        stop.set()
        if answer:
            thread.join(timeout=5)
        server.close()


def test_probe_tells_answering_silent_and_refused_apart() -> None:
    address = f"127.0.0.2:{_free_ports(1)[0]}"
    assert ps.probe(address, timeout=0.5) == ps.REFUSED and not ps.accepts_connections(address, 0.5)
    with _listening(address):
        assert ps.probe(address, timeout=0.5) == ps.ANSWERS and ps.accepts_connections(address, 0.5)
    with _listening(address, answer=False):
        assert ps.probe(address, timeout=0.5) == ps.SILENT and ps.accepts_connections(address, 0.5)


def test_wait_for_coordinator_returns_once_it_came_and_went() -> None:
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("worker", 0, ports)})
    coordinator = f"127.0.0.2:{ports[0]}"
    outcome: list[str] = []
    waiter = threading.Thread(target=lambda: outcome.append(ps.wait_for_coordinator(
        config, start_timeout=30, timeout_field="--start-timeout", poll_seconds=0.1)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive(), "returned before the coordinator ever listened"
    with _listening(coordinator):
        time.sleep(0.6)
        assert waiter.is_alive(), "returned while the coordinator listens"
    waiter.join(timeout=5)
    assert outcome == ["finished"]
    assert ps.wait_for_coordinator(config, start_timeout=30, timeout_field="x", poll_seconds=0.1,
                                   should_stop=lambda: True) == "stopped"


def test_wait_for_coordinator_gives_up_on_a_silent_coordinator() -> None:
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("worker", 0, ports)})
    with _listening(f"127.0.0.2:{ports[0]}", answer=False), pytest.raises(ps.TaskLostError) as caught:
        ps.wait_for_coordinator(config, start_timeout=5, timeout_field="--start-timeout", poll_seconds=0.1,
                                silent_limit=0.5, silent_field="--task-timeout")
    assert str(caught.value).startswith(
        f"worker 0 at 127.0.0.3:{ports[1]} (host algo-2): the coordinator (master 0) at 127.0.0.2:{ports[0]} (host "
        "algo-1) has accepted connections without answering for 0.5 s (stopped or hung)")
    assert str(caught.value).endswith("raise --task-timeout.")


def test_wait_for_coordinator_times_out_naming_its_address() -> None:
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("ps", 1, ports)})
    started = time.monotonic()
    with pytest.raises(ps.CoordinatorUnreachableError) as caught:
        ps.wait_for_coordinator(config, start_timeout=0.5, timeout_field="SMDDP_PS_START_TIMEOUT_SECONDS",
                                poll_seconds=0.1)
    assert time.monotonic() - started < 3
    assert str(caught.value).startswith(
        f"ps 1 at 127.0.0.3:{ports[3]} (host algo-2): the coordinator (master 0) at 127.0.0.2:{ports[0]} (host algo-1) "
        "did not accept connections within 0.5 s (SMDDP_PS_START_TIMEOUT_SECONDS). Fix: ")
    assert caught.value.rank == "coordinator (master 0)" and caught.value.host == "algo-1"


def test_a_server_told_of_its_start_timeout_waits_on_for_a_late_coordinator() -> None:
    """The parameter server's wait: the start timeout names the coordinator once, and the wait goes on (a job's
    scripts may never use the servers, or connect late)."""
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("ps", 1, ports)})
    told: list[ps.CoordinatorUnreachableError] = []
    outcome: list[str] = []
    waiter = threading.Thread(target=lambda: outcome.append(ps.wait_for_coordinator(
        config, start_timeout=0.3, timeout_field="SMDDP_PS_START_TIMEOUT_SECONDS", poll_seconds=0.1,
        on_start_timeout=told.append)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not told and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    assert waiter.is_alive() and len(told) == 1, told
    assert str(told[0]).startswith(f"ps 1 at 127.0.0.3:{ports[3]} (host algo-2): the coordinator (master 0) at "
                                   f"127.0.0.2:{ports[0]} (host algo-1) did not accept connections within 0.3 s")
    with _listening(f"127.0.0.2:{ports[0]}"):
        time.sleep(0.6)
    waiter.join(timeout=5)
    assert outcome == ["finished"] and len(told) == 1


def test_wait_for_tasks_names_the_missing_ones() -> None:
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("master", 0, ports)})
    with _listening(f"127.0.0.3:{ports[1]}"), _listening(f"127.0.0.2:{ports[2]}"):
        with pytest.raises(ps.TaskUnreachableError, match=rf"^ps 1 at 127.0.0.3:{ports[3]} \(host algo-2\) did not "
                                                          r"accept connections within 0.3 s \(--start-timeout\)"):
            ps.wait_for_tasks(config, timeout=0.3, timeout_field="--start-timeout", poll_seconds=0.1)
        with _listening(f"127.0.0.3:{ports[3]}"):
            ps.wait_for_tasks(config, timeout=5, timeout_field="--start-timeout", poll_seconds=0.1)


def test_watch_names_a_lost_task_and_a_stalled_phase() -> None:
    ports = _free_ports(4)
    config = ps.read_tf_config({**LOCAL, "TF_CONFIG": _local_tf_config("master", 0, ports)})
    with _listening(f"127.0.0.3:{ports[1]}"), _listening(f"127.0.0.2:{ports[2]}"), \
            _listening(f"127.0.0.3:{ports[3]}"):
        watch = ps.ClusterWatch(config, lost_after=5, on_failure=lambda error: None, probe_seconds=0.2,
                                limit_field="--task-timeout")
        assert watch.check(now=0.0) is None
        watch.phase("training steps 1-10", 5)
        assert watch.check() is None
        stalled = watch.check(now=time.monotonic() + 6)
        assert stalled is not None and str(stalled).startswith(
            "training steps 1-10 did not finish within 5 s; every task (worker 0, ps 0, ps 1) answers. The "
            "coordinator stops the job. Fix: look at the hosts' logs; if the cluster is merely slow, raise "
            "--task-timeout.")
        watch.idle()
    # Every task gone: the first round notes it, a round `lost_after` later fails the job naming each.
    assert watch.check(now=100.0) is None
    lost = watch.check(now=105.0)
    assert lost is not None and lost.rank == "worker 0" and lost.host == "algo-2"
    assert str(lost).startswith(f"worker 0 at 127.0.0.3:{ports[1]} (host algo-2) has refused connections for 5 s "
                                f"(its process has ended); ps 0 at 127.0.0.2:{ports[2]} (host algo-1) has refused")

    # The thread calls on_failure once, within lost_after and a probe round.
    failures: list[ps.TaskLostError] = []
    with ps.ClusterWatch(config, lost_after=0.5, on_failure=failures.append, probe_seconds=0.1):
        deadline = time.monotonic() + 5
        while not failures and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(failures) == 1 and failures[0].rank == "worker 0"


# ------------------------------------------------------------------------------- python -m smddp_compat.parameter_server


def _ps_command(env: dict[str, str], **kwargs: object) -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "SM_HOSTS", "SMDDP_HOST_ADDRESSES")}
    return subprocess.Popen([sys.executable, "-m", "smddp_compat.parameter_server"], env={**base, **env},
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.processes
@pytest.mark.parametrize("env, message", [
    ({}, ("TF_CONFIG=None: describes no parameter-server task; this command runs a parameter server. Fix: give it "
          "the TF_CONFIG of the host's ps task")),
    ({"TF_CONFIG": _local_tf_config("worker", 0, [11, 21, 12, 22])},
     "describes worker 0; this command runs a parameter server"),
    ({"TF_CONFIG": _local_tf_config("ps", 0, [11, 21, 12, 22]), "SMDDP_PS_START_TIMEOUT_SECONDS": "-1"},
     "SMDDP_PS_START_TIMEOUT_SECONDS='-1': is not a number of seconds > 0"),
    ({"TF_CONFIG": "{oops"}, "TF_CONFIG='{oops': is not valid JSON"),
])
def test_parameter_server_command_refuses_bad_settings(env: dict[str, str], message: str) -> None:
    process = _ps_command({**env, "TF_CPP_MIN_LOG_LEVEL": "2"})
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert "parameter server: ConfigurationError: " in stderr and message in stderr, stderr


@pytest.mark.processes
def test_parameter_server_command_serves_until_the_coordinator_is_gone() -> None:
    """A real TensorFlow parameter server (the master-named cluster, as the toolkit starts it): it exits 0 only after
    the coordinator's endpoint was reachable and then stopped; without a coordinator, it names it after the start
    timeout and serves on until stopped (SIGTERM: 143), as the toolkit's server serves until its host ends."""
    ports = _free_ports(4)
    env = {**LOCAL, "TF_CONFIG": _local_tf_config("ps", 1, ports), "SMDDP_PS_START_TIMEOUT_SECONDS": "60",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = _ps_command(env)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"ps 1 at 127.0.0.3:{ports[3]} (host algo-2): serving; waiting for the coordinator "
                                f"(master 0) at 127.0.0.2:{ports[0]} (host algo-1) (named if it has not started in "
                                "60 s)")
        assert ps.probe(f"127.0.0.3:{ports[3]}") == ps.ANSWERS  # TensorFlow's gRPC server is up
        with _listening(f"127.0.0.2:{ports[0]}"):
            time.sleep(2.5)
            assert process.poll() is None, "exited while the coordinator listens"
        assert process.wait(timeout=30) == 0, process.stderr.read() if process.stderr else ""
        assert "ps 1 at" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    lonely = _ps_command({**env, "SMDDP_PS_START_TIMEOUT_SECONDS": "2"})
    try:
        assert lonely.stderr is not None
        told = next(line for line in lonely.stderr if line.startswith("parameter server: "))
        assert told.startswith(f"parameter server: ps 1 at 127.0.0.3:{ports[3]} (host algo-2): the coordinator "
                               f"(master 0) at 127.0.0.2:{ports[0]} (host algo-1) did not accept connections within "
                               "2 s (SMDDP_PS_START_TIMEOUT_SECONDS)"), told
        assert told.rstrip().endswith("It serves on until stopped: a script that trains without the parameter "
                                      "servers never connects, which is no failure."), told
        time.sleep(2)
        assert lonely.poll() is None, "a server never contacted must not fail"
        lonely.send_signal(signal.SIGTERM)
        assert lonely.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if lonely.poll() is None:
            lonely.kill()
            lonely.wait()


@pytest.mark.processes
def test_import_needs_no_tensorflow() -> None:
    code = "import sys, smddp_compat.parameter_server; print([m for m in ('tensorflow', 'numpy') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                         check=False)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
