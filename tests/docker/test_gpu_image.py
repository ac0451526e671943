"""The GPU image (``smddp image --gpu``), checked on a machine without a GPU (issue 24).

What can be checked short of the device: Horovod was built with NCCL (and Gloo, MPI); TensorFlow is the CUDA build
and names its CUDA and cuDNN versions; every library Horovod's op library and TensorFlow's CUDA libraries link
resolves inside the image (``ldd``: nothing "not found" but the GPU driver's ``libcuda.so.1``, which the host mounts
on a GPU instance; TensorFlow's own libraries, which Horovod's names without a path, found in TensorFlow's folder as
the process that imported TensorFlow finds them); the image carries the ``org.smddp-compat.cuda=12`` label the kit reads; and the kit's SMDDP and
Horovod faces train MNIST on 2 ranks on the CPU (no device: TensorFlow falls back, the job completes).

Opt-in, because the first build takes ~30 minutes on 2 cores (then the image is reused by its digest):

    SMDDP_GPU_IMAGE_TESTS=1 flock /tmp/smddp-docker-tests.lock .venv/bin/pytest -x -q tests/docker/test_gpu_image.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from smddp_compat.image import CUDA_LABEL, Engine
from smddp_compat.image.commands import capture

OPT_IN = "SMDDP_GPU_IMAGE_TESTS"
BUILD_LOG = "/tmp/smddp-docker-gpu-image-build.log"
# The driver (libcuda.so.1) is the host's: NVIDIA's container runtime mounts it on a GPU instance. Nothing else may be
# missing.
DRIVER = "libcuda.so.1"

pytestmark = pytest.mark.skipif(
    os.environ.get(OPT_IN) != "1",
    reason=f"the GPU image's checks are opt-in ({OPT_IN}=1): building it takes ~30 minutes on 2 cores",
)


@pytest.fixture(scope="module")
def gpu_image(docker_engine: Engine) -> str:
    """The GPU image, from ``smddp image --gpu`` (its tag is the last line it prints; built when missing)."""
    done = subprocess.run([sys.executable, "-m", "smddp_compat.commands.cli", "image", "--gpu", "--log", BUILD_LOG],
                          capture_output=True, text=True, timeout=7200)
    assert done.returncode == 0, f"smddp image --gpu failed: {done.stderr[-3000:]}"
    tag = done.stdout.strip().splitlines()[-1]
    assert tag.startswith("smddp-compat-gpu:"), done.stdout
    return tag


def _run(engine: Engine, image: str, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``docker run`` of one command in the image, without network (ranks talk over loopback) and without a GPU.

    ``--hostname localhost``: Gloo resolves the host's name, which a container without network cannot (its random
    name is in no ``/etc/hosts``: ``Unable to find address for: <id>``, then SIGSEGV).
    """
    return subprocess.run(
        [engine.docker, "run", "--rm", "--network", "none", "--hostname", "localhost", "--workdir", "/tmp/job", image,
         *argv],
        capture_output=True, text=True, timeout=timeout,
    )


_PROBE = r"""
import glob, json, os
import tensorflow as tf
import horovod, horovod.tensorflow as hvd
info = tf.sysconfig.get_build_info()
site = os.path.dirname(os.path.dirname(tf.__file__))
print(json.dumps({
    "tf": tf.__version__, "is_cuda_build": info.get("is_cuda_build"), "cuda_version": info.get("cuda_version"),
    "cudnn_version": info.get("cudnn_version"), "built_with_cuda": tf.test.is_built_with_cuda(),
    "gpus": len(tf.config.list_physical_devices("GPU")), "horovod": horovod.__version__,
    "nccl_built": bool(hvd.nccl_built()), "gloo_built": bool(hvd.gloo_built()), "mpi_built": bool(hvd.mpi_built()),
    "cuda_built": bool(hvd.cuda_built()),
    "horovod_lib": glob.glob(os.path.join(os.path.dirname(hvd.__file__), "mpi_lib*.so")),
    "tf_libs": glob.glob(os.path.join(site, "tensorflow", "*.so*")) + glob.glob(os.path.join(site, "tensorflow", "python", "_pywrap_tensorflow_internal.so")),
    "cuda_libs": sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "lib*.so*"))),
}))
"""


