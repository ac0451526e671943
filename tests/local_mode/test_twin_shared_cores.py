"""The twin runs every host on this machine's cores: a rank waiting in MPI yields its core (Open MPI's
mpi_yield_when_idle in the containers' environment), and mpirun binds no rank to a core (every container's core 0 is
the same core here), each unless the request sets it itself."""

from __future__ import annotations

from smddp_compat.local_mode.docker.twin import BINDING_POLICY, YIELD_WHEN_IDLE, shared_cores_environment


def test_waiting_ranks_yield_their_cores() -> None:
    assert shared_cores_environment({"A": "b"})[YIELD_WHEN_IDLE] == "1"


def test_no_rank_is_bound_to_a_core() -> None:
    # The toolkit's mpirun of a 2-rank job binds each host's rank to its core 0: in the twin both ranks on one core
    # (a training step of the README's main job 116 ms against 16-17 ms unbound).
    assert shared_cores_environment({"A": "b"})[BINDING_POLICY] == "none"


def test_the_requests_own_settings_win() -> None:
    assert shared_cores_environment({YIELD_WHEN_IDLE: "0"}) == {BINDING_POLICY: "none"}
    assert shared_cores_environment({BINDING_POLICY: "core"}) == {YIELD_WHEN_IDLE: "1"}
    assert shared_cores_environment({YIELD_WHEN_IDLE: "0", BINDING_POLICY: "core"}) == {}
