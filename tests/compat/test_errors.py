"""Mistakes give clear errors that name the value; mismatched ranks fail instead of hanging."""

import subprocess
import sys
import time

import pytest

from tests.compat.conftest import PROGRAMS, quiet_env


@pytest.mark.processes
def test_mismatched_shapes_fail_fast_with_clear_error(run_ranks):
    started = time.monotonic()
    job = run_ranks("errors.py", 2, "mismatch", timeout=120)
    assert job.returncode != 0
    assert time.monotonic() - started < 60
    assert "COLLECTIVE ERROR" in job.output and "Mismatched" in job.output, job.output
    assert "same shape" in job.output


def _single(case: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROGRAMS / "errors.py"), case], env=quiet_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.processes
def test_init_twice_raises_the_documented_text():
    proc = _single("twice")
    assert proc.returncode != 0
    assert "init() called more than once. smdistributed.dataparallel is already initialized." in proc.stderr


@pytest.mark.processes
def test_call_before_init_names_the_function():
    proc = _single("before")
    assert proc.returncode != 0
    assert "rank() was called before init()" in proc.stderr


@pytest.fixture(scope="module")
def sdp():
    import smddp_compat.tensorflow as sdp

    if not sdp.is_initialized():
        sdp.init()
    return sdp


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda s, tf: s.allreduce(tf.ones(2), 0, 1, compression="zip"), "unknown compression 'zip'"),
        (lambda s, tf: s.allreduce(tf.ones(2), 0, 1, op="median"), "unknown reduction op 'median'"),
        (lambda s, tf: s.allreduce(tf.ones(2), 0, 1, op=42), "unknown reduction op 42"),
        (lambda s, tf: s.allreduce(tf.ones(2), 3, 2), "param_index 3 must be smaller than num_params 2"),
        (lambda s, tf: s.oob_allreduce(tf.ones(2), op=s.ReduceOp.SUM), "op ReduceOp.SUM is not supported"),
        (lambda s, tf: s.broadcast(tf.ones(2), root_rank=5), "root_rank 5 is out of range"),
        (lambda s, tf: s.DistributedOptimizer(tf.keras.optimizers.SGD(), device_dense="/gpu:0"),
         "device_dense='/gpu:0' is not supported"),
        (lambda s, tf: s.DistributedGradientTape(tf.GradientTape(), device_sparse="/cpu:0"),
         "device_sparse='/cpu:0' is not supported"),
        (lambda s, tf: s.DistributedOptimizer(tf.keras.optimizers.SGD(), bucket_cap_mb=0), "bucket_cap_mb"),
        (lambda s, tf: s.DistributedOptimizer(tf.keras.optimizers.SGD(), bucket_cap_mb=1e-7),
         "not a multiple of 128"),
        (lambda s, tf: s.DistributedOptimizer(tf.keras.optimizers.SGD(), bucket_cap_mb="25"), "bucket_cap_mb"),
        (lambda s, tf: s.DistributedOptimizer("sgd"), "cannot wrap builtins.str"),
        (lambda s, tf: s.DistributedGradientTape("tape"), "wraps a tf.GradientTape, got str"),
        (lambda s, tf: s.broadcast_global_variables(0), "graph mode only"),
    ],
)
def test_bad_arguments_name_the_value(sdp, call, expected):
    import tensorflow as tf

    from smddp_compat.errors import SmddpError

    with pytest.raises(SmddpError, match=None) as info:
        call(sdp, tf)
    assert expected in str(info.value)


def test_valid_bucket_sizes_accepted(sdp):
    import tensorflow as tf

    for value in (25, 1, 0.5, 64):
        assert sdp.DistributedOptimizer(tf.keras.optimizers.SGD(), bucket_cap_mb=value) is not None


@pytest.mark.processes
@pytest.mark.parametrize("argv, expected", [
    (["-np", "0", "python", "x.py"], "-np must be at least 1, got 0"),
    (["-np", "2", "-H", "localhost:x", "python", "x.py"], "slots 'x' of host 'localhost' is not an integer"),
    (["-np", "4", "-H", "localhost:2", "python", "x.py"], "more ranks than the 2 slots"),
    (["-np", "1", "-H", "10.1.2.3:1", "python", "x.py"], "host '10.1.2.3' in -H is not this machine"),
    (["-np", "2"], "needs a command to run"),
])
def test_smddprun_rejects_bad_arguments(argv, expected):
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert expected in proc.stderr
