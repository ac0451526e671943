"""Why a Horovod script runs under SDK v3 with the kit's ``Horovod()`` and not with SDK v3's own ``MPI``: both drivers
are run here as ModelTrainer runs them on the first of 2 hosts (SM_* set, sshd, SSH bootstrap and mpirun replaced by
recorders), and the mpirun commands compared. Runs in .venv-sdk3 only."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

HOSTS = ["algo-1", "algo-2"]


@pytest.fixture
def first_of_two_hosts(monkeypatch):
    """SDK v3's container drivers importable, the first host's environment, and every side effect recorded."""
    import sagemaker.train.container_drivers as container_drivers

    monkeypatch.syspath_prepend(os.path.dirname(container_drivers.__file__))
    from distributed_drivers import mpi_driver, mpi_utils

    for module in (mpi_utils, mpi_driver):
        for name in ("write_env_vars_to_file", "start_sshd_daemon", "bootstrap_master_node",
                     "write_status_file_to_workers"):
            monkeypatch.setattr(module, name, lambda *args, **kwargs: None)
    monkeypatch.setenv("PYTHONPATH", "")
    for name, value in {"SM_ENTRY_SCRIPT": "train.py", "SM_HPS": "{}", "SM_HOSTS": json.dumps(HOSTS),
                        "SM_CURRENT_HOST": "algo-1", "SM_MASTER_ADDR": "algo-1", "SM_HOST_COUNT": "2",
                        "SM_CURRENT_INSTANCE_TYPE": "ml.c5.xlarge", "SM_NUM_GPUS": "0", "SM_NUM_CPUS": "4"}.items():
        monkeypatch.setenv(name, value)
    return mpi_driver


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _exported(command: list[str]) -> list[str]:
    return [value for option, value in zip(command, command[1:]) if option == "-x"]


def test_sdk3_mpi_starts_one_hosts_worth_of_ranks_and_ships_no_kit(first_of_two_hosts, monkeypatch):
    from sagemaker.train.distributed import MPI

    mpi_driver = first_of_two_hosts
    commands: list[list[str]] = []
    monkeypatch.setattr(mpi_driver, "execute_commands", lambda command: (commands.append(command), (0, None))[1])
    monkeypatch.setenv("SM_DISTRIBUTED_CONFIG", json.dumps(MPI(process_count_per_node=2).model_dump()))
    mpi_driver.main()
    (command,) = commands
    assert _option(command, "--host") == "algo-1:2,algo-2:2"
    assert _option(command, "-np") == "2"  # process_count_per_node in all: algo-2 runs no rank
    assert "PYTHONPATH" not in _exported(command) and not any("smddp_compat" in part for part in command)


def test_kit_horovod_starts_every_hosts_ranks_with_the_kit(first_of_two_hosts, monkeypatch):
    from smddp_compat.estimators.sdk3 import Horovod

    config = Horovod(processes_per_host=2)
    assert config.check("ml.c5.xlarge", 2).processes_per_host == 2
    monkeypatch.syspath_prepend(config.driver_dir)
    import smddp_driver

    commands: list[list[str]] = []

    def mpirun(command, check):
        commands.append(command)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(smddp_driver.subprocess, "run", mpirun)
    monkeypatch.setenv("SM_DISTRIBUTED_CONFIG", json.dumps(config.model_dump()))
    monkeypatch.setenv("SM_HPS", json.dumps({"epochs": 1}))
    assert smddp_driver.main("mpi") == 0
    (command,) = commands
    assert _option(command, "--host") == "algo-1:2,algo-2:2"
    assert _option(command, "-np") == "4"  # hosts x processes per host, as SDK v2's mpi distribution
    assert "PYTHONPATH" in _exported(command) and config.driver_dir in os.environ["PYTHONPATH"].split(os.pathsep)
    assert command[-5:] == ["-m", "mpi4py", "train.py", "--epochs", "1"]
