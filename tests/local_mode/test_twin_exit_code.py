"""A failed twin job reports the exit code of the host that failed, not of a host the twin killed after it."""

from __future__ import annotations

from smddp_compat.local_mode.docker.twin import failed_exit_code


def test_the_failed_hosts_code_wins_over_a_host_killed_after_it() -> None:
    # algo-2's script exited 1; the twin then killed algo-1 (137), which comes first in host order. Before, the job
    # reported 137 whenever algo-1's kill landed before the codes were read (a CI run of the Keras 3 MWMS test).
    assert failed_exit_code({"algo-1": 137, "algo-2": 1}, "algo-2") == 1


def test_without_a_failed_host_the_first_non_zero_code_then_1() -> None:
    assert failed_exit_code({"algo-1": 0, "algo-2": 3}, None) == 3
    assert failed_exit_code({"algo-1": 0, "algo-2": 0}, None) == 1
    assert failed_exit_code({"algo-1": 0, "algo-2": 0}, "algo-2") == 1
