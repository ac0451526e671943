"""Unit tests of what local_mode builds: the exact SM_* variables, script arguments, config files and launch plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smddp_compat.distribution_config import DistributionConfig
from smddp_compat.local_mode.environment import host_addresses, training_environment
from smddp_compat.strategies import NAMES, strategy_named
from smddp_compat.contract import cmd_args, encode_hyperparameters, env_value
from smddp_compat.local_mode.layout import HostLayout, create_host_tree, input_data_config, resource_config
from tests.strategy_plans import local_launch


def test_env_values_follow_the_toolkit_format() -> None:
    assert env_value("adam") == "adam"
    assert env_value(None) == ""
    assert env_value(3) == "3"
    assert env_value(0.5) == "0.5"
    assert env_value(True) == "true"
    assert env_value(["algo-1", "algo-2"]) == '["algo-1","algo-2"]'
    assert env_value({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_cmd_args_follow_the_toolkit_format() -> None:
    hps = {"lr": 0.001, "optimizer": "adam", "b": 32, "flag": True, "layers": [64, 32], "opts": {"y": 2, "x": 1}}
    assert cmd_args(hps) == [
        "-b", "32",
        "--flag", "True",
        "--layers", "[64, 32]",
        "--lr", "0.001",
        "--optimizer", "adam",
        "--opts", "x=1,y=2",
    ]


def test_hyperparameters_json_holds_json_encoded_values() -> None:
    assert encode_hyperparameters({"epochs": 3, "optimizer": "adam", "flag": False}) == {
        "epochs": "3",
        "optimizer": '"adam"',
        "flag": "false",
    }


def test_resource_and_input_data_config() -> None:
    assert resource_config(["algo-1", "algo-2"], "algo-2", "local", "lo") == {
        "current_host": "algo-2",
        "current_instance_type": "local",
        "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2"],
        "instance_groups": [
            {"instance_group_name": "homogeneousCluster", "instance_type": "local", "hosts": ["algo-1", "algo-2"]}
        ],
        "network_interface_name": "lo",
    }
    assert input_data_config(["train"]) == {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
    }


def test_container_paths_in_hyperparameters_name_the_hosts_tree(tmp_path: Path) -> None:
    layout = HostLayout("algo-2", tmp_path / "algo-2")
    given = {"model_dir": "/opt/ml/model", "export": "/opt/ml/model/export/", "base": "/opt/ml",
             "out": "/opt/ml/output/data", "elsewhere": "/opt/mlflow", "escape": "/opt/ml/../etc", "s3": "s3://b/k",
             "epochs": 3, "flag": True, "layers": ["/opt/ml/model"]}
    assert layout.hyperparameters_here(given) == {
        **given, "model_dir": str(layout.model_dir), "export": str(layout.model_dir / "export"),
        "base": str(layout.root), "out": str(layout.output_data_dir),
    }


def test_training_environment_for_an_smddp_host(tmp_path: Path) -> None:
    layout = HostLayout("algo-2", tmp_path / "algo-2")
    resource = resource_config(["algo-1", "algo-2"], "algo-2", "local", "lo")
    framework = {
        "sagemaker_program": "train.py",
        "sagemaker_submit_directory": str(layout.code_dir),
        "sagemaker_container_log_level": 20,
        "sagemaker_job_name": "job-1",
        "sagemaker_region": "us-east-1",
        **_framework_parameters("smddp", 1),
    }
    env = training_environment(
        layout,
        resource=resource,
        data_config=input_data_config(["train"]),
        hyperparameters={"epochs": 2, "optimizer": "adam"},
        framework_parameters=framework,
        num_cpus=2,
        num_gpus=0,
        job_name="job-1",
    )
    root = str(layout.root)
    expected = {
        "SM_HOSTS": '["algo-1","algo-2"]',
        "SM_CURRENT_HOST": "algo-2",
        "SM_NUM_CPUS": "2",
        "SM_NUM_GPUS": "0",
        "SM_NUM_NEURONS": "0",
        "SM_MODEL_DIR": f"{root}/model",
        "SM_CHANNELS": '["train"]',
        "SM_CHANNEL_TRAIN": f"{root}/input/data/train",
        "SM_OUTPUT_DATA_DIR": f"{root}/output/data",
        "SM_OUTPUT_DIR": f"{root}/output",
        "SM_OUTPUT_INTERMEDIATE_DIR": f"{root}/output/intermediate",
        "SM_INPUT_DIR": f"{root}/input",
        "SM_INPUT_CONFIG_DIR": f"{root}/input/config",
        "SM_HPS": '{"epochs":2,"optimizer":"adam"}',
        "SM_HP_EPOCHS": "2",
        "SM_HP_OPTIMIZER": "adam",
        "SM_USER_ENTRY_POINT": "train.py",
        "SM_USER_ARGS": '["--epochs","2","--optimizer","adam"]',
        "SM_MODULE_NAME": "train",
        "SM_MODULE_DIR": f"{root}/code",
        "SM_LOG_LEVEL": "20",
        "SM_FRAMEWORK_MODULE": "sagemaker_tensorflow_container.training:main",
        "SM_FRAMEWORK_PARAMS": '{"sagemaker_distributed_dataparallel_custom_mpi_options":"",'
        '"sagemaker_distributed_dataparallel_enabled":true,"sagemaker_instance_type":"local",'
        '"sagemaker_mpi_num_of_processes_per_host":1}',
        "SM_NETWORK_INTERFACE_NAME": "lo",
        "SM_CURRENT_INSTANCE_TYPE": "local",
        "SM_CURRENT_INSTANCE_GROUP": "homogeneousCluster",
        "SM_CURRENT_INSTANCE_GROUP_HOSTS": '["algo-1","algo-2"]',
        "SM_INSTANCE_GROUPS": '["homogeneousCluster"]',
        "SM_DISTRIBUTION_INSTANCE_GROUPS": '["homogeneousCluster"]',
        "SM_IS_HETERO": "false",
        "SM_RESOURCE_CONFIG": json.dumps(resource, sort_keys=True, separators=(",", ":")),
        "SM_INPUT_DATA_CONFIG": '{"train":{"RecordWrapperType":"None","S3DistributionType":"FullyReplicated",'
        '"TrainingInputMode":"File"}}',
    }
    for name, value in expected.items():
        assert env[name] == value, name
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["hosts"] == ["algo-1", "algo-2"]
    assert training_env["current_host"] == "algo-2"
    assert training_env["master_hostname"] == "algo-1" and training_env["is_master"] is False
    assert training_env["channel_input_dirs"] == {"train": f"{root}/input/data/train"}
    assert training_env["hyperparameters"] == {"epochs": 2, "optimizer": "adam"}
    assert training_env["additional_framework_parameters"]["sagemaker_distributed_dataparallel_enabled"] is True
    assert training_env["job_name"] == "job-1"
    assert all(name.startswith("SM_") for name in env)


def _framework_parameters(kind: str, per_host: int) -> dict:
    config = DistributionConfig.from_flat(kind, processes_per_host=per_host)
    return strategy_named(kind).framework_parameters(config, "local")


def test_framework_parameters_per_distribution() -> None:
    """What the SDK sends for each strategy (sagemaker/tensorflow/estimator.py and sagemaker/estimator.py)."""
    assert _framework_parameters("mpi", 2) == {
        "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": 2,
        "sagemaker_mpi_custom_mpi_options": "",
    }
    assert _framework_parameters("smddp", 1) == {  # with the processes per host the kit's estimator adds
        "sagemaker_distributed_dataparallel_enabled": True,
        "sagemaker_distributed_dataparallel_custom_mpi_options": "",
        "sagemaker_instance_type": "local",
        "sagemaker_mpi_num_of_processes_per_host": 1,
    }
    assert _framework_parameters("mwms", 1) == {"sagemaker_multi_worker_mirrored_strategy_enabled": True}
    assert _framework_parameters("parameter_server", 1) == {"sagemaker_parameter_server_enabled": True}
    assert _framework_parameters("none", 1) == {}
    assert _framework_parameters("dtensor", 2) == {}
    assert set(NAMES) == {"none", "smddp", "mpi", "mwms", "dtensor", "parameter_server"}


def test_create_host_tree(tmp_path: Path) -> None:
    layout = create_host_tree(
        tmp_path / "algo-1",
        "algo-1",
        encoded_hyperparameters={"epochs": "3"},
        resource={"current_host": "algo-1"},
        data_config={},
        checkpoint_path=str(tmp_path / "ckpt"),
    )
    for folder in ("input/config", "input/data", "code", "model", "output/data", "output/intermediate"):
        assert (layout.root / folder).is_dir(), folder
    assert json.loads(layout.hyperparameters_file.read_text()) == {"epochs": "3"}
    assert layout.checkpoints_dir.resolve() == (tmp_path / "ckpt").resolve()
    with pytest.raises(FileExistsError):
        create_host_tree(tmp_path / "algo-1", "algo-1", encoded_hyperparameters={}, resource={}, data_config={})


def test_host_addresses_are_one_loopback_address_per_host() -> None:
    assert host_addresses(3) == {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3", "algo-3": "127.0.0.4"}


def test_plan_single() -> None:
    plans = local_launch("none", 2).plans
    assert [(p.label, p.host, p.rank, dict(p.env)) for p in plans] == [("algo-1,0", "algo-1", 0, {}), ("algo-2,1", "algo-2", 1, {})]


def test_plan_horovod_is_host_major_and_carries_the_shim() -> None:
    from smddp_compat.smdistributed_shim import path

    launch = local_launch("smddp", 2, 2)
    plans = launch.plans
    assert [(p.label, p.host_index, p.local_rank) for p in plans] == [
        ("algo-1,0", 0, 0), ("algo-1,1", 0, 1), ("algo-2,2", 1, 0), ("algo-2,3", 1, 1)
    ]
    assert [p.env["HOROVOD_RANK"] for p in plans] == ["0", "1", "2", "3"]
    assert [p.env["HOROVOD_LOCAL_RANK"] for p in plans] == ["0", "1", "0", "1"]
    assert all(p.python_path == (path(),) for p in plans)
    assert not launch.mpi and "Gloo" in (launch.note or "")
    assert local_launch("mpi", 1).plans[0].python_path == ()


def test_plan_mwms_builds_tf_config_per_worker() -> None:
    plans = local_launch("mwms", 2, 2, ports=[1001, 1002, 1003, 1004]).plans
    workers = ["127.0.0.2:1001", "127.0.0.2:1002", "127.0.0.3:1003", "127.0.0.3:1004"]
    for index, plan in enumerate(plans):
        assert json.loads(plan.env["TF_CONFIG"]) == {
            "cluster": {"worker": workers},
            "environment": "cloud",
            "task": {"index": index, "type": "worker"},
        }
    assert [p.label for p in plans] == ["algo-1,0", "algo-1,1", "algo-2,2", "algo-2,3"]


def test_plan_mwms_reserves_a_free_port_per_worker() -> None:
    plans = local_launch("mwms", 2, 2).plans
    endpoints = json.loads(plans[0].env["TF_CONFIG"])["cluster"]["worker"]
    assert len(set(endpoints)) == 4 and all(int(e.rsplit(":", 1)[1]) > 0 for e in endpoints)


def test_plan_dtensor_builds_jobs_client_ids_and_mesh() -> None:
    plans = local_launch("dtensor", 2, 1, ports=[2001, 2002], mesh={"batch": 4}, devices_per_process=2).plans
    assert [dict(p.env) for p in plans] == [
        {
            "DTENSOR_JOBS": "127.0.0.2:2001,127.0.0.3:2002",
            "DTENSOR_JOB_NAME": "worker",
            "DTENSOR_CLIENT_ID": str(index),
            "SMDDP_DTENSOR_MESH": '{"batch":4}',
            "SMDDP_DTENSOR_DEVICES_PER_CLIENT": "2",
            "SMDDP_DTENSOR_NUM_CLIENTS": "2",
        }
        for index in range(2)
    ]
    bare = local_launch("dtensor", 1, 2, ports=[3001, 3002]).plans
    assert bare[1].env == {"DTENSOR_JOBS": "127.0.0.2:3001,127.0.0.2:3002", "DTENSOR_JOB_NAME": "worker",
                           "DTENSOR_CLIENT_ID": "1", "SMDDP_DTENSOR_NUM_CLIENTS": "2"}


def test_plan_parameter_server_is_the_toolkits_layout() -> None:
    """Per host a parameter server and the script, with TF_CONFIG as sagemaker-tensorflow-training 20.5.0's
    _build_tf_config_for_ps builds it (the master on the first host), on loopback addresses and reserved ports."""
    plans = local_launch("parameter_server", 2, ports=[11, 12, 21, 22]).plans
    assert [p.label for p in plans] == ["algo-1,ps", "algo-1,master", "algo-2,ps", "algo-2,worker"]
    assert [p.module for p in plans] == ["smddp_compat.parameter_server", None] * 2
    cluster_spec = {"master": ["127.0.0.2:11"], "ps": ["127.0.0.2:12", "127.0.0.3:22"], "worker": ["127.0.0.3:21"]}
    tasks = [json.loads(p.env["TF_CONFIG"]) for p in plans]
    assert all(t["cluster"] == cluster_spec and t["environment"] == "cloud" for t in tasks)
    assert [t["task"] for t in tasks] == [
        {"index": 0, "type": "ps"}, {"index": 0, "type": "master"}, {"index": 1, "type": "ps"},
        {"index": 0, "type": "worker"},
    ]
    alone = local_launch("parameter_server", 1)
    assert [(p.label, dict(p.env)) for p in alone.plans] == [("algo-1,0", {})]
    assert "alone" in (alone.note or "")


def test_the_callers_job_variables_are_not_inherited() -> None:
    from smddp_compat.local_mode.environment import inherited_environment

    parent = {
        "PATH": "/usr/bin",
        "SM_HOSTS": '["other"]',
        "SM_CHANNEL_TRAIN": "/elsewhere",
        "HOROVOD_RANK": "5",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "1234",
        "HOROVOD_FUSION_THRESHOLD": "1048576",
        "TF_CONFIG": "{}",
        "DTENSOR_CLIENT_ID": "3",
        "OMPI_COMM_WORLD_RANK": "1",
        "TRAINING_JOB_NAME": "outer",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": "/cfg.yaml",
    }
    assert inherited_environment(parent) == {
        "PATH": "/usr/bin",
        "HOROVOD_FUSION_THRESHOLD": "1048576",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": "/cfg.yaml",
    }
