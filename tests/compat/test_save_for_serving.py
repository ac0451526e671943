"""An SMDDP script's last line, ``model.save(os.path.join(SM_MODEL_DIR, "1"))``, writes the SavedModel that TF
Serving (and SageMaker's TF serving images) load, on Keras 3 as on tf-keras: proven by loading it in a process
without the kit, reading its ``serve`` tag and ``serving_default`` signature as ``saved_model_cli`` does, and
comparing the signature's predictions with the model's."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from smddp_compat import keras_compat
from tests.compat.conftest import PROGRAMS, quiet_env

pytestmark = pytest.mark.processes

TF_KERAS = {"TF_USE_LEGACY_KERAS": "1"}
NOTE_START = keras_compat.SAVEDMODEL_NOTE.split("{", 1)[0]

# What TF Serving does with the folder, in a process that never imports the kit.
SERVE = """
import json, sys
import numpy as np, tensorflow as tf
from tensorflow.python.tools import saved_model_utils
path, probe = sys.argv[1], np.array(json.loads(sys.argv[2]), dtype=np.float32)
signature = saved_model_utils.get_meta_graph_def(path, "serve").signature_def["serving_default"]
serving_default = tf.saved_model.load(path, tags=["serve"]).signatures["serving_default"]
(input_name,) = serving_default.structured_input_signature[1]
(output,) = serving_default(**{input_name: tf.constant(probe)}).values()
print(json.dumps({"inputs": sorted(signature.inputs), "outputs": sorted(signature.outputs),
                  "predictions": output.numpy().tolist(), "kit_imported": "smddp_compat" in sys.modules}))
"""


def _serve(path: Path, probe: list) -> dict:
    done = subprocess.run([sys.executable, "-c", SERVE, str(path), json.dumps(probe)], env=quiet_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_serves(model: Path, result: dict) -> None:
    """``model`` (a SavedModel folder) loads without the kit, with one input and one output, and predicts what the
    script's model predicted (``result``: rank 0's record)."""
    assert (model / "saved_model.pb").is_file() and (model / "variables").is_dir()
    served = _serve(model, result["probe"])
    assert not served["kit_imported"]
    assert len(served["inputs"]) == 1 and len(served["outputs"]) == 1, served
    np.testing.assert_allclose(served["predictions"], result["predictions"], rtol=1e-5, atol=1e-6)


def test_a_tf_keras_smddp_script_saves_a_savedmodel_that_serves_its_predictions(run_ranks, tmp_path: Path) -> None:
    """tf-keras's own ``model.save`` to a folder, saying nothing (Keras 3's: the local job below)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    job = run_ranks("smddp_save_for_serving.py", 2, env={"SM_MODEL_DIR": str(model_dir), **TF_KERAS})
    assert job.returncode == 0, job.output[-3000:]
    _assert_serves(model_dir / "1", job.results[0])
    assert NOTE_START not in job.output, job.output[-3000:]


@pytest.mark.timeout(400)
def test_a_local_job_ships_the_savedmodel_in_model_tar_gz_as_sagemaker_serving_expects(tmp_path: Path) -> None:
    """Under ``smddp local`` (2 hosts, distribution smddp, Keras 3) the script's ``model.save`` to a folder writes a
    SavedModel, said once (by rank 0, naming the opt-out), and the job's ``model.tar.gz`` holds it as
    ``1/saved_model.pb``, the layout SageMaker's TF serving images load, serving the model's predictions."""
    results = tmp_path / "results"
    results.mkdir()
    argv = [sys.executable, "-m", "smddp_compat.commands.cli", "local", "smddp_save_for_serving.py", "--source-dir",
            str(PROGRAMS), "--instance-count", "2", "--distribution", "smddp", "--job-name", "save-for-serving",
            "--output", str(tmp_path / "out"), "--env", f"RESULT_DIR={results}"]
    done = subprocess.run(argv, env=quiet_env(), capture_output=True, text=True, timeout=360)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert output.count(NOTE_START) == 1 and f"{keras_compat.SAVEDMODEL_OPT_OUT}=0" in output, output[-3000:]
    (archive,) = (tmp_path / "out").glob("save-for-serving*/output/model.tar.gz")
    with tarfile.open(archive) as tar:
        assert "1/saved_model.pb" in [name.removeprefix("./") for name in tar.getnames()]
        tar.extractall(tmp_path / "served", filter="data")
    _assert_serves(tmp_path / "served" / "1", json.loads((results / "rank0.json").read_text()))


def test_the_opt_out_gives_back_keras3s_refusal(run_ranks, tmp_path: Path) -> None:
    job = run_ranks("smddp_save_for_serving.py", 2,
                    env={"SM_MODEL_DIR": str(tmp_path), keras_compat.SAVEDMODEL_OPT_OUT: "0"})
    assert job.returncode != 0
    assert "Invalid filepath extension" in job.output and NOTE_START not in job.output
    assert not (tmp_path / "1").exists()


# Each other kind of path, in one process of size 1 after init().
PATHS = """
import json, os, sys
import numpy as np, tensorflow as tf
import smddp_compat.tensorflow as sdp
sdp.init()
root = sys.argv[1]
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
model.compile(optimizer=sdp.DistributedOptimizer(tf.keras.optimizers.Adam()), loss="mse")
model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
found = {}
def attempt(name, call):
    try:
        call()
        found[name] = "ok"
    except Exception as error:
        found[name] = f"{type(error).__name__}: {error}"
os.makedirs(os.path.join(root, "existing"))
attempt("existing_folder", lambda: model.save(os.path.join(root, "existing")))
attempt("overwrite_true", lambda: model.save(os.path.join(root, "existing"), overwrite=True))
attempt("overwrite_false", lambda: model.save(os.path.join(root, "existing"), overwrite=False))
attempt("save_model_function", lambda: tf.keras.models.save_model(model, os.path.join(root, "by_function")))
attempt("save_format_tf", lambda: model.save(os.path.join(root, "save_format_tf"), save_format="tf"))
attempt("keras_file", lambda: model.save(os.path.join(root, "m.keras")))
attempt("h5_file", lambda: model.save(os.path.join(root, "m.h5")))
attempt("unzipped_keras", lambda: model.save(os.path.join(root, "unzipped"), zipped=False))
attempt("unknown_argument", lambda: model.save(os.path.join(root, "unknown"), signatures=None))
print(json.dumps(found))
"""


@pytest.mark.timeout(300)
def test_each_kind_of_path(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PATHS, str(tmp_path)], env=quiet_env(), capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("existing_folder", "overwrite_true", "save_model_function", "save_format_tf"):
        assert found[name] == "ok", found
    for folder in ("existing", "by_function", "save_format_tf"):
        assert (tmp_path / folder / "saved_model.pb").is_file(), folder
    existing = str(tmp_path / "existing")
    assert found["overwrite_false"] == (f"FileExistsError: model.save({existing!r}, overwrite=False): {existing} "
                                        "exists; pass overwrite=True or another path")
    # .keras, .h5 and zipped=False are Keras 3's own formats, unchanged; an argument Keras 3 lacks is Keras 3's error.
    assert found["keras_file"] == found["h5_file"] == found["unzipped_keras"] == "ok", found
    assert zipfile.is_zipfile(tmp_path / "m.keras") and (tmp_path / "m.h5").is_file()
    assert (tmp_path / "unzipped" / "config.json").is_file()
    assert found["unknown_argument"].startswith("ValueError: The following argument(s) are not supported"), found
    assert done.stderr.count(NOTE_START) == 1, done.stderr[-3000:]
