"""smddp_compat.cluster: the exact variables of each distribution, and the same cluster at every launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat import cluster
from smddp_compat.cluster import Cluster, ClusterConfigError

HOSTS = ["algo-1", "algo-2"]
ADDRESSES = {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}
# Eleven hosts in SageMaker's order: a lexicographic sort would put algo-10 and algo-11 before algo-2.
ELEVEN = [f"algo-{n}" for n in range(1, 12)]
# A list in some other order is kept as given (the toolkit's mpirun numbers ranks in it).
SHUFFLED = ["algo-3", "algo-10", "algo-1", "algo-2"]
MALFORMED_ADDRESSES = ["{not json", '["127.0.0.2"]', '{"algo-1": 2}', '{"algo-1": null}', '"127.0.0.2"']


def _sm_environ(hosts: list[str], current: str, **extra: str) -> dict[str, str]:
    return {"SM_HOSTS": json.dumps(hosts), "SM_CURRENT_HOST": current, **extra}


# ------------------------------------------------------------------------------------------ module boundaries


@pytest.mark.processes
def test_the_module_imports_only_the_standard_library() -> None:
    code = ("import sys, smddp_compat.cluster; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names))")
    root = str(Path(cluster.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "['__main__', 'smddp_compat', 'smddp_compat.cluster', 'smddp_compat.contract', 'smddp_compat.errors', "
        "'smddp_compat.job_files']"
    )


def test_emitted_variables_cover_every_planner() -> None:
    placements = cluster.uniform_placements(HOSTS, 2)
    clients = cluster.endpoints(placements, ADDRESSES, base_port=9000)
    emitted: set[str] = set(cluster.encode_host_addresses(ADDRESSES))
    for env in (
        *cluster.horovod_gloo_environments(placements, rendezvous_address="127.0.0.1", rendezvous_port=1,
                                           timeout_seconds=30, iface="lo"),
        cluster.horovod_mpi_environment({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
                                         "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}),
        *cluster.mwms_environments(placements, clients),
        *cluster.dtensor_environments(placements, clients, mesh={"batch": 4}, devices_per_client=1,
                                      device_type="GPU"),
    ):
        emitted.update(env)
    assert emitted == set(cluster.EMITTED_VARIABLES)
    assert {"HOROVOD_GLOO_TIMEOUT_SECONDS", "NCCL_SOCKET_IFNAME"} <= cluster.EMITTED_VARIABLES


# ------------------------------------------------------------------------------------------------- placement


@pytest.mark.parametrize("slots", [
    [("a", 2), ("b", 2)],
    [("a", 4)],
    [("a", 1), ("b", 3), ("c", 2)],
    [("a", 3), ("b", 1), ("c", 3)],
    [(host, 1 + n % 3) for n, host in enumerate(ELEVEN)],
])
def test_assignment_matches_horovods(slots: list[tuple[str, int]]) -> None:
    from horovod.runner.common.util.hosts import HostInfo, get_host_assignments

    size = sum(n for _, n in slots)
    theirs = [(s.hostname, s.rank, s.local_rank, s.cross_rank, s.size, s.local_size, s.cross_size)
              for s in get_host_assignments([HostInfo(h, n) for h, n in slots], size)]
    ours = [(p.host, p.rank, p.local_rank, p.cross_rank, p.size, p.local_size, p.cross_size)
            for p in cluster.assign([cluster.HostSlots(h, n) for h, n in slots])]
    assert ours == theirs
    assert [p.host_index for p in cluster.assign([cluster.HostSlots(h, n) for h, n in slots])] == [i for i, (_, n) in enumerate(slots) for _ in range(n)]


def test_ports_follow_one_rule() -> None:
    placements = cluster.uniform_placements(HOSTS, 2)
    # One address per host (SageMaker): base + local index.
    assert cluster.endpoints(placements, {}, base_port=9970) == [
        "algo-1:9970", "algo-1:9971", "algo-2:9970", "algo-2:9971"]
    # Hosts sharing an address: the processes there take the next ports.
    shared = {"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}
    assert cluster.endpoints(placements, shared, base_port=9970) == [
        "127.0.0.1:9970", "127.0.0.1:9971", "127.0.0.1:9972", "127.0.0.1:9973"]
    # Reserved ports (local mode): one per process, as given.
    assert cluster.endpoints(placements, ADDRESSES, ports=[5, 6, 7, 8]) == [
        "127.0.0.2:5", "127.0.0.2:6", "127.0.0.3:7", "127.0.0.3:8"]
    with pytest.raises(ClusterConfigError, match=r"--mwms-port=65535: plus 1 exceeds port 65535"):
        cluster.endpoints(placements, {}, base_port=65535, port_field="--mwms-port")
    with pytest.raises(ClusterConfigError, match="holds 3 ports for 4 processes"):
        cluster.endpoints(placements, {}, ports=[1, 2, 3])


# -------------------------------------------------------------------------------- each distribution, exactly


def test_horovod_over_gloo() -> None:
    envs = cluster.horovod_gloo_environments(cluster.assign([cluster.HostSlots("algo-1", 2), cluster.HostSlots("algo-2", 1)]),
                                             rendezvous_address="127.0.0.2", rendezvous_port=4000,
                                             timeout_seconds=45.0, iface="lo")
    common = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.2", "HOROVOD_GLOO_RENDEZVOUS_PORT": "4000",
              "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "lo",
              "HOROVOD_GLOO_TIMEOUT_SECONDS": "45", "NCCL_SOCKET_IFNAME": "lo", "HOROVOD_SIZE": "3"}
    assert envs == [
        {**common, "HOROVOD_HOSTNAME": "algo-1", "HOROVOD_RANK": "0", "HOROVOD_LOCAL_RANK": "0",
         "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "2"},
        {**common, "HOROVOD_HOSTNAME": "algo-1", "HOROVOD_RANK": "1", "HOROVOD_LOCAL_RANK": "1",
         "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1"},
        {**common, "HOROVOD_HOSTNAME": "algo-2", "HOROVOD_RANK": "2", "HOROVOD_LOCAL_RANK": "0",
         "HOROVOD_LOCAL_SIZE": "1", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2"},
    ]


def test_the_rendezvous_hands_out_the_plan_its_server_holds() -> None:
    from smddp_compat.launcher import HorovodRendezvous, HostSlots

    hosts = [HostSlots("algo-1", 1, "127.0.0.2"), HostSlots("algo-2", 3, "127.0.0.3")]
    with HorovodRendezvous(hosts, bind_address="127.0.0.1", timeout=20) as rendezvous:
        envs, port = rendezvous.rank_envs(), rendezvous.port
        served = [(s.hostname, s.rank, s.local_rank, s.cross_rank, s.local_size, s.cross_size)
                  for s in rendezvous._plan]
    assert envs == cluster.horovod_gloo_environments(cluster.assign([cluster.HostSlots("algo-1", 1), cluster.HostSlots("algo-2", 3)]),
                                                     rendezvous_address="127.0.0.1", rendezvous_port=port,
                                                     timeout_seconds=20, iface="lo")
    assert served == [(e["HOROVOD_HOSTNAME"], int(e["HOROVOD_RANK"]), int(e["HOROVOD_LOCAL_RANK"]),
                       int(e["HOROVOD_CROSS_RANK"]), int(e["HOROVOD_LOCAL_SIZE"]), int(e["HOROVOD_CROSS_SIZE"]))
                      for e in envs]


def test_horovod_over_mpi() -> None:
    assert cluster.horovod_mpi_environment({"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1",
                                            "MPI_LOCALNRANKS": "4"}) == {
        "HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi", "HOROVOD_RANK": "5", "HOROVOD_SIZE": "8",
        "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "4", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2"}
    assert cluster.horovod_mpi_environment({}) == {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"}


def test_mwms() -> None:
    placements = cluster.uniform_placements(HOSTS, 1)
    envs = cluster.mwms_environments(placements, cluster.endpoints(placements, ADDRESSES, base_port=12345))
    assert [json.loads(e["TF_CONFIG"]) for e in envs] == [
        {"cluster": {"worker": ["127.0.0.2:12345", "127.0.0.3:12345"]}, "environment": "cloud",
         "task": {"index": index, "type": "worker"}} for index in range(2)]


def test_parameter_server_tf_config_is_the_toolkits() -> None:
    three = ["algo-1", "algo-2", "algo-3"]
    cluster_spec = {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"],
                    "worker": ["algo-2:2222", "algo-3:2222"]}
    assert cluster.parameter_server_tf_config(three, "algo-1") == {
        "cluster": cluster_spec, "environment": "cloud", "task": {"index": 0, "type": "master"}}
    assert cluster.parameter_server_tf_config(three, "algo-3") == {
        "cluster": cluster_spec, "environment": "cloud", "task": {"index": 1, "type": "worker"}}
    assert cluster.parameter_server_tf_config(three, "algo-2", ps_task=True) == {
        "cluster": cluster_spec, "environment": "cloud", "task": {"index": 1, "type": "ps"}}
    assert cluster.parameter_server_tf_config(["algo-1"], "algo-1") == {
        "cluster": {"master": ["algo-1:2222"]}, "environment": "cloud", "task": {"index": 0, "type": "master"}}
    with pytest.raises(ClusterConfigError, match="no parameter server"):
        cluster.parameter_server_tf_config(["algo-1"], "algo-1", ps_task=True)
    assert cluster.parameter_server_tf_config(HOSTS, "algo-2", addresses=ADDRESSES)["cluster"] == {
        "master": ["127.0.0.2:2222"], "ps": ["127.0.0.2:2223", "127.0.0.3:2223"], "worker": ["127.0.0.3:2222"]}


def test_dtensor() -> None:
    placements = cluster.uniform_placements(HOSTS, 2)
    clients = cluster.endpoints(placements, ADDRESSES, base_port=9970)
    envs = cluster.dtensor_environments(placements, clients, mesh={"batch": 8}, devices_per_client=2,
                                       device_type="GPU")
    shared = {"DTENSOR_JOBS": "127.0.0.2:9970,127.0.0.2:9971,127.0.0.3:9970,127.0.0.3:9971",
              "DTENSOR_JOB_NAME": "worker", "SMDDP_DTENSOR_NUM_CLIENTS": "4", "SMDDP_DTENSOR_MESH": '{"batch":8}',
              "SMDDP_DTENSOR_DEVICES_PER_CLIENT": "2", "SMDDP_DTENSOR_DEVICE_TYPE": "GPU"}
    assert envs == [{**shared, "DTENSOR_CLIENT_ID": str(index), "CUDA_VISIBLE_DEVICES": gpus}
                    for index, gpus in enumerate(["0,1", "2,3", "0,1", "2,3"])]
    bare = cluster.dtensor_environments(cluster.uniform_placements(HOSTS, 1), ["a:1", "b:1"])
    assert bare[1] == {"DTENSOR_JOBS": "a:1,b:1", "DTENSOR_JOB_NAME": "worker", "SMDDP_DTENSOR_NUM_CLIENTS": "2",
                       "DTENSOR_CLIENT_ID": "1"}


# ------------------------------------------------------------------------------- host order at every entry


def _dtensor_order(hosts: list[str]) -> list[str]:
    from smddp_compat.estimators.job_drivers.dtensor_launch import client_environments

    jobs = client_environments({"port": 9970}, _sm_environ(hosts, hosts[0]))[0]["DTENSOR_JOBS"]
    return [job.rsplit(":", 1)[0] for job in jobs.split(",")]


def _smddp_driver_order(hosts: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from smddp_compat.estimators.job_drivers import smddp_driver

    seen: list[list[str]] = []
    monkeypatch.setattr(smddp_driver, "_multi_host", lambda hosts, *rest: seen.append(hosts) or 0)
    for name, value in {**_sm_environ(hosts, hosts[0]), "SM_ENTRY_SCRIPT": "train.py", "SM_HPS": "{}",
                        "SM_DISTRIBUTED_CONFIG": "{}", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}.items():
        monkeypatch.setenv(name, value)
    assert smddp_driver.main() == 0
    return seen[0]


def _training_env_order(hosts: list[str]) -> list[str]:
    from smddp_compat.entry_points.common.training_env import TrainingEnv

    return list(TrainingEnv.from_environ(_sm_environ(hosts, hosts[-1])).hosts)


def _keras_mwms_order(hosts: list[str]) -> list[str]:
    from smddp_compat.entry_points.keras_mwms import tf_config_from_env
    from smddp_compat.entry_points.common.training_env import TrainingEnv

    config = tf_config_from_env(TrainingEnv.from_environ(_sm_environ(hosts, hosts[0])), 12345)
    return [worker.rsplit(":", 1)[0] for worker in config["cluster"]["worker"]]


@pytest.mark.parametrize("hosts", [ELEVEN, SHUFFLED], ids=["eleven", "shuffled"])
@pytest.mark.parametrize("entry", ["cluster", "dtensor_launch", "smddp_driver", "TrainingEnv", "keras_mwms"])
def test_host_order_is_sagemakers_at_every_entry(entry: str, hosts: list[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    readers = {
        "cluster": lambda h: list(Cluster.from_environ(_sm_environ(h, h[1])).hosts),
        "dtensor_launch": _dtensor_order,
        "smddp_driver": lambda h: _smddp_driver_order(h, monkeypatch),
        "TrainingEnv": _training_env_order,
        "keras_mwms": _keras_mwms_order,
    }
    assert readers[entry](hosts) == hosts


def test_unset_variables_outside_a_job() -> None:
    assert Cluster.from_environ({}) == Cluster(("algo-1",), "algo-1", {})
    assert Cluster.from_environ({"SM_HOSTS": '["algo-2","algo-3"]'}).current_host == "algo-2"
    assert Cluster.from_environ({"SM_CURRENT_HOST": "algo-4"}).hosts == ("algo-4",)
    with pytest.raises(ClusterConfigError, match=r"SM_CURRENT_HOST=None: is not set"):
        Cluster.from_environ({"SM_HOSTS": '["algo-1"]'}, required=True)
    with pytest.raises(ClusterConfigError, match=r"SM_HOSTS=\['algo-1', 'algo-1'\]: names a host more than once"):
        Cluster.from_environ({"SM_HOSTS": '["algo-1","algo-1"]'})
    with pytest.raises(ClusterConfigError, match=r"SM_HOSTS=\{\}: is not a non-empty list of host names"):
        Cluster.from_environ({"SM_HOSTS": "{}", "SM_CURRENT_HOST": "algo-1"})


def test_resource_config_order_and_master() -> None:
    resource = {"hosts": SHUFFLED, "current_host": "algo-10"}
    found = Cluster.from_resource_config(resource)
    assert found.hosts == tuple(SHUFFLED) and found.master == "algo-3" and found.host_index == 1


# ------------------------------------------------------------------------- SMDDP_HOST_ADDRESSES at every entry


def _expected_message(raw: str) -> str:
    return (f"SMDDP_HOST_ADDRESSES={raw!r}: is not a JSON object of host name to address. Fix: give e.g. "
            '{"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}, or unset it when the host names resolve')


def test_host_addresses_absent_or_empty_map_names_to_themselves() -> None:
    assert cluster.parse_host_addresses(None) == {} and cluster.parse_host_addresses("  ") == {}
    assert Cluster.from_environ(_sm_environ(HOSTS, "algo-1")).address_of("algo-2") == "algo-2"
    encoded = cluster.encode_host_addresses(ADDRESSES)
    assert encoded == {"SMDDP_HOST_ADDRESSES": '{"algo-1":"127.0.0.2","algo-2":"127.0.0.3"}'}
    assert cluster.parse_host_addresses(encoded["SMDDP_HOST_ADDRESSES"]) == ADDRESSES


@pytest.mark.parametrize("raw", MALFORMED_ADDRESSES)
def test_malformed_host_addresses_fail_the_same_way_at_every_entry(raw: str, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from smddp_compat.entry_points.common.training_env import TrainingEnv
    from smddp_compat.estimators.job_drivers.dtensor_launch import client_environments
    from smddp_compat.launcher import main as smddprun
    from smddp_compat.launcher._hosts import is_this_machine

    environ = _sm_environ(HOSTS, "algo-1", SMDDP_HOST_ADDRESSES=raw)
    entries = {
        "cluster": lambda: cluster.parse_host_addresses(raw),
        "dtensor_launch": lambda: client_environments({}, environ),
        "TrainingEnv": lambda: TrainingEnv.from_environ(environ),
    }
    for name, call in entries.items():
        with pytest.raises(ClusterConfigError) as caught:
            call()
        assert str(caught.value) == _expected_message(raw), name
        assert caught.value.details()["field"] == "SMDDP_HOST_ADDRESSES"
    monkeypatch.setenv("SMDDP_HOST_ADDRESSES", raw)
    with pytest.raises(ClusterConfigError, match="is not a JSON object of host name to address"):
        is_this_machine("algo-1")
    assert smddprun(["-np", "1", "-H", "algo-1:1", sys.executable, "-c", "pass"]) == 2
    assert f"smddprun: error: {_expected_message(raw)}" in capsys.readouterr().err


# ------------------------------------------------------------- every launcher, the same environment per plan


def test_dtensor_local_mode_and_container_launcher_agree() -> None:
    from smddp_compat.estimators.job_drivers.dtensor_launch import client_environments
    from tests.strategy_plans import local_launch

    placements = cluster.uniform_placements(HOSTS, 2)
    ports = [int(e.rsplit(":", 1)[1]) for e in cluster.endpoints(placements, ADDRESSES, base_port=9970)]
    local = local_launch("dtensor", 2, 2, ports=ports, mesh={"batch": 4}, devices_per_process=1).plans
    config = {"processes_per_host": 2, "port": 9970, "mesh": [["batch", 4]], "device_type": "CPU",
              "devices_per_process": 1}
    container = [env for host in HOSTS for env in client_environments(
        config, _sm_environ(HOSTS, host, **cluster.encode_host_addresses(ADDRESSES)))]
    assert len(container) == len(local) == 4
    for plan, env in zip(local, container):
        shared = set(plan.env) & set(env)
        assert shared >= {"DTENSOR_JOBS", "DTENSOR_CLIENT_ID", "DTENSOR_JOB_NAME", "SMDDP_DTENSOR_MESH",
                          "SMDDP_DTENSOR_DEVICES_PER_CLIENT", "SMDDP_DTENSOR_NUM_CLIENTS"}
        assert {k: plan.env[k] for k in shared} == {k: env[k] for k in shared}


def test_mwms_local_mode_and_the_entry_points_fallback_agree() -> None:
    from smddp_compat.entry_points.keras_mwms import tf_config_from_env
    from smddp_compat.entry_points.common.training_env import TrainingEnv
    from tests.strategy_plans import local_launch

    local = local_launch("mwms", 2, 1, ports=[12345, 12345]).plans
    for plan, host in zip(local, HOSTS):
        env = TrainingEnv.from_environ(_sm_environ(HOSTS, host, **cluster.encode_host_addresses(ADDRESSES)))
        assert json.loads(plan.env["TF_CONFIG"]) == tf_config_from_env(env, 12345)


def test_horovod_launchers_agree_on_each_ranks_identity() -> None:
    from smddp_compat.launcher._rank_settings import with_shim_on_path
    from tests.strategy_plans import local_launch

    gloo = local_launch("smddp", 2, 2).plans
    identity = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
                "HOROVOD_CROSS_SIZE")
    for plan in gloo:
        # The same rank started by mpirun with two slots per host (SageMaker's SMDDP / MPI launch).
        mpi = cluster.horovod_mpi_environment({
            "OMPI_COMM_WORLD_RANK": str(plan.rank), "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(plan.local_rank), "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
        assert {k: mpi[k] for k in identity} == {k: plan.env[k] for k in identity}
        assert plan.env["HOROVOD_HOSTNAME"] == plan.host
    # SMDDP = Horovod + the smdistributed alias first on PYTHONPATH, in local mode as under smddprun.
    from smddp_compat.smdistributed_shim import real_smddp_location

    alias = None if real_smddp_location() else with_shim_on_path({})["PYTHONPATH"].split(os.pathsep)[0]
    assert {plan.python_path for plan in gloo} == {(alias,) if alias else ()}
