"""The job drivers (estimators/job_drivers/: the scripts that travel with a job and run inside the training container),
run here with a faked SageMaker environment."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.estimators.conftest import REPO

from smddp_compat.estimators._distribution import plan_distribution
from smddp_compat.estimators import InstanceSpec, instance_spec
from smddp_compat.estimators._source_bundle import DTENSOR_LAUNCHER, stage_driver_dir, stage_source
from smddp_compat.estimators.job_drivers.dtensor_launch import client_environments
from smddp_compat.errors import ConfigurationError

CPU_HOST = InstanceSpec("ml.c5.2xlarge", 8, 0)


def _probes(directory):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(str(directory), "probe-*.json")))]


def _container_env(probe_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "DTENSOR_", "HOROVOD_"))}
    env.update({"SM_HOSTS": json.dumps(["algo-1", "algo-2"]), "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "0",
                "SM_NUM_CPUS": "2", "PROBE_DIR": str(probe_dir)})
    env.update(extra)
    return env


def test_client_environments_follow_hosts_and_addresses():
    config = {"processes_per_host": 2, "port": 9970, "mesh": [["batch", 4]], "device_type": "CPU"}
    environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2",
               "SMDDP_HOST_ADDRESSES": '{"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}'}
    envs = client_environments(config, environ)
    assert [e["DTENSOR_CLIENT_ID"] for e in envs] == ["2", "3"]
    assert {e["DTENSOR_JOBS"] for e in envs} == {"127.0.0.2:9970,127.0.0.2:9971,127.0.0.3:9970,127.0.0.3:9971"}
    # SM_HOSTS order is SageMaker's (never re-sorted): a host listed first is client 0.
    listed_first = client_environments(config, {**environ, "SM_HOSTS": '["algo-2", "algo-1"]'})
    assert [e["DTENSOR_CLIENT_ID"] for e in listed_first] == ["0", "1"]
    assert {e["DTENSOR_JOBS"] for e in listed_first} == {
        "127.0.0.3:9970,127.0.0.3:9971,127.0.0.2:9970,127.0.0.2:9971"}
    assert {e["DTENSOR_JOB_NAME"] for e in envs} == {"worker"}
    assert {e["SMDDP_DTENSOR_MESH"] for e in envs} == {'{"batch":4}'}
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in envs)


def test_gpus_are_split_between_clients_of_a_host():
    environ = {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "SM_NUM_GPUS": "8"}
    envs = client_environments({"processes_per_host": 2}, environ)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1,2,3", "4,5,6,7"]
    assert {e["SMDDP_DTENSOR_DEVICE_TYPE"] for e in envs} == {"GPU"}
    assert {e["SMDDP_DTENSOR_DEVICES_PER_CLIENT"] for e in envs} == {"4"}


def test_cpu_clients_take_the_mesh_devices_by_the_one_rule():
    """SM_DISTRIBUTED_CONFIG of SDK v3 may leave devices_per_process out: on CPU the clients split the mesh."""
    environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "0"}
    (env,) = client_environments({"mesh": {"batch": 8}}, environ)
    assert env["SMDDP_DTENSOR_DEVICES_PER_CLIENT"] == "4" and env["SMDDP_DTENSOR_DEVICE_TYPE"] == "CPU"
    with pytest.raises(ConfigurationError, match=r"mesh.*cannot be split evenly over 2 clients|multiple of 2"):
        client_environments({"mesh": {"batch": 3}}, environ)


@pytest.mark.processes
@pytest.mark.parametrize("per_host", [1, 2])
def test_staged_dtensor_launcher_starts_the_script(tiny_script, tmp_path, per_host):
    plan = plan_distribution({"dtensor": {"enabled": True, "processes_per_host": per_host,
                                          "mesh": {"batch": 2 * per_host}}}, spec=CPU_HOST, instance_count=2)
    staged = stage_source(tiny_script, None, [], plan)
    probes = tmp_path / "probes"
    probes.mkdir()
    try:
        out = subprocess.run([sys.executable, DTENSOR_LAUNCHER, "--epochs", "3", "--name", "a b; c"],
                             cwd=staged.directory, env=_container_env(probes), capture_output=True, text=True,
                             timeout=120)
    finally:
        staged.cleanup()
    assert out.returncode == 0, out.stdout + out.stderr
    seen = _probes(probes)
    assert sorted(p["env"]["DTENSOR_CLIENT_ID"] for p in seen) == [str(per_host + i) for i in range(per_host)]
    jobs = [f"algo-{h}:{9970 + i}" for h in (1, 2) for i in range(per_host)]
    assert {p["env"]["DTENSOR_JOBS"] for p in seen} == {",".join(jobs)}
    assert all(p["argv"] == ["--epochs", "3", "--name", "a b; c"] for p in seen)


@pytest.mark.processes
def test_launcher_outside_a_job_explains_itself(tiny_script, tmp_path):
    plan = plan_distribution({"dtensor": {"enabled": True}}, spec=CPU_HOST, instance_count=1)
    staged = stage_source(tiny_script, None, [], plan)
    env = _container_env(tmp_path)
    del env["SM_HOSTS"]
    try:
        out = subprocess.run([sys.executable, DTENSOR_LAUNCHER], cwd=staged.directory, env=env,
                             capture_output=True, text=True, timeout=60)
    finally:
        staged.cleanup()
    assert out.returncode == 2
    assert "SM_HOSTS=None: is not set" in out.stderr


@pytest.mark.processes
def test_sdk3_dtensor_driver(tiny_script, tmp_path):
    drivers = stage_driver_dir(("dtensor_driver.py", "dtensor_launch.py", "hyperparameter_args.py"), with_compat=True)
    env = _container_env(
        tmp_path, SM_ENTRY_SCRIPT="train.py", SM_HPS=json.dumps({"epochs": 2, "lr": 0.5, "tag": "x y"}),
        SM_DISTRIBUTED_CONFIG=json.dumps({"processes_per_host": 1, "devices_per_process": None, "device_type": None,
                                          "mesh": {"batch": 2}, "port": 9990, "job_name": "worker"}),
    )
    out = subprocess.run([sys.executable, os.path.join(drivers, "dtensor_driver.py")],
                         cwd=os.path.dirname(tiny_script), env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    (probe,) = _probes(tmp_path)
    assert probe["env"]["DTENSOR_CLIENT_ID"] == "1"
    assert probe["env"]["DTENSOR_JOBS"] == "algo-1:9990,algo-2:9990"
    assert probe["env"]["SMDDP_DTENSOR_DEVICE_TYPE"] == "CPU"
    assert probe["argv"] == ["--epochs", "2", "--lr", "0.5", "--tag", "x y"]


SMDDP_PROBE = """
import json, os, sys
import smdistributed.dataparallel.tensorflow as sdp
import tensorflow as tf
sdp.init()
total = sdp.allreduce(tf.constant([float(sdp.rank() + 1)]), 0, 1, op=sdp.ReduceOp.SUM)
with open(os.path.join(os.environ["PROBE_DIR"], f"probe-{sdp.rank()}.json"), "w") as f:
    json.dump({"rank": sdp.rank(), "size": sdp.size(), "sum": float(total.numpy()[0]), "argv": sys.argv[1:],
               "shim": sdp.__file__, "env": {}}, f)
