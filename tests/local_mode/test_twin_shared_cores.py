"""The twin runs every host on this machine's cores: a rank waiting in MPI yields its core (Open MPI's
mpi_yield_when_idle in the containers' environment), unless the request sets it itself."""

from __future__ import annotations

from smddp_compat.local_mode.docker.twin import YIELD_WHEN_IDLE, shared_cores_environment


def test_waiting_ranks_yield_their_cores() -> None:
    assert shared_cores_environment({"A": "b"}) == {YIELD_WHEN_IDLE: "1"}


def test_the_requests_own_setting_wins() -> None:
    assert shared_cores_environment({YIELD_WHEN_IDLE: "0"}) == {}
