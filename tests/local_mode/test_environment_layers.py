"""A process's environment in the process backend is composed by one function, in the order its docstring lists."""

from __future__ import annotations

import os

from smddp_compat.local_mode.environment import process_environment

LAYERS = ("inherited", "job", "training", "platform", "hosts", "distribution", "stall_watchdog")


def test_each_layer_wins_over_the_ones_before_it_and_pythonpath_comes_last() -> None:
    layers = {name: {"WHO": name, f"ONLY_{name.upper()}": "1"} for name in LAYERS}
    layers["inherited"]["PYTHONUNBUFFERED"] = "0"
    layers["inherited"]["PYTHONPATH"] = "/users/own"
    for upto, name in enumerate(LAYERS):
        given = {layer: (layers[layer] if index <= upto else {}) for index, layer in enumerate(LAYERS)}
        env = process_environment(**given, python_path=["/plan", "/code", "/startup"])
        assert env["WHO"] == name, f"{name} should win over every layer listed before it"
        assert all(env[f"ONLY_{layer.upper()}"] == "1" for layer in LAYERS[: upto + 1])
    assert env["PYTHONUNBUFFERED"] == "1"  # layer 2 wins over what this machine says ...
    job_says = process_environment(**{**{n: {} for n in LAYERS}, "job": {"PYTHONUNBUFFERED": "0"}}, python_path=[])
    assert job_says["PYTHONUNBUFFERED"] == "0"  # ... and the job's own environment over layer 2
    assert env["PYTHONPATH"] == os.pathsep.join(["/plan", "/code", "/startup", "/users/own"])
    alone = process_environment(**{n: {} for n in LAYERS}, python_path=["/code"])
    assert alone["PYTHONPATH"] == "/code"
