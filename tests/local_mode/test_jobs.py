"""Real local jobs of 1x1, 1x2, 2x1 and 2x2 processes for every distribution: each process records what it saw,
and the record is checked against the SageMaker contract and the distribution's variables."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode import JobSpec, run
from smddp_compat.local_mode.environment import host_addresses
from smddp_compat.local_mode.environment import inherited_environment, is_reserved

pytestmark = pytest.mark.processes

SHAPES = [(1, 1), (1, 2), (2, 1), (2, 2)]
CASES = [("none", 1, 1), ("none", 2, 1)] + [
    (distribution, hosts, per_host) for distribution in ("smddp", "mpi", "mwms", "dtensor") for hosts, per_host in SHAPES
]
HYPERPARAMETERS = {"epochs": 2, "optimizer": "adam", "lr": 0.001, "use-bn": True, "layers": [64, 32]}


def _records(output_tarball: Path, hosts: int, per_host: int) -> dict[int, tuple[str, dict[str, Any]]]:
    """index -> (host, record) from output.tar.gz (every host's output/data merged at the top, as on SageMaker)."""
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    with tarfile.open(output_tarball) as archive:
        for member in archive.getmembers():
            match = re.fullmatch(r"env-(\d+)\.json", member.name)
            if match:
                handle = archive.extractfile(member)
                assert handle is not None
                record = json.load(handle)
                found[int(match.group(1))] = (record["env"]["CURRENT_HOST"], record)  # the platform's: its own
    return found


@pytest.mark.parametrize(("distribution", "hosts", "per_host"), CASES, ids=[f"{d}-{h}x{p}" for d, h, p in CASES])
def test_every_process_sees_the_sagemaker_contract(
    tmp_path: Path, scripts_dir: Path, no_leftover_job_dirs: None, distribution: str, hosts: int, per_host: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The Gloo contract (rendezvous on algo-1's address): one-host jobs would otherwise take the MPI engine whenever
    # the machine has idle cores; the MPI engine's environment is checked in tests/launcher/test_mpi_engine.py.
    monkeypatch.setenv("SMDDP_ENGINE", "gloo")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "train.csv").write_text("x,y\n1,2\n")
    (data / "sub" / "more.csv").write_text("x,y\n3,4\n")
    spec = JobSpec(
        entry_point="dump_env.py",
        source_dir=str(scripts_dir),
        instance_count=hosts,
        processes_per_host=per_host,
        distribution=distribution,
        hyperparameters={**HYPERPARAMETERS, "write-model": 1},
        channels={"train": str(data)},
        output_path=str(tmp_path / "out"),
        job_name=f"env-{distribution}-{hosts}x{per_host}",
        environment={"MY_SETTING": "on", "TMPDIR": str(tmp_path / "scratch")},
        max_run=120,
    )
    (tmp_path / "scratch").mkdir()
    stream = io.StringIO()
    result = run(spec, stream=stream)
    output = stream.getvalue()
    assert result.ok, output
    assert result.exit_code == 0 and result.failure_reason is None

    # Artifacts where SageMaker puts them; logs per host.
    job_dir = tmp_path / "out" / spec.job_name
    assert result.artifacts.model == str(job_dir / "output" / "model.tar.gz")
    assert result.artifacts.output == str(job_dir / "output" / "output.tar.gz")
    with tarfile.open(result.artifacts.model) as archive:
        # Every host's model folder, merged (as SageMaker aggregates them): the files of every process.
        assert sorted(archive.getnames()) == sorted(f"model-{i}.txt" for i in range(hosts * per_host))
    addresses = host_addresses(hosts)
    world = hosts * per_host
    for host_index in range(hosts):
        log = Path(result.artifacts.logs[f"algo-{host_index + 1}"]).read_text()
        assert log.count("dumped environment of process") == per_host
        assert not log.startswith("[")  # the log holds the lines without the prefix
    labels = set(re.findall(r"^\[(algo-\d+,\d+)\] dumped", output, flags=re.M))
    assert labels == {f"algo-{i // per_host + 1},{i}" for i in range(world)}

    records = _records(Path(result.artifacts.output), hosts, per_host)
    assert sorted(records) == list(range(world))
    for index, (host, record) in records.items():
        host_index, local = divmod(index, per_host)
        assert host == f"algo-{host_index + 1}"
        # An MPI job's ranks see the leader's SM_* (the toolkit's mpirun exports them), their paths their own.
        _check_contract(record, host, hosts, spec.job_name, "algo-1" if distribution == "mpi" else host)
        _check_set_variables_are_reserved(record["env"], parent=os.environ, user=spec.environment)
        _check_distribution(record, distribution, index, host_index, local, hosts, per_host, addresses)


def _check_set_variables_are_reserved(env: dict[str, str], *, parent: Any, user: Any) -> None:
    """Every variable local_mode gave the process (not the caller's, not the job's ``environment``) is one that
    ``JobSpec.environment`` refuses, so a user's value can never be silently overridden."""
    inherited = inherited_environment(parent)
    # The caller's PYTHONPATH is kept, after the job's own entries; the job's TMPDIR is a folder of the job's own
    # inside the one it was given (removed with everything a killed process left there)
    merged = {"PYTHONPATH", "TMPDIR"}
    assert Path(env["TMPDIR"]).parent == Path(user["TMPDIR"]) and Path(env["TMPDIR"]).name.startswith("smddp-tmp-")
    set_by_local_mode = {
        name for name, value in env.items()
        if name not in user and name not in merged and inherited.get(name) != value
    }
    assert set_by_local_mode, "the record holds no variable of local_mode's"
    overridable = {"PYTHONUNBUFFERED"}  # set before the job's environment, which may change it
    assert sorted(name for name in set_by_local_mode - overridable if not is_reserved(name)) == []


def _check_contract(record: dict[str, Any], host: str, hosts: int, job_name: str, toolkit_host: str) -> None:
    env = record["env"]
    host_names = [f"algo-{i + 1}" for i in range(hosts)]
    root = env["SAGEMAKER_BASE_DIR"]
    assert root.endswith(f"/{host}") and os.path.basename(os.path.dirname(root)).startswith(f"smddp-local-{job_name}-")
    assert json.loads(env["SM_HOSTS"]) == host_names
    assert env["SM_CURRENT_HOST"] == toolkit_host and env["CURRENT_HOST"] == host
    assert env["TRAINING_JOB_NAME"] == job_name
    assert env["SM_MODEL_DIR"] == f"{root}/model"
    assert env["SM_OUTPUT_DATA_DIR"] == f"{root}/output/data"
    assert env["SM_OUTPUT_DIR"] == f"{root}/output"
    assert env["SM_INPUT_DIR"] == f"{root}/input"
    assert env["SM_INPUT_CONFIG_DIR"] == f"{root}/input/config"
    assert env["SM_MODULE_DIR"] == f"{root}/code" == record["cwd"]
    assert json.loads(env["SM_CHANNELS"]) == ["train"]
    assert env["SM_CHANNEL_TRAIN"] == f"{root}/input/data/train"
    assert record["channels"] == {"train": ["sub/more.csv", "train.csv"]}
    assert env["SM_NUM_CPUS"] == str(os.cpu_count())
    assert env["SM_NUM_GPUS"] == "0"
    assert env["SM_USER_ENTRY_POINT"] == "dump_env.py"
    assert env["SM_LOG_LEVEL"] == "20"
    assert json.loads(env["SM_HPS"]) == {**HYPERPARAMETERS, "write-model": 1}
    assert env["SM_HP_EPOCHS"] == "2" and env["SM_HP_OPTIMIZER"] == "adam" and env["SM_HP_LR"] == "0.001"
    assert env["SM_HP_USE-BN"] == "true" and env["SM_HP_LAYERS"] == "[64,32]"
    expected_args = ["--epochs", "2", "--layers", "[64, 32]", "--lr", "0.001", "--optimizer", "adam",
                     "--use-bn", "True", "--write-model", "1"]
    assert record["argv"] == expected_args
    assert json.loads(env["SM_USER_ARGS"]) == expected_args
    assert json.loads(env["SM_RESOURCE_CONFIG"]) == {**record["configs"]["resourceconfig.json"],
                                                     "current_host": toolkit_host}
    assert record["configs"]["resourceconfig.json"]["current_host"] == host
    assert record["configs"]["resourceconfig.json"]["hosts"] == host_names
    assert json.loads(env["SM_INPUT_DATA_CONFIG"]) == record["configs"]["inputdataconfig.json"]
    assert record["configs"]["inputdataconfig.json"]["train"]["TrainingInputMode"] == "File"
    hps_file = record["configs"]["hyperparameters.json"]
    assert json.loads(hps_file["optimizer"]) == "adam" and json.loads(hps_file["epochs"]) == 2
    assert json.loads(hps_file["sagemaker_program"]) == "dump_env.py"
    assert json.loads(hps_file["sagemaker_job_name"]) == job_name
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["current_host"] == toolkit_host and training_env["hosts"] == host_names
    assert training_env["model_dir"] == env["SM_MODEL_DIR"]
    assert json.loads(env["SMDDP_HOST_ADDRESSES"]) == host_addresses(hosts)
    assert env["MY_SETTING"] == "on"
    assert env["PYTHONUNBUFFERED"] == "1"


def _check_distribution(
    record: dict[str, Any],
    distribution: str,
    index: int,
    host_index: int,
    local: int,
    hosts: int,
    per_host: int,
    addresses: dict[str, str],
) -> None:
    env = record["env"]
    host = f"algo-{host_index + 1}"
    framework = json.loads(env["SM_FRAMEWORK_PARAMS"])
    if distribution in ("smddp", "mpi"):
        assert env["HOROVOD_RANK"] == str(index)
        assert env["HOROVOD_SIZE"] == str(hosts * per_host)
        assert env["HOROVOD_LOCAL_RANK"] == str(local)
        assert env["HOROVOD_LOCAL_SIZE"] == str(per_host)
        assert env["HOROVOD_CROSS_RANK"] == str(host_index)
        assert env["HOROVOD_CROSS_SIZE"] == str(hosts)
        assert env["HOROVOD_HOSTNAME"] == host
        assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == addresses["algo-1"]
        assert env["HOROVOD_CONTROLLER"] == "gloo"
        if distribution == "smddp":
            assert framework["sagemaker_distributed_dataparallel_enabled"] is True
            assert record["smdistributed"] and env["PYTHONPATH"].split(os.pathsep)[0] in record["smdistributed"][0]
        else:
            assert framework == {
                "sagemaker_mpi_enabled": True,
                "sagemaker_mpi_num_of_processes_per_host": per_host,
                "sagemaker_mpi_custom_mpi_options": "",
            }
            assert record["smdistributed"] is None
        assert json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == ["homogeneousCluster"]
    elif distribution == "mwms":
        tf_config = json.loads(env["TF_CONFIG"])
        workers = tf_config["cluster"]["worker"]
        assert len(workers) == hosts * per_host and len(set(workers)) == len(workers)
        assert [w.split(":")[0] for w in workers] == [addresses[f"algo-{i // per_host + 1}"] for i in range(len(workers))]
        assert tf_config["task"] == {"type": "worker", "index": index}
        assert framework == {"sagemaker_multi_worker_mirrored_strategy_enabled": True}
    elif distribution == "dtensor":
        jobs = env["DTENSOR_JOBS"].split(",")
        assert len(jobs) == hosts * per_host and len(set(jobs)) == len(jobs)
        assert [j.split(":")[0] for j in jobs] == [addresses[f"algo-{i // per_host + 1}"] for i in range(len(jobs))]
        assert env["DTENSOR_CLIENT_ID"] == str(index)
        assert env["DTENSOR_JOB_NAME"] == "worker"
        assert framework == {}
    else:
        assert framework == {} and json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == []
        for variable in ("HOROVOD_RANK", "TF_CONFIG", "DTENSOR_JOBS"):
            assert variable not in env
