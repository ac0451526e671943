"""The GPU image's recipe, without Docker (issue 24): its build context, its pins, its label, the build's progress lines.

The image itself is built and checked by tests/docker/test_gpu_image.py (opt-in: ~30 minutes on 2 cores).
"""

from __future__ import annotations

import io
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from smddp_compat.image import CUDA_LABEL, GPU_IMAGE_REPOSITORY, IMAGE_REPOSITORY
from smddp_compat.image import build

REPO = Path(__file__).resolve().parents[1]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def test_each_flavour_has_its_own_repository_and_dockerfile(tmp_path: Path) -> None:
    assert build.repository("cpu") == IMAGE_REPOSITORY == "smddp-compat"
    assert build.repository("gpu") == GPU_IMAGE_REPOSITORY == "smddp-compat-gpu"
    with pytest.raises(ValueError, match="'tpu' is not one of"):
        build.repository("tpu")  # type: ignore[arg-type]
    contexts = {}
    for flavor in ("cpu", "gpu"):
        context = tmp_path / flavor
        context.mkdir()
        build.assemble_context(REPO, context, wheel=None, flavor=flavor)
        contexts[flavor] = context
    dockerfile = {flavor: (c / "Dockerfile").read_text(encoding="utf-8") for flavor, c in contexts.items()}
    assert dockerfile["cpu"] == (REPO / "image/Dockerfile").read_text(encoding="utf-8")
    assert dockerfile["gpu"] == (REPO / "image/Dockerfile.gpu").read_text(encoding="utf-8")
    assert not (contexts["cpu"] / "stack/constraints-gpu.txt").exists()  # a GPU pin change keeps the CPU stack
    assert (contexts["gpu"] / "stack/constraints-gpu.txt").read_bytes() == (REPO / "constraints-gpu.txt").read_bytes()
    digests = {flavor: build.context_digest(c, "base:1") for flavor, c in contexts.items()}
    assert digests["cpu"] != digests["gpu"]


def test_the_gpu_pins_cover_tensorflows_cuda_extra() -> None:
    """Every nvidia-*-cu12 requirement of tensorflow[and-cuda] is pinned, to a version TensorFlow accepts."""
    try:
        metadata = distribution("tensorflow").metadata
    except PackageNotFoundError:  # pragma: no cover - the kit's venv has TensorFlow
        pytest.skip("TensorFlow is not installed")
    wanted = [Requirement(r) for r in metadata.get_all("Requires-Dist") or [] if 'extra == "and-cuda"' in r]
    assert len(wanted) >= 10, wanted
    pins = _pins(REPO / "constraints-gpu.txt")
    for requirement in wanted:
        name = requirement.name.lower()
        assert name in pins, f"{name} is not pinned in constraints-gpu.txt"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement.specifier}"
    assert not set(pins) & set(_pins(REPO / "constraints.txt")), "a package is pinned twice"


def test_setup_sh_gpu_branch_matches_the_image() -> None:
    setup = (REPO / "setup.sh").read_text(encoding="utf-8")
    horovod_build = (REPO / build.BUILD_SCRIPT).read_text(encoding="utf-8")  # setup.sh runs it
    gpu = (REPO / "image/Dockerfile.gpu").read_text(encoding="utf-8")
    assert 'CONSTRAINTS+=(-c "$ROOT/constraints-gpu.txt")' in setup
    assert 'bash "$ROOT/commands/install_horovod.sh" "$PY" "${CONSTRAINTS[@]}"' in setup
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in horovod_build and "patchelf --set-rpath" in horovod_build
    assert "needs CUDA 12's nvcc on PATH" in horovod_build  # refused by name without a compiler
    assert gpu.count("SMDDP_GPU=1 bash /opt/smddp-compat/setup.sh") == 2  # both stages run setup.sh's GPU branch
    assert re.search(r"nvidia-cuda-toolkit=12\.\d", gpu), "the CUDA compiler's version is pinned"
    assert f"LABEL {CUDA_LABEL}=12" in gpu


