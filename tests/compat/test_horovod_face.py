"""The Horovod face (smddp_compat.horovod.tensorflow[.keras]): every added or overridden function on real ranks,
results checked against rank and size: Keras 3 on 3 ranks, tf-keras on 2 (each flavour and each world size once; an
odd world size is where a mean or an uneven split goes wrong)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.compat.conftest import PROGRAMS, JobRun, quiet_env, smddprun_argv

FLAVOURS = {"keras3": {}, "tf_keras": {"TF_USE_LEGACY_KERAS": "1"}}


@pytest.fixture(scope="module")
def face_runs(tmp_path_factory):
    """Runs programs/horovod_face.py once per (Keras flavour, ranks), shared by the checks below."""
    runs: dict[tuple[str, int], JobRun] = {}

    def get(flavour: str, num_proc: int) -> JobRun:
        if (flavour, num_proc) not in runs:
            result_dir = tmp_path_factory.mktemp(f"horovod-face-{flavour}-{num_proc}")
            argv = smddprun_argv(num_proc, "--timeout", "400", sys.executable, str(PROGRAMS / "horovod_face.py"))
            proc = subprocess.run(argv, env=quiet_env(RESULT_DIR=str(result_dir), **FLAVOURS[flavour]),
                                  capture_output=True, text=True, timeout=460, cwd=result_dir)
            results = {int(p.stem[4:]): json.loads(p.read_text()) for p in result_dir.glob("rank*.json")}
            runs[(flavour, num_proc)] = JobRun(proc.returncode, proc.stdout + proc.stderr, results)
        return runs[(flavour, num_proc)]

    return get


@pytest.mark.e2e
@pytest.mark.parametrize("flavour, num_proc", [("keras3", 3), ("tf_keras", 2)])
def test_horovod_face_functions_match_rank_and_size(face_runs, flavour, num_proc):
    job = face_runs(flavour, num_proc)
    assert job.returncode == 0, job.output[-6000:]
    assert sorted(job.results) == list(range(num_proc)), job.output[-6000:]
    n = num_proc
    mean = (n + 1) / 2  # each rank's gradient is rank + 1
    total = n * (n + 1) / 2
    for rank, res in job.results.items():
        assert res["keras"] == ("tf_keras" if flavour == "tf_keras" else "keras")
        assert res["size"] == n and res["sdp_rank"] == rank
        # Horovod's own collectives and error types come through unchanged.
        assert res["alltoall"] == [i * 10 + rank for i in range(n)]
        assert res["reducescatter"] == [[total, total]]
        assert res["mismatch_error"] in ("FailedPreconditionError", "InvalidArgumentError")
        # broadcast_variables on Keras variables: every value becomes the root's (rank n - 1).
        assert res["broadcast"] == [float(n - 1)]
        # Tapes: averaged / own gradient = mean / (rank + 1); Sum over a group: total / (rank + 1).
        assert res["tape_ratio"] == pytest.approx([mean / (rank + 1)] * 4)
        assert res["tape_function_ratio"] == pytest.approx([mean / (rank + 1)] * 4)
        assert res["tape_grouped_sum_ratio"] == pytest.approx(total / (rank + 1))
        assert res["partial_local_ratio"] == pytest.approx([1 / n, 1 / n])
        assert res["partial_global_ratio"] == pytest.approx([mean / (rank + 1)] * 2)
        # DistributedOptimizer: SGD(1) on w with gradient rank + 1; [w, iterations, aggregation counter].
        assert res["opt_average"] == [pytest.approx(-4 * mean), 4, None]
        assert res["opt_sum_function"] == [pytest.approx(-4 * total), 4, None]
        # backward_passes_per_step=2 over 5 steps: 2 updates of the summed pair, 1 step pending, 5 iterations.
        assert res["opt_bpps_sum"] == [pytest.approx(-2 * 2 * mean), 5, 1]
        assert res["opt_bpps_avg"] == [pytest.approx(-2 * mean), 4, 0]
        # PartialDistributedOptimizer: layer 0 (kernel 3 x 1, bias) stays local, scaled by 1 / size.
        assert res["partial_opt_grads"] == pytest.approx([3 * (rank + 1) / n, (rank + 1) / n, 4 * mean, mean])
        assert res["sparse_as_dense_type"] != "IndexedSlices"
        expected_rows = [-2 * (r + 1) / n if r < n else 0.0 for r in range(3)] + [-2 * mean]
        assert res["embedding_change"] == pytest.approx(expected_rows)
        # Learning-rate warm-up (epochs 0-1, 2 batches each), then the schedule (x0.5 per epoch from epoch 2).
        initial = 0.1 * n
        warmup = [initial / n * ((e + b / 2 + 0.5) * (n - 1) / 2 + 1) for e in (0, 1) for b in (0, 1)]
        assert res["fit_lrs"] == pytest.approx(warmup + [initial] * 2 + [initial / 2] * 2)
        # SyncBatchNormalization: statistics of every rank's rows (rank r holds r*10 + 0..3), momentum 0.5.
        data = np.concatenate([r * 10.0 + np.arange(4.0) for r in range(n)])
        mine = rank * 10.0 + np.arange(4.0)
        assert res["syncbn_output"] == pytest.approx(((mine - data.mean()) / data.std()).tolist(), rel=1e-4)
        assert res["syncbn_moving_mean"] == pytest.approx(data.mean() / 2)
        # elastic.KerasState: synced from rank 0, restored after a change; epoch from rank 0.
        assert res["elastic"] == [0.0, 0.0, 10]
        # load_model: same optimizer class, its iteration count kept.
        assert res["load_model"][:2] == ["SGD", 1]
    first = job.results[0]
    for rank, res in job.results.items():
        # Metric average: identical logs; broadcast with a local bias: kernels equal, biases keep rank offsets.
        assert res["fit_loss"] == pytest.approx(first["fit_loss"])
        assert res["fit_weights"][0] == pytest.approx(first["fit_weights"][0])
        assert res["fit_weights"][1] - first["fit_weights"][1] == pytest.approx(rank, abs=1e-3)
        # The loaded model's next step used all-reduced gradients: same weights on every rank.
        assert res["load_model"][2] == pytest.approx(first["load_model"][2])


def test_override_table_matches_the_face_modules():
    """Every name the faces define instead of Horovod's is in OVERRIDES, and every entry is defined."""
    import smddp_compat.horovod.tensorflow as tf_face
    import smddp_compat.horovod.tensorflow.keras as keras_face
    from smddp_compat.horovod import OVERRIDES
    from smddp_compat.horovod.forward import overridden_names

    listed = {(module.strip(), o.name) for o in OVERRIDES for module in o.modules.split(",")}
    defined = {("tensorflow", name) for name in overridden_names(tf_face)}
    defined |= {("tensorflow.keras", name) for name in overridden_names(keras_face)}
    assert listed == defined