"""


@pytest.mark.processes
@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="needs Horovod (the main .venv)")
def test_sdk3_smddp_driver_runs_an_smddp_script_on_one_host(tmp_path):
    """The v3 SMDDP driver from its staged directory: 2 ranks, a real allreduce through the shipped alias."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(SMDDP_PROBE)
    drivers = stage_driver_dir(("smddp_driver.py", "hyperparameter_args.py"), with_compat=True)
    marker = f"/tmp/pwned-{uuid.uuid4().hex}"
    env = _container_env(
        tmp_path, SM_HOSTS='["algo-1"]', SM_CURRENT_HOST="algo-1", SM_ENTRY_SCRIPT="train.py",
        SM_HPS=json.dumps({"epochs": 1}), TF_CPP_MIN_LOG_LEVEL="2",
        SM_DISTRIBUTED_CONFIG=json.dumps({"processes_per_host": 2, "custom_mpi_options": f"; touch {marker}"}),
    )
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, os.path.join(drivers, "smddp_driver.py")],
                         cwd=str(code), env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    seen = _probes(tmp_path)
    assert [p["rank"] for p in seen] == [0, 1]
    assert {p["size"] for p in seen} == {2} and {p["sum"] for p in seen} == {3.0}
    assert all(p["argv"] == ["--epochs", "1"] for p in seen)
    assert all(p["shim"].startswith(drivers) for p in seen), seen[0]["shim"]
    # the options reached the driver, were split into arguments (never given to a shell) and, on one host, not run
    assert f"custom_mpi_options [';', 'touch', '{marker}'] apply to mpirun (multi-host) only" in out.stdout
    assert not os.path.exists(marker)


HOROVOD_PROBE = """
import json, os, sys
import smddp_compat.horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum)
with open(os.path.join(os.environ["PROBE_DIR"], f"probe-{hvd.rank()}.json"), "w") as f:
    json.dump({"rank": hvd.rank(), "size": hvd.size(), "sum": float(total.numpy()[0]), "argv": sys.argv[1:],
               "face": hvd.__file__}, f)
"""


@pytest.mark.processes
@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="needs Horovod (the main .venv)")
@pytest.mark.parametrize("config, ranks", [({"processes_per_host": 2, "custom_mpi_options": None}, 2),
                                           ({"processes_per_host": None, "custom_mpi_options": None}, 1)])
