"""Rank environments, host lists and the smddprun command line (no TensorFlow needed)."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from smddp_compat import smdistributed_shim
from smddp_compat.errors import UsageError
from smddp_compat.launcher import HorovodRendezvous, HostSlots, assign_ranks, parse_hosts
from smddp_compat.launcher._cli import stall_env, with_shim_on_path


def test_rank_envs_are_host_major_with_local_and_cross_ranks():
    hosts = [HostSlots("algo-1", 2, "127.0.0.2"), HostSlots("algo-2", 2, "127.0.0.3")]
    with HorovodRendezvous(hosts, bind_address="127.0.0.1", timeout=30) as rdzv:
        envs = rdzv.rank_envs()
        port = rdzv.port
        # The server answers on the loopback address it was bound to.
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=5)
    table = [(e["HOROVOD_HOSTNAME"], e["HOROVOD_RANK"], e["HOROVOD_LOCAL_RANK"], e["HOROVOD_LOCAL_SIZE"],
              e["HOROVOD_CROSS_RANK"], e["HOROVOD_CROSS_SIZE"], e["HOROVOD_SIZE"]) for e in envs]
    assert table == [
        ("algo-1", "0", "0", "2", "0", "2", "4"),
        ("algo-1", "1", "1", "2", "0", "2", "4"),
        ("algo-2", "2", "0", "2", "1", "2", "4"),
        ("algo-2", "3", "1", "2", "1", "2", "4"),
    ]
    assert {e["HOROVOD_GLOO_RENDEZVOUS_ADDR"] for e in envs} == {"127.0.0.1"}
    assert {e["HOROVOD_GLOO_RENDEZVOUS_PORT"] for e in envs} == {str(port)}
    assert {e["HOROVOD_CONTROLLER"] for e in envs} == {"gloo"}
    assert {e["HOROVOD_GLOO_TIMEOUT_SECONDS"] for e in envs} == {"30"}


def test_rendezvous_rejects_bad_hosts():
    with pytest.raises(UsageError, match="unique"):
        HorovodRendezvous([HostSlots("a", 1), HostSlots("a", 1)])
    with pytest.raises(UsageError, match="at least one host"):
        HorovodRendezvous([])
    with pytest.raises(UsageError, match="0 slots"):
        HostSlots("a", 0)


def test_parse_and_assign_hosts():
    assert parse_hosts("localhost:2,127.0.0.1") == [HostSlots("localhost", 2), HostSlots("127.0.0.1", 1)]
    assert assign_ranks(parse_hosts("a:2,b:2"), 3) == [HostSlots("a", 2), HostSlots("b", 1)]
    for bad, message in [("a:2,,b", "has no host name"), ("a:two", "not an integer"), ("a:1,a:1", "more than once"),
                         ("", "empty")]:
        with pytest.raises(UsageError, match=message):
            parse_hosts(bad)


def test_shim_goes_first_on_pythonpath():
    env = with_shim_on_path({"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"].split(os.pathsep) == [smdistributed_shim.path(), "/x"]
    assert with_shim_on_path({"PYTHONPATH": "/x"}, enabled=False) == {"PYTHONPATH": "/x"}


@pytest.mark.processes
def test_real_smddp_is_never_shadowed(tmp_path, capsys):
    real = tmp_path / "smdistributed" / "dataparallel"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (tmp_path / "smdistributed" / "__init__.py").write_text("")
    env = with_shim_on_path({"PYTHONPATH": str(tmp_path)}, stream=sys.stdout)
    assert env["PYTHONPATH"] == str(tmp_path)
    assert "real smdistributed.dataparallel is installed" in capsys.readouterr().out
    code = ("import sys; sys.path.insert(0, %r); from smddp_compat import smdistributed_shim as s\n"
            "try:\n    s.activate()\nexcept Exception as e:\n    print(e)") % str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "will not shadow it" in out


def test_stall_env():
    assert stall_env(None, None) == {}
    assert stall_env(5, 20) == {"HOROVOD_STALL_CHECK_TIME_SECONDS": "5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "25"}
    assert stall_env(None, 20)["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "10"


@pytest.mark.processes
def test_smddprun_runs_ranks_with_their_env_and_prefix(tmp_path):
    code = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('HOROVOD_')}))"
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", "-np", "3", "--timeout", "60",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    seen = {}
    for line in proc.stdout.splitlines():
        label, _, payload = line.partition(" ")
        env = json.loads(payload)
        assert label == f"[{env['HOROVOD_RANK']}]"
        seen[env["HOROVOD_RANK"]] = env
    assert sorted(seen) == ["0", "1", "2"] and {e["HOROVOD_SIZE"] for e in seen.values()} == {"3"}


@pytest.mark.processes
def test_smddprun_returns_the_failed_rank_code():
    code = "import os, sys, time; r = int(os.environ['HOROVOD_RANK']); time.sleep(0 if r else 60); sys.exit(5 if r else 0)"
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", "-np", "2", "--grace", "2",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5
    assert "process [1] on host localhost exited with code 5" in proc.stderr


@pytest.mark.processes
def test_smddprun_custom_options_are_literal(tmp_path):
    target = tmp_path / "pwned"
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", "-np", "1", "echo", f"; touch {target}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and f"[0] ; touch {target}" in proc.stdout
    assert not target.exists()