def test_everything_else_is_horovods_own():
    import horovod.tensorflow as horovod_tf
    import horovod.tensorflow.keras as horovod_keras

    import smddp_compat.horovod.keras as keras_alias
    import smddp_compat.horovod.tensorflow as hvd
    import smddp_compat.horovod.tensorflow.keras as hvd_keras
    from smddp_compat.horovod.tensorflow.util import _executing_eagerly

    for name in ("alltoall", "reducescatter", "grouped_allgather", "join", "ProcessSet", "add_process_set",
                 "start_timeline", "rank_op", "broadcast_", "broadcast_object_fn", "ccl_built", "Compression"):
        assert getattr(hvd, name) is getattr(horovod_tf, name)
    assert hvd.util is horovod_tf.util and _executing_eagerly is horovod_tf.util._executing_eagerly
    assert hvd_keras.reducescatter is horovod_keras.reducescatter
    assert keras_alias is hvd_keras
    assert "alltoall" in hvd.__all__ and "DistributedOptimizer" in hvd_keras.__all__
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        hvd.no_such_function  # noqa: B018


@pytest.mark.processes
def test_init_twice_is_allowed_alone(tmp_path):
    """Horovod's semantics in one process: init twice, shutdown, init again; the SMDDP face sees it."""
    code = ("import smddp_compat.horovod.tensorflow as hvd, smddp_compat.tensorflow as sdp\n"
            "hvd.init(); hvd.init(); print(hvd.rank(), hvd.size(), sdp.rank())\n"
            "hvd.shutdown(); print(hvd.is_initialized()); hvd.init(); print(hvd.is_initialized())\n")
    proc = subprocess.run([sys.executable, "-c", code], env=quiet_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1", "0", "False", "True"]


@pytest.mark.processes
def test_keras2_spellings_work_on_keras3_after_init():
    """After init(), Keras 3 takes what Horovod's Keras 2-era recipes and tests write (see keras_compat)."""
    code = """
import tensorflow as tf, keras, smddp_compat.horovod.tensorflow as hvd
hvd.init()
variable = keras.Variable(2.0)
assert variable.ref() == variable.value.ref() and {variable.ref(): 1}[variable.ref()] == 1
layer = tf.keras.layers.BatchNormalization(axis=1, fused=False)
model = tf.keras.Sequential([tf.keras.Input((2,)), layer])
opt = tf.keras.optimizers.SGD(lr=0.5)
model.compile(optimizer=opt, loss=tf.keras.losses.mean_squared_error, experimental_run_tf_function=False)
model.fit(tf.ones((4, 2)), tf.ones((4, 2)), verbose=0)
assert opt.variables() == opt.variables and float(opt.lr.numpy()) == 0.5
opt.lr = 0.25
accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
accuracy.update_state([1], [[0.0, 1.0]])
accuracy.reset_states()  # AWS's SMDDP TF2 custom-loop example resets its metrics so each epoch
assert float(accuracy.result()) == 0.0
with tf.Graph().as_default():
    in_graph = keras.Variable(3.0)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        fetched = session.run(in_graph)
print(float(opt.learning_rate.numpy()), fetched, keras.__version__[0])
"""
    proc = subprocess.run([sys.executable, "-c", code], env=quiet_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0.25", "3.0", "3"]


def test_docs_show_the_override_table():
    """The Horovod guide (docs/migrating-from-horovod.md) holds the table `python -m smddp_compat.horovod` prints,
    unchanged."""
    from pathlib import Path

    from smddp_compat.horovod import overrides_table

    guide = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-horovod.md").read_text(encoding="utf-8")
    assert overrides_table() in guide