def test_sdk3_horovod_driver_runs_a_horovod_script_on_one_host(tmp_path, config, ranks):
    """The v3 Horovod driver from its staged directory: a real allreduce through the kit's Horovod face; without
    processes_per_host a CPU host runs one rank (the ``mpi`` distribution's default; SMDDP's would be its 2 vCPUs)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(HOROVOD_PROBE)
    drivers = stage_driver_dir(("horovod_driver.py", "smddp_driver.py", "hyperparameter_args.py"), with_compat=True)
    env = _container_env(tmp_path, SM_HOSTS='["algo-1"]', SM_CURRENT_HOST="algo-1", SM_ENTRY_SCRIPT="train.py",
                         SM_HPS=json.dumps({"epochs": 1}), TF_CPP_MIN_LOG_LEVEL="2",
                         SM_DISTRIBUTED_CONFIG=json.dumps(config))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, os.path.join(drivers, "horovod_driver.py")],
                         cwd=str(code), env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"[smddp-compat mpi driver] 1 host(s) x {ranks} process(es): train.py" in out.stdout
    seen = _probes(tmp_path)
    assert [p["rank"] for p in seen] == list(range(ranks))
    assert {p["size"] for p in seen} == {ranks} and {p["sum"] for p in seen} == {ranks * (ranks + 1) / 2}
    assert all(p["argv"] == ["--epochs", "1"] and p["face"].startswith(drivers) for p in seen), seen


MWMS_PROBE = """
import json, os, sys
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
step = tf.function(lambda: strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
    tf.distribute.ReduceOp.SUM, tf.constant(float(task + 1)))))
total = strategy.experimental_local_results(step())[0]
with open(os.path.join(os.environ["PROBE_DIR"], f"probe-{task}.json"), "w") as f:
    json.dump({"replicas": strategy.num_replicas_in_sync, "sum": float(total.numpy()), "argv": sys.argv[1:],
               "tf_config": json.loads(os.environ["TF_CONFIG"]),
               "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None)}, f)
"""


def _mwms_tf_config(index):
    """What SageMaker's TF toolkit gives worker ``index`` of 2 hosts sharing 127.0.0.1 (8890, then the next port)."""
    return {"cluster": {"worker": ["127.0.0.1:8890", "127.0.0.1:8891"]}, "environment": "cloud",
            "task": {"index": index, "type": "worker"}}


@pytest.mark.processes
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow (the main .venv)")
def test_sdk3_mwms_driver_runs_a_two_host_job(tmp_path):
    """The v3 MultiWorkerMirrored driver on 2 hosts (2 drivers, as ModelTrainer starts one per host): TF_CONFIG as
    the toolkit builds it, and a real all-reduce between the two workers."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(MWMS_PROBE)
    drivers = stage_driver_dir(("mwms_driver.py", "hyperparameter_args.py"), with_compat=True)
    addresses = json.dumps({"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"})
    hosts = [subprocess.Popen(
        [sys.executable, os.path.join(drivers, "mwms_driver.py")], cwd=str(code), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env=_container_env(tmp_path, SM_CURRENT_HOST=host, SM_ENTRY_SCRIPT="train.py", SM_HPS='{"epochs": 1}',
                           SM_DISTRIBUTED_CONFIG="{}", SMDDP_HOST_ADDRESSES=addresses, TF_CPP_MIN_LOG_LEVEL="2"),
    ) for host in ("algo-1", "algo-2")]
    try:
        outputs = [host.communicate(timeout=240)[0] for host in hosts]
    finally:
        for host in hosts:
            host.kill()
    assert [host.returncode for host in hosts] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    assert "[smddp-compat mwms driver] worker 1 of 2: 127.0.0.1:8890,127.0.0.1:8891" in outputs[1]
    seen = _probes(tmp_path)
    assert [p["tf_config"] for p in seen] == [_mwms_tf_config(0), _mwms_tf_config(1)]
    assert all(p["replicas"] == 2 and p["sum"] == 3.0 and p["argv"] == ["--epochs", "1"] for p in seen), seen
    # The kit's known limits reach the script (its one-line messages), as in every job the kit starts.
    startup = os.path.join(drivers, "smddp_compat", "_startup", "sitecustomize.py")
    assert all(p["sitecustomize"] == startup for p in seen), seen


@pytest.mark.processes
def test_sdk3_mwms_driver_outside_a_job_explains_itself(tiny_script, tmp_path):
    drivers = stage_driver_dir(("mwms_driver.py", "hyperparameter_args.py"), with_compat=True)
    env = _container_env(tmp_path, SM_ENTRY_SCRIPT="train.py")
    del env["SM_HOSTS"]
    out = subprocess.run([sys.executable, os.path.join(drivers, "mwms_driver.py")], cwd=os.path.dirname(tiny_script),
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "[smddp-compat mwms driver] error: bad container environment: SM_HOSTS=None: is not set" in out.stderr


def test_instance_spec_of_local_types():
    assert instance_spec("local_process").gpus == 0
    assert instance_spec("ml.p4d.24xlarge").devices == 8
    assert instance_spec("ml.c5.2xlarge").devices == 8