@pytest.fixture(scope="module")
def probe(docker_engine: Engine, gpu_image: str) -> dict[str, Any]:
    done = _run(docker_engine, gpu_image, "python", "-c", _PROBE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_horovod_has_nccl_gloo_and_mpi(probe: dict[str, Any]) -> None:
    assert probe["horovod"] == "0.28.1"
    assert probe["nccl_built"] and probe["gloo_built"] and probe["mpi_built"] and probe["cuda_built"], probe


def test_tensorflow_is_the_cuda_build(probe: dict[str, Any]) -> None:
    assert probe["tf"] == "2.21.0"
    assert probe["is_cuda_build"] is True and probe["built_with_cuda"] is True, probe
    assert re.fullmatch(r"12\.\d+(\.\d+)?", str(probe["cuda_version"])), probe["cuda_version"]
    assert re.fullmatch(r"9(\.\d+)*", str(probe["cudnn_version"])), probe["cudnn_version"]
    assert probe["gpus"] == 0  # no GPU here: what the training tests below run on is the CPU


def test_the_image_says_it_has_cuda(docker_engine: Engine, gpu_image: str) -> None:
    from smddp_compat.estimators import image_cuda

    code, text = capture([docker_engine.docker, "image", "inspect", "--format", "{{json .Config.Labels}}", gpu_image],
                         timeout=60)
    assert code == 0, text
    labels = json.loads(text)
    assert labels.get(CUDA_LABEL) == "12", labels
    assert image_cuda(gpu_image, labels) == "cuda" and image_cuda(gpu_image) == "cuda"


def test_linked_libraries_resolve(docker_engine: Engine, gpu_image: str, probe: dict[str, Any]) -> None:
    libraries = probe["horovod_lib"] + probe["tf_libs"] + probe["cuda_libs"]
    assert len(probe["horovod_lib"]) == 1, probe["horovod_lib"]
    names = {os.path.basename(path) for path in probe["cuda_libs"]}
    for needed in ("libnccl.so.2", "libcudnn.so.9", "libcublas.so.12", "libcudart.so.12", "libcufft.so.11",
                   "libcusolver.so.11", "libcusparse.so.12"):
        assert needed in names, sorted(names)
    # Horovod's library names TensorFlow's libtensorflow_framework.so.2 and libtensorflow_cc.so.2 without a path
    # (as in every Horovod build, the CPU image's too): at run time `import horovod.tensorflow` imports TensorFlow
    # first, and the process already holds them. ldd is shown that folder, as the loader effectively is.
    script = ('tf=$(dirname "$(python -c "import tensorflow, os; print(tensorflow.__file__)" 2>/dev/null)"); '
              'for f in "$@"; do echo "== $f"; LD_LIBRARY_PATH="$tf" ldd "$f"; done')
    done = _run(docker_engine, gpu_image, "sh", "-c", script, "ldd", *libraries)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    missing: dict[str, list[str]] = {}
    current = ""
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            current = line[3:]
        elif "not found" in line:
            missing.setdefault(current, []).append(line.split()[0])
    beyond_driver = {lib: names for lib, names in missing.items() if set(names) != {DRIVER}}
    assert beyond_driver == {}, beyond_driver
    horovod = done.stdout.split(f"== {probe['horovod_lib'][0]}")[1].split("== ")[0]
    assert re.search(r"libnccl\.so\.2 => \S*/nvidia/nccl/lib/libnccl\.so\.2", horovod), horovod
    assert re.search(r"libmpi\.so\.40 => (/usr)?/lib/x86_64-linux-gnu/", horovod), horovod


def _trains(done: subprocess.CompletedProcess[str], floor: float) -> float:
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "2 rank(s)" in out, out[-3000:]
    accuracies = [float(a) for a in re.findall(r"test_accuracy=([0-9.]+);", out)]
    assert accuracies and accuracies[-1] >= floor, out[-3000:]
    return accuracies[-1]


def test_smddp_face_trains_on_the_cpu(docker_engine: Engine, gpu_image: str) -> None:
    done = _run(docker_engine, gpu_image, "smddprun", "-np", "2", "python", "-m", "smddp_compat.entry_points.smddp_mnist",
                "--epochs", "1", "--max-steps", "40")
    _trains(done, 0.7)
    assert "model saved to" in done.stdout + done.stderr


def test_horovod_face_trains_on_the_cpu_over_mpi(docker_engine: Engine, gpu_image: str) -> None:
    done = _run(docker_engine, gpu_image, "smddprun", "--mpi", "-np", "2", "python", "-m",
                "smddp_compat.entry_points.horovod_mnist", "--epochs", "1", "--steps-per-epoch", "40")
    _trains(done, 0.7)
