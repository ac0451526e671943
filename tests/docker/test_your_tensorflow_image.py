"""The Dockerfile recipe for a TensorFlow image of the user's own (``image/Dockerfile.your-tensorflow``, issue 32).

A TensorFlow image stands in for the user's: the kit's Debian base with a venv holding ``tensorflow==2.21.0`` from
PyPI and nothing of the kit's (no Horovod, no build tools). The recipe is built on it as its comment says (the kit's
wheel in the context, ``BASE_IMAGE`` that image): Horovod compiles against the image's TensorFlow inside the build,
and ``smddp doctor``'s checks pass there. Then a container of the result runs a 2-rank job under ``smddprun``: an
allreduce through the kit's SMDDP face.

Opt-in, because the build compiles Horovod and downloads TensorFlow (~8 minutes on 2 cores the first time; Docker's
layer cache keeps the TensorFlow image):

    SMDDP_RECIPE_IMAGE_TESTS=1 .venv/bin/pytest -q tests/docker/test_your_tensorflow_image.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.image import Engine
from smddp_compat.image.commands import capture
from smddp_compat.image.rootfs import ensure_base_image, host_base_recipe

OPT_IN = "SMDDP_RECIPE_IMAGE_TESTS"
REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "image" / "Dockerfile.your-tensorflow"
USER_IMAGE = "smddp-test-user-tensorflow:2.21.0"
RESULT_IMAGE = "smddp-test-your-tensorflow:latest"

pytestmark = [
    pytest.mark.skipif(os.environ.get(OPT_IN) != "1",
                       reason=f"opt-in ({OPT_IN}=1): the build compiles Horovod, ~8 minutes on 2 cores"),
    pytest.mark.timeout(3000),
]

# What the user's image is here: Debian's Python with a venv first on PATH that holds TensorFlow 2.21 (PIP_CERT: the
# CA bundle pip is given in the kit's own images).
_USER_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv \\
      ca-certificates >/dev/null \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3 -m venv /opt/tf && /opt/tf/bin/pip install -q --no-cache-dir tensorflow==2.21.0
ENV PATH=/opt/tf/bin:$PATH
"""

_ALLREDUCE = ("import smddp_compat.tensorflow as sdp, tensorflow as tf; sdp.init(); "
              "print('SUM', int(sdp.allreduce(tf.constant(sdp.rank() + 1), op=sdp.Sum)), flush=True)")


def _build(engine: Engine, context: Path, dockerfile: Path, tag: str, base: str) -> None:
    # The kit's image build does the same: the classic builder (no buildx here), the host's network (the registries).
    code, output = capture([engine.docker, "build", "--network", "host", "-q", "-f", str(dockerfile),
                            "--build-arg", f"BASE_IMAGE={base}", "-t", tag, str(context)],
                           timeout=2400, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert code == 0, f"docker build of {dockerfile.name} failed:\n{output[-6000:]}"


def test_the_recipe_builds_horovod_on_a_tensorflow_image_and_a_job_runs(docker_engine: Engine,
                                                                        tmp_path: Path) -> None:
    base = ensure_base_image(docker_engine, host_base_recipe())
    user_context = tmp_path / "user"
    user_context.mkdir()
    (user_context / "Dockerfile").write_text(_USER_DOCKERFILE)
    _build(docker_engine, user_context, user_context / "Dockerfile", USER_IMAGE, base)

    recipe_context, source = tmp_path / "recipe", tmp_path / "source"  # built from a copy, as in test_packaging.py
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", "smddp_local_output", "tests"))
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(recipe_context), str(source)], capture_output=True, text=True, timeout=600)
    assert wheel.returncode == 0, wheel.stderr[-3000:]
    _build(docker_engine, recipe_context, RECIPE, RESULT_IMAGE, USER_IMAGE)

    # --hostname localhost: Gloo resolves the host's own name, and a container without a network has no entry for
    # its generated one
    code, output = capture([docker_engine.docker, "run", "--rm", "--network", "none", "--hostname", "localhost",
                            RESULT_IMAGE,
                            "smddprun", "-np", "2", "python3", "-c", _ALLREDUCE], timeout=600)
    assert code == 0, output[-4000:]
    assert output.count("SUM 3") == 2, output[-4000:]
    code, output = capture([docker_engine.docker, "run", "--rm", RESULT_IMAGE, "python3", "-c",
                            "from importlib.metadata import version; print(version('tensorflow'))"], timeout=300)
    assert output.splitlines()[-1] == "2.21.0", output  # the image's TensorFlow, unchanged by the kit
