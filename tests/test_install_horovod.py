"""``smddp install-horovod``: Horovod into an environment of the user's own that already has TensorFlow (issue 32).

Each test runs the real command on a real environment made for it (a fresh venv of this interpreter's Python):
- the three refusals, before anything is written: no TensorFlow, an untested TensorFlow, missing build tools;
- a fresh venv with TensorFlow 2.21 (pip's cache makes it quick): the command installs the wheel setup.sh built
  (the cache is keyed by Horovod, TensorFlow, engines and Python), the venv's own ``horovodrun`` runs a 2-rank Gloo
  allreduce with it, and a second run finds it installed;
- opt-in (``SMDDP_HOROVOD_BUILD_TESTS=1``, ~4 minutes on 2 cores): the same venv with an empty wheel cache, so the
  command really compiles Horovod against the venv's TensorFlow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[1]
SMDDP = [sys.executable, "-m", "smddp_compat.commands.cli", "install-horovod"]
BUILD_OPT_IN = "SMDDP_HOROVOD_BUILD_TESTS"
STAMP = ".smddp-horovod-build"
HOROVOD_CACHE = Path(os.environ.get("SMDDP_WHEEL_CACHE", Path.home() / ".cache/smddp-compat/wheels"))


def _bare_venv(path: Path, tensorflow: str | None = None) -> Path:
    """A venv without pip; ``tensorflow``: a version its metadata names (a distribution record, no code)."""
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    if tensorflow:
        site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        record = Path(site) / f"tensorflow-{tensorflow}.dist-info"
        record.mkdir()
        (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {tensorflow}\n")
    return python


def _install(python: Path, *, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*SMDDP, "--python", str(python), "--constraint", str(REPO / "constraints.txt")],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def _path_without_build_tools(tmp_path: Path) -> str:
    """A PATH holding only what the build script uses before its check (no cmake, no compiler, no mpicxx)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "ls", "cat"):
        (tools / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip())
    return str(tools)


def _refusal(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("!! [install-horovod] "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


def test_an_environment_without_tensorflow_is_refused_in_one_line(tmp_path: Path) -> None:
    python = _bare_venv(tmp_path / "env")
    line = _refusal(_install(python))
    assert f"no TensorFlow in {python}" in line and "pip install tensorflow==2.21.0" in line
    assert not (tmp_path / "env" / STAMP).exists()


def test_an_untested_tensorflow_is_refused_unless_asked_for(tmp_path: Path) -> None:
    python = _bare_venv(tmp_path / "env", tensorflow="2.15.1")
    line = _refusal(_install(python))
    assert "TensorFlow 2.15.1" in line and "tested 2.21.x" in line and "SMDDP_UNTESTED_TENSORFLOW=1" in line
    # asked for: it goes on to the build (here refused next for the tools, which the PATH below lacks)
    env = {**os.environ, "SMDDP_UNTESTED_TENSORFLOW": "1", "PATH": _path_without_build_tools(tmp_path),
           "SMDDP_WHEEL_CACHE": str(tmp_path / "cache")}
    assert "building Horovod needs" in _refusal(_install(python, env=env))


def test_missing_build_tools_are_named_with_their_packages_before_anything_is_written(tmp_path: Path) -> None:
    python = _bare_venv(tmp_path / "env", tensorflow="2.21.0")
    cache = tmp_path / "cache"
    env = {**os.environ, "PATH": _path_without_build_tools(tmp_path), "SMDDP_WHEEL_CACHE": str(cache)}
    line = _refusal(_install(python, env=env))
    for named in ("cmake (cmake)", "a C++ compiler (build-essential)", "mpicxx (libopenmpi-dev)",
                  "apt-get install build-essential cmake", "conda install -c conda-forge"):
        assert named in line, line
    # TensorFlow's headers include highwayhash's and farmhash's (a build without them fails minutes in): looked for
    # before the build; here the system's include folder is an empty one
    empty = tmp_path / "include"
    empty.mkdir()
    env = {**os.environ, "SMDDP_WHEEL_CACHE": str(cache), "SMDDP_SYSTEM_INCLUDE_DIRS": str(empty), "CPATH": "",
           "CPLUS_INCLUDE_PATH": ""}
    line = _refusal(_install(python, env=env))
    assert "cmake (cmake)" not in line and "mpicxx (" not in line, line  # those are on this machine's PATH
    for named in ("highwayhash/arch_specific.h, which TensorFlow's headers include (libhighwayhash-dev)",
                  "farmhash.h, which TensorFlow's headers include (libfarmhash-dev)"):
        assert named in line, line
    assert not cache.exists() and not (tmp_path / "env" / STAMP).exists()


@pytest.fixture(scope="module")
def tensorflow_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv of this Python with TensorFlow 2.21 (and nothing of the kit's): a user's own environment."""
    root = tmp_path_factory.mktemp("user-env")
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "tensorflow==2.21.0",
                    "-c", str(REPO / "constraints.txt")], check=True, timeout=600)
    return python


def _gloo_allreduce(python: Path) -> str:
    program = ("import tensorflow as tf, horovod.tensorflow as hvd; hvd.init(); "
               "print('SUM', int(hvd.allreduce(tf.constant(hvd.rank() + 1), op=hvd.Sum)), flush=True)")
    proc = subprocess.run([str(python.parent / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo",
                           "--start-timeout", "60", str(python), "-c", program],
                          capture_output=True, text=True, timeout=180, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.timeout(900)
def test_a_venv_with_tensorflow_gets_the_cached_build_and_runs_an_allreduce(tensorflow_venv: Path) -> None:
    key = f"horovod-0.28.1-tf-2.21.0-gloo-mpi-py{sys.version_info.major}{sys.version_info.minor}"
    if not list((HOROVOD_CACHE / key).glob("horovod-*.whl")):
        pytest.fail(f"no cached wheel in {HOROVOD_CACHE / key}: `bash setup.sh` builds it (this test reuses it)")
    first = _install(tensorflow_venv, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "reusing the cached wheel" in first.stdout and "loads, with gloo, mpi" in first.stdout
    assert (tensorflow_venv.parent.parent / STAMP).read_text().strip() == key
    assert _gloo_allreduce(tensorflow_venv).count("SUM 3") == 2  # (0+1) + (1+1) on both ranks
    again = _install(tensorflow_venv)
    assert again.returncode == 0 and "already installed" in again.stdout, again.stdout + again.stderr


@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get(BUILD_OPT_IN) != "1",
                    reason=f"opt-in ({BUILD_OPT_IN}=1): compiling Horovod takes ~4 minutes on 2 cores")
def test_an_empty_cache_builds_horovod_against_the_venvs_tensorflow(tensorflow_venv: Path, tmp_path: Path) -> None:
    (tensorflow_venv.parent.parent / STAMP).unlink(missing_ok=True)
    env = {**os.environ, "SMDDP_WHEEL_CACHE": str(tmp_path / "cache"), "SMDDP_GPU": "0"}
    proc = _install(tensorflow_venv, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "building the wheel" in proc.stdout
    assert len(list((tmp_path / "cache").glob("horovod-0.28.1-tf-2.21.0-gloo-mpi-py*/horovod-*.whl"))) == 1
    assert _gloo_allreduce(tensorflow_venv).count("SUM 3") == 2



def test_the_kit_without_horovod_says_which_command_installs_it() -> None:
    # The kit installs without Horovod (pip cannot build it against TensorFlow 2.21): importing a face says the fix.
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['horovod'] = None; "
                           "import smddp_compat.tensorflow"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: Horovod is not installed in this environment"), proc.stderr
    assert "run `smddp install-horovod`" in last
