"""The DTensor client topology is read from DTENSOR_* variables and every mistake is named (no TF devices used)."""

from __future__ import annotations

import pytest

from smddp_compat.entry_points.common.dtensor_mesh import DEFAULT_TOTAL_DEVICES, ClientTopology, resolve_total_devices
from smddp_compat.entry_points.common.errors import ClusterConfigError


def test_no_jobs_means_one_client() -> None:
    topology = ClientTopology.from_environ({"SM_HOSTS": '["algo-1", "algo-2"]'})
    assert topology.num_clients == 1 and not topology.is_multi_client and topology.is_chief


def test_jobs_and_client_id() -> None:
    topology = ClientTopology.from_environ(
        {"DTENSOR_JOBS": "127.0.0.2:9971, 127.0.0.3:9971", "DTENSOR_CLIENT_ID": "1", "DTENSOR_JOB_NAME": "worker"})
    assert topology.jobs == ("127.0.0.2:9971", "127.0.0.3:9971")
    assert topology.num_clients == 2 and topology.client_id == 1 and not topology.is_chief


@pytest.mark.parametrize(("environ", "fragment"), [
    ({"DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:2"}, "DTENSOR_CLIENT_ID=''"),
    ({"DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:2", "DTENSOR_CLIENT_ID": "2"}, "(0..1)"),
    ({"DTENSOR_JOBS": "127.0.0.1,127.0.0.1:2", "DTENSOR_CLIENT_ID": "0"}, "'127.0.0.1' is not host:port"),
    ({"DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:1", "DTENSOR_CLIENT_ID": "0"}, "twice"),
])
def test_mistakes_are_named(environ: dict[str, str], fragment: str) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        ClientTopology.from_environ(environ)
    assert fragment in str(caught.value)


def test_total_devices_come_from_the_flag_then_the_launcher_then_the_default() -> None:
    two = ClientTopology.from_environ({"DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:2", "DTENSOR_CLIENT_ID": "0"})
    launcher = {"SMDDP_DTENSOR_DEVICES_PER_CLIENT": "3"}
    assert resolve_total_devices(4, two, launcher) == 4
    assert resolve_total_devices(0, two, launcher) == 6
    assert resolve_total_devices(0, ClientTopology(), launcher) == 3
    assert resolve_total_devices(0, two, {}) == DEFAULT_TOTAL_DEVICES == 8
    with pytest.raises(ClusterConfigError, match="SMDDP_DTENSOR_DEVICES_PER_CLIENT='two'"):
        resolve_total_devices(0, two, {"SMDDP_DTENSOR_DEVICES_PER_CLIENT": "two"})