def test_build_steps_are_stamped_with_the_elapsed_time() -> None:
    out = io.StringIO()
    verbose = build._Progress(out, quiet=False, start=0.0)
    verbose.write("    Step 7/19 : RUN bash setup.sh\n")
    verbose.write("    installing\n")
    lines = out.getvalue().splitlines()
    assert re.fullmatch(r"\[\+ *\d+ s\] Step 7/19 : RUN bash setup.sh", lines[0]), lines
    assert lines[1] == "    installing"
    quiet_out = io.StringIO()
    quiet = build._Progress(quiet_out, quiet=True, start=0.0)
    quiet.write("    installing\n")
    quiet.write("    Step 8/19 : COPY kit/ /tmp/\n")
    quiet.write("==> [setup] build Horovod 0.28.1 from source (Gloo, MPI)\n")  # what is compiling, inside a step
    quiet.write("==> [setup] build Horovod 0.28.1 from source (Gloo, MPI) ... done in 376 s\n")
    lines = quiet_out.getvalue().splitlines()
    assert len(lines) == 3 and "Step 8/19" in lines[0], lines
    assert re.fullmatch(r"\[\+ *\d+ s\]   ==> \[setup\] build Horovod 0\.28\.1 from source \(Gloo, MPI\)", lines[1]), lines
    assert lines[2].endswith("done in 376 s")


def test_a_gpu_hosts_nccl_wheel_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU host's cached wheel (key ...-gloo-mpi-nccl-py311) goes into the GPU context, where the stage looks for it;
    the CPU wheel never does."""
    monkeypatch.setattr(build, "host_codename", lambda: "bookworm")
    monkeypatch.setenv("SMDDP_WHEEL_CACHE", str(tmp_path / "cache"))
    nccl = tmp_path / "cache/horovod-0.28.1-tf-2.21.0-gloo-mpi-nccl-py311/horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    nccl.parent.mkdir(parents=True)
    nccl.write_bytes(b"wheel")
    assert build.host_horovod_wheel(REPO, "bookworm", "gpu") == (nccl.parent.name, nccl)
    assert build.host_horovod_wheel(REPO, "bookworm", "cpu") is None
    context = tmp_path / "context"
    context.mkdir()
    build.assemble_context(REPO, context, wheel=(nccl.parent.name, nccl), flavor="gpu")
    assert (context / "stack/.wheels" / nccl.parent.name / nccl.name).read_bytes() == b"wheel"
    gpu = (REPO / "image/Dockerfile.gpu").read_text(encoding="utf-8")
    assert "COPY stack/ /opt/smddp-compat/\nRUN SMDDP_WHEEL_CACHE=/opt/smddp-compat/.wheels SMDDP_GPU=1" in gpu


def test_both_images_and_the_venv_install_tensorboard_pinned_with_tensorflow(tmp_path: Path) -> None:
    """TF 2.21 no longer installs tensorboard, which tf.keras.callbacks.TensorBoard needs: the kit's dependencies
    (setup.sh's venv, and each image's stack, which setup.sh installs) pin it at TensorFlow's version, and
    constraints.txt pins it and every requirement it brings."""
    import tomllib

    pins = _pins(REPO / "constraints.txt")
    assert pins["tensorboard"] == pins["tensorflow"] == "2.21.0"
    for flavor in ("cpu", "gpu"):
        context = tmp_path / flavor
        context.mkdir()
        build.assemble_context(REPO, context, wheel=None, flavor=flavor)
        dependencies = tomllib.loads((context / "stack/pyproject.toml").read_text(encoding="utf-8"))["project"][
            "dependencies"]
        assert "tensorboard==2.21.0" in dependencies and "tensorflow==2.21.0" in dependencies, dependencies
        assert _pins(context / "stack/constraints.txt")["tensorboard"] == "2.21.0"
    for requirement in (Requirement(r) for r in distribution("tensorboard").requires or []):
        if requirement.marker is None or requirement.marker.evaluate():
            name = requirement.name.lower()
            assert name in pins or name == "setuptools", f"{name} (a tensorboard requirement) is not pinned"
            assert name == "setuptools" or requirement.specifier.contains(pins[name]), (name, pins.get(name))
    assert distribution("tensorboard").version == pins["tensorboard"]  # this venv, by setup.sh
