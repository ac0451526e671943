"""Keras 3 turns XLA on for ``fit`` when a GPU is present (``jit_compile="auto"``, its default), and XLA cannot
compile Horovod's ops: after the kit's ``init()`` the default resolves to no XLA (as Keras 2's did), and an explicit
``jit_compile=True`` where Horovod's ops would be compiled stops with one line naming ``jit_compile=False``. Run on
this CPU-only machine in processes where TensorFlow reports a GPU (``programs/with_reported_gpu.py``, a double of the
environment Keras consults); the kit and Keras are real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat import keras_compat
from tests.compat.conftest import PROGRAMS, quiet_env

pytestmark = pytest.mark.processes

WITH_GPU = str(PROGRAMS / "with_reported_gpu.py")
PROGRAM = str(PROGRAMS / "keras_fit_default_jit.py")


@pytest.mark.parametrize(("face", "reduce_in"), [("horovod", "optimizer"), ("smddp", "tape")])
def test_default_jit_compile_trains_where_a_gpu_is_reported(run_ranks, face: str, reduce_in: str) -> None:
    """Each face and each place the gradients are reduced once (both faces share the one compile rule; the four
    refusals below name each combination's place)."""
    job = run_ranks("with_reported_gpu.py", 2, PROGRAM, face, "default", reduce_in)
    assert job.returncode == 0, job.output[-3000:]
    first, second = job.results[0], job.results[1]
    assert first["gpus_reported"] == 1  # Keras saw a GPU, so it would have chosen XLA
    assert first["jit_compile"] is False
    assert first["weights"] == second["weights"]  # the all-reduce ran: the ranks agree
    assert first["losses"][-1] < first["losses"][0]


@pytest.mark.parametrize(("face", "reduce_in", "where"),
                         [("horovod", "optimizer", "the distributed optimizer"),
                          ("smddp", "optimizer", "the distributed optimizer"),
                          ("horovod", "tape", "DistributedGradientTape.gradient"),
                          ("smddp", "tape", "gradient allreduce")])
def test_explicit_jit_compile_true_stops_in_one_line(run_ranks, face: str, reduce_in: str, where: str) -> None:
    job = run_ranks("with_reported_gpu.py", 2, PROGRAM, face, "true", reduce_in)
    assert job.returncode != 0
    assert f"UsageError: {keras_compat.XLA_REFUSED.format(where=where)}" in job.output, job.output[-3000:]
    assert "jit_compile=False" in keras_compat.XLA_REFUSED
    assert "tf2xla" not in job.output  # XLA's own error never got to speak


def test_tf_keras_leaves_xla_off_by_itself(run_ranks) -> None:
    job = run_ranks("with_reported_gpu.py", 2, PROGRAM, "horovod", "default", "optimizer",
                    env={"TF_USE_LEGACY_KERAS": "1"})
    assert job.returncode == 0, job.output[-3000:]
    assert job.results[0]["gpus_reported"] == 1 and job.results[0]["jit_compile"] is False


RULES = """
import json, os
import tensorflow as tf
import smddp_compat.tensorflow as sdp
sdp.init()
def model():
    return tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
found = {}
plain = model()
plain.compile(optimizer="adam", loss="mse")
found["plain_default"] = plain.jit_compile
plain.compile(optimizer="adam", loss="mse", jit_compile=True)
found["plain_true"] = plain.jit_compile
distributed = model()
distributed.compile(optimizer=sdp.DistributedOptimizer(tf.keras.optimizers.Adam()), loss="mse")
found["distributed_default"] = distributed.jit_compile
try:
    distributed.jit_compile = True
    found["distributed_set_true"] = distributed.jit_compile
except ValueError as error:
    found["distributed_set_true"] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


@pytest.mark.parametrize(("extra_env", "expected"), [
    ({}, {"plain_default": False, "plain_true": True, "distributed_default": False,
          "distributed_set_true": "UsageError: " + keras_compat.XLA_REFUSED.format(where="the distributed optimizer")}),
    # Horovod's own XLA ops switched on: jit_compile is Keras's alone again.
    ({keras_compat.HOROVOD_XLA_OPS: "1"}, {"plain_default": True, "plain_true": True, "distributed_default": True,
                                           "distributed_set_true": True}),
])
def test_the_rules_in_one_process(tmp_path: Path, extra_env: dict[str, str], expected: dict) -> None:
    script = tmp_path / "rules.py"
    script.write_text(RULES)
    done = subprocess.run([sys.executable, WITH_GPU, str(script)], env=quiet_env(**extra_env), capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected
