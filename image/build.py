"""The kit's training images: build context, content digest, ``docker build``.

Two flavours, each with its own repository (a build untags the older tags of its own repository only): CPU
(``smddp-compat``, ``image/Dockerfile``) and GPU (``smddp-compat-gpu``, ``image/Dockerfile.gpu``, ``smddp image
--gpu``), labelled ``org.smddp-compat.cuda=12`` (the CPU image ``=none``; :mod:`smddp_compat.image.cuda`).

The context is assembled in a temporary folder from the kit's checkout:

* ``Dockerfile`` from this folder (``Dockerfile.gpu`` for the GPU flavour);
* ``stack/``: ``setup.sh``, ``constraints.txt`` (and ``constraints-gpu.txt`` for the GPU flavour) and a
  ``pyproject.toml`` holding only the project's name, version and dependency lists (no packages): what the set-up
  needs to install the whole stack, but none of the kit's code or other settings, so that the heavy layer survives
  every change but a dependency's;
* ``stack/.wheels/<key>/``: the host's Horovod wheel, when it fits the image (`host_horovod_wheel`), which spares
  the build (~3 minutes for the CPU flavour, ~7 for the GPU one);
* ``kit/``: ``pyproject.toml``, ``README.md``, ``constraints.txt`` and the packages pyproject installs.

The tag is ``<repository>:<digest>``, the digest covering every file of the context (path, mode, bytes) and the base
image: an unchanged kit reuses its image, any change gives a new one (and Docker's layer cache keeps the rebuild to
the layers that changed).
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import Engine
from smddp_compat.image.errors import ImageBuildError
from smddp_compat.image.rootfs import BaseImageRecipe, ensure_base_image, host_codename, image_exists

__all__ = [
    "IMAGE_REPOSITORY", "LATEST_TAG", "GPU_IMAGE_REPOSITORY", "GPU_LATEST_TAG", "repository", "CUDA_LABEL", "Flavor",
    "ImageBuild", "BUILD_LOCK", "one_build_at_a_time", "kit_root", "ensure_image", "assemble_context", "context_digest",
    "checkout_context",
]

IMAGE_REPOSITORY = "smddp-compat"
LATEST_TAG = f"{IMAGE_REPOSITORY}:latest"
GPU_IMAGE_REPOSITORY = "smddp-compat-gpu"
GPU_LATEST_TAG = f"{GPU_IMAGE_REPOSITORY}:latest"
# The image label saying which CUDA the image's TensorFlow and Horovod were built for ("12"), or "none".
CUDA_LABEL = "org.smddp-compat.cuda"
Flavor = Literal["cpu", "gpu"]
_BUILD_SECONDS = 3600.0
_GPU_BUILD_SECONDS = 7200.0
# The image's Python, per Debian release (what python3-venv brings): the wheel cache key's "py" part.
_DEBIAN_PYTHON = {"bookworm": "311"}
_SKIPPED = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", "*.egg-info")
_DOCKERFILES: dict[str, str] = {"cpu": "image/Dockerfile", "gpu": "image/Dockerfile.gpu"}
_REPOSITORIES: dict[str, str] = {"cpu": IMAGE_REPOSITORY, "gpu": GPU_IMAGE_REPOSITORY}
# setup.sh's Horovod build (commands/horovod_install.py runs it too), in stack/ at its place in the checkout.
BUILD_SCRIPT = "commands/install_horovod.sh"
# What each flavour's stack/ holds besides setup.sh, the build script and the generated pyproject.toml.
_STACK_FILES: dict[str, tuple[str, ...]] = {"cpu": ("constraints.txt",), "gpu": ("constraints.txt", "constraints-gpu.txt")}
# setup.sh's wheel-cache key part for the engines each flavour builds Horovod with.
_ENGINES: dict[str, str] = {"cpu": "gloo-mpi", "gpu": "gloo-mpi-nccl"}
_CUDA: dict[str, str] = {"cpu": "none", "gpu": "12"}
# The first line of the stack's generated pyproject.toml. Its bytes are part of the stack layer's cache key (stack/ is
# copied before setup.sh runs): any change rebuilds the whole stack (~6 minutes), so it keeps the words it was first
# built with, which name this module's earlier place. Change it together with a dependency, which rebuilds anyway.
_STACK_HEADER = "# Generated from the kit's pyproject.toml: dependencies only (see local_mode/docker/_image.py)."


@dataclass(frozen=True)
class ImageBuild:
    """The outcome of :func:`ensure_image`.

    Attributes:
        built: False when the image was already there.
        seconds: Time spent (checks, context and build).
        horovod_wheel: The host wheel copied into the build, or None (Horovod built inside, or not built).
        flavor: ``"cpu"`` or ``"gpu"``.
    """

    tag: str
    built: bool
    seconds: float
    horovod_wheel: Path | None
    flavor: Flavor = "cpu"


def repository(flavor: Flavor) -> str:
    """The image repository of a flavour: ``smddp-compat`` or ``smddp-compat-gpu``."""
    return _REPOSITORIES[_check_flavor(flavor)]


def _check_flavor(flavor: str) -> Flavor:
    if flavor not in _DOCKERFILES:
        raise ValueError(f"image flavor {flavor!r} is not one of {sorted(_DOCKERFILES)}")
    return flavor  # type: ignore[return-value]


def kit_root() -> Path:
    """The kit's checkout (the folder holding ``setup.sh``, ``pyproject.toml`` and ``image/Dockerfile``).

    Raises:
        ImageBuildError: The kit is installed without its sources (e.g. from a wheel).
    """
    root = Path(__file__).resolve().parents[1]
    for needed in ("setup.sh", "pyproject.toml", "constraints.txt", *_DOCKERFILES.values()):
        if not (root / needed).is_file():
            raise ImageBuildError(
                "build context",
                f"{root / needed} is missing: building the image needs the kit's source checkout. Run from a "
                "checkout (pip install -e), or pass --image with an image that has TensorFlow and Horovod",
            )
    return root


def _setup_variable(setup_sh: Path, name: str) -> str | None:
    match = re.search(rf"^{name}=([^\s#]+)", setup_sh.read_text(encoding="utf-8"), re.MULTILINE)
    return match.group(1).strip("\"'") if match else None


def host_horovod_wheel(root: Path, suite: str, flavor: Flavor = "cpu") -> tuple[str, Path] | None:
    """The host's cached Horovod wheel as ``(cache key, wheel path)`` when the image of Debian release `suite` and
    `flavor` can use it, else None. setup.sh's build script keys its wheel cache by Horovod, TensorFlow, engines and Python
    (``horovod-0.28.1-tf-2.21.0-gloo-mpi-py311``). The CPU image uses the CPU engines (gloo-mpi), the GPU image
    gloo-mpi-nccl (a wheel only a host that ran ``SMDDP_GPU=1 bash setup.sh`` has); both use Debian's Python and link
    against Debian's libraries, so the host's wheel fits only when the host runs the same Debian release.
    """
    python = _DEBIAN_PYTHON.get(suite)
    horovod = _setup_variable(root / BUILD_SCRIPT, "HOROVOD_VERSION")
    tensorflow = _setup_variable(root / "setup.sh", "TF_VERSION")
    if python is None or horovod is None or tensorflow is None or host_codename() != suite:
        return None
    cache = Path(os.environ.get("SMDDP_WHEEL_CACHE", Path.home() / ".cache/smddp-compat/wheels"))
    key = f"horovod-{horovod}-tf-{tensorflow}-{_ENGINES[flavor]}-py{python}"
    wheels = sorted((cache / key).glob(f"horovod-{horovod}-cp{python}-*.whl"))
    return (key, wheels[0]) if len(wheels) == 1 else None


def _package_dirs(root: Path) -> list[Path]:
    """The checkout's folders that pyproject's ``[tool.setuptools] package-dir`` installs (under ``smddp_compat``)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    folders = config.get("tool", {}).get("setuptools", {}).get("package-dir", {}).values()
    return sorted({root / folder for folder in folders if (root / folder).is_dir()})


def stack_pyproject(root: Path) -> str:
    """The project's ``pyproject.toml`` reduced to what installing its dependencies needs (and no package)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    build = config.get("build-system", {})
    project = config.get("project", {})
    lines = [_STACK_HEADER, ""]
    lines += ["[build-system]"] + [f"{key} = {json.dumps(build[key])}" for key in sorted(build)] + [""]
    lines += ["[project]"]
    for key in ("name", "version", "requires-python", "dependencies"):
        if key in project:
            lines.append(f"{key} = {json.dumps(project[key])}")
    extras = project.get("optional-dependencies", {})
    if extras:
        lines += ["", "[project.optional-dependencies]"]
        lines += [f"{json.dumps(name)} = {json.dumps(extras[name])}" for name in sorted(extras)]
    lines += ["", "[tool.setuptools]", "packages = []", ""]
    return "\n".join(lines)


#: Output folders inside the kit's packages, never part of the image (the bench's and the matrix's default output:
#: a run writing there during a build or a test must not change the image's digest).
_OUTPUTS = {"bench": {"results"}}


def _ignore(directory: str, names: list[str]) -> set[str]:
    skipped = {name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in _SKIPPED)}
    return skipped | (_OUTPUTS.get(Path(directory).name, set()) & set(names))


def assemble_context(
    root: Path, destination: Path, *, wheel: tuple[str, Path] | None, flavor: Flavor = "cpu"
) -> None:
    """Writes the build context of the kit's checkout ``root`` into ``destination`` (an empty folder), with the host
    Horovod ``wheel`` (cache key, path) when given; ``flavor``: ``"cpu"`` (``image/Dockerfile``) or ``"gpu"``
    (``image/Dockerfile.gpu``)."""
    flavor = _check_flavor(flavor)
    shutil.copy2(root / _DOCKERFILES[flavor], destination / "Dockerfile")
    stack = destination / "stack"
    stack.mkdir()
    for name in ("setup.sh", BUILD_SCRIPT, *_STACK_FILES[flavor]):
        (stack / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, stack / name)
    (stack / "pyproject.toml").write_text(stack_pyproject(root), encoding="utf-8")
    if wheel is not None:
        key, path = wheel
        (stack / ".wheels" / key).mkdir(parents=True)
        shutil.copy2(path, stack / ".wheels" / key / path.name)
    kit = destination / "kit"
    kit.mkdir()
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        if (root / name).is_file():
            shutil.copy2(root / name, kit / name)
    for package in _package_dirs(root):
        shutil.copytree(package, kit / package.name, ignore=_ignore, symlinks=False)


def context_digest(context: Path, base_tag: str) -> str:
    """The hex SHA-256 over ``base_tag`` (the base image's tag, itself a digest of its recipe) and every file of the
    assembled ``context`` (relative path, executable bit, bytes)."""
    digest = hashlib.sha256(f"base={base_tag}\n".encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        relative = path.relative_to(context).as_posix()
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        digest.update(f"{relative}\0{int(executable)}\0".encode())
        with path.open("rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


class _Progress:
    """A stream that stamps each ``docker build`` step with the time since the build began.

    With ``quiet`` only those step lines (``[+  93 s] Step 4/12 : RUN ...``) and, inside a step, what ``setup.sh`` says
    it is doing (``[+ 140 s]   ==> [setup] build Horovod 0.28.1 ...``: which part is compiling, and each part's time)
    are written: what ``smddp image --log`` shows while the whole output goes to the log file.
    """

    def __init__(self, target: IO[str], *, quiet: bool, start: float) -> None:
        self._target = target
        self._quiet = quiet
        self._start = start

    def write(self, text: str) -> int:
        step = text.lstrip().startswith("Step ")
        setup_line = "==> [setup]" in text
        if step or setup_line:
            text = f"[+{time.monotonic() - self._start:5.0f} s] {'' if step else '  '}{text.lstrip()}"
            if len(text) > 160:
                text = text[:157].rstrip("\n") + "...\n"
        if step or setup_line or not self._quiet:
            self._target.write(text)
        return len(text)

    def flush(self) -> None:
        self._target.flush()


@contextmanager
def checkout_context(base_tag: str, wheel: tuple[str, Path] | None, flavor: Flavor) -> Iterator[tuple[Path, str, str]]:
    """This checkout's build context for `flavor` on the base `base_tag`, in a temporary folder removed on exit.

    Yields:
        The context folder, the image's tag (``repository:<first 16 of the digest>``) and the full digest (its
        ``org.smddp-compat.digest`` label): what ``smddp image`` builds, and what ``smddp doctor`` compares.
    """
    with tempfile.TemporaryDirectory(prefix="smddp-image-context-") as context_dir:
        context = Path(context_dir)
        assemble_context(kit_root(), context, wheel=wheel, flavor=flavor)
        digest = context_digest(context, base_tag)
        yield context, f"{repository(flavor)}:{digest[:16]}", digest


def ensure_image(
    engine: Engine,
    *,
    base: BaseImageRecipe,
    reuse_host_wheel: bool = True,
    force: bool = False,
    log_path: str | None = None,
    stream: IO[str] | None = None,
    gpu: bool = False,
    progress: IO[str] | None = None,
) -> ImageBuild:
    """Returns the kit's image (its tag and whether it was built), building it (and its base) when the engine does not
    hold it yet; `force` builds even then (Docker's layer cache still applies).

    Args:
        reuse_host_wheel: Copy the host's Horovod wheel in when it fits (else Horovod is built in the image).
        log_path: File the build output is appended to.
        stream: Where build output is printed (its ``Step`` lines stamped with the elapsed time), or None.
        gpu: Build the GPU image (``image/Dockerfile.gpu``, repository ``smddp-compat-gpu``) instead of the CPU one.
        progress: Where only the stamped ``Step`` lines are printed (when ``stream`` is None), or None.

    Raises:
        ImageBuildError: The checkout is incomplete or a build step failed.
    """
    start = time.monotonic()
    flavor: Flavor = "gpu" if gpu else "cpu"
    limit = _GPU_BUILD_SECONDS if gpu else _BUILD_SECONDS
    with one_build_at_a_time(limit, stream if stream is not None else progress):
        return _ensure_image(engine, base, reuse_host_wheel, force, log_path, stream, flavor, progress, start, limit)


BUILD_LOCK = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "smddp-compat" / "image-build.lock"
"""The file whose lock one build of the kit's images holds on this machine (beside the Horovod wheel cache)."""


@contextmanager
def one_build_at_a_time(limit: float, out: IO[str] | None = None) -> Iterator[None]:
    """Holds this machine's image-build lock (:data:`BUILD_LOCK`): a second ``smddp image``, a job that builds on first
    use or a test started meanwhile waits for the first build to end (at most ``limit`` seconds), then finds the
    image built instead of building it again beside it.

    Raises:
        ImageBuildError: The lock was not free within ``limit`` seconds.
    """
    BUILD_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(BUILD_LOCK, "a", encoding="utf-8") as lock:
        deadline = time.monotonic() + limit
        said = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ImageBuildError(
                        "waiting for another build", f"{BUILD_LOCK} was still locked after {limit:.0f} s: another "
                        "build of the kit's image is running. Fix: let it finish (or stop it), then run again", None,
                    ) from None
                if not said and out is not None:
                    out.write(f"==> another build of the kit's image is running: waiting for it (lock {BUILD_LOCK})\n")
                    out.flush()
                    said = True
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _ensure_image(engine: Engine, base: BaseImageRecipe, reuse_host_wheel: bool, force: bool, log_path: str | None,
                  stream: IO[str] | None, flavor: Flavor, progress: IO[str] | None, start: float,
                  limit: float) -> ImageBuild:
    name = _REPOSITORIES[flavor]
    root = kit_root()
    base_tag = ensure_base_image(engine, base, log_path=log_path, stream=stream)
    wheel = host_horovod_wheel(root, base.suite, flavor) if reuse_host_wheel else None
    with checkout_context(base_tag, wheel, flavor) as (context, tag, digest):
        if not force and image_exists(engine, tag):
            return ImageBuild(tag, False, time.monotonic() - start, wheel[1] if wheel else None, flavor)
        out = stream if stream is not None else progress
        if out is not None:
            minutes = "about 3 minutes" if flavor == "cpu" else "about 7 minutes, CUDA kernels for 6 GPU generations"
            how = f"host wheel {wheel[1].name}" if wheel else f"Horovod built inside ({minutes})"
            out.write(f"==> building {tag} on {base_tag} ({how})\n")
            out.flush()
        shown = None
        if stream is not None:
            shown = _Progress(stream, quiet=False, start=time.monotonic())
        elif progress is not None:
            shown = _Progress(progress, quiet=True, start=time.monotonic())
        env = dict(os.environ, DOCKER_BUILDKIT="0")  # the classic builder: no buildx plugin needed
        argv = [
            engine.docker, "build", "--network", "host",
            "--build-arg", f"BASE_IMAGE={base_tag}",
            "--label", f"org.smddp-compat.digest={digest}",
            "--label", f"{CUDA_LABEL}={_CUDA[flavor]}",
            "--tag", tag, str(context),
        ]  # fmt: skip
        result = run_command(argv, timeout=limit, log_path=log_path, stream=shown, prefix="    ", env=env)
        if not result.ok:
            raise ImageBuildError("docker build", result.describe(), log_path)
    latest = f"{name}:latest"
    tagged = run_command([engine.docker, "tag", tag, latest], timeout=60, log_path=log_path)
    if not tagged.ok:
        raise ImageBuildError("docker tag", tagged.describe(), log_path)
    _remove_older_images(engine, name, keep=tag, log_path=log_path)
    return ImageBuild(tag, True, time.monotonic() - start, wheel[1] if wheel else None, flavor)


def _remove_older_images(engine: Engine, name: str, *, keep: str, log_path: str | None) -> None:
    """Untags the kit's earlier images of repository ``name`` (each kit change makes one), so that their layers can go.

    An image a container still uses is left alone (``docker rmi`` refuses it); failures are only logged.
    """
    code, listing = capture([engine.docker, "images", name, "--format", "{{.Repository}}:{{.Tag}}"], timeout=60)
    if code != 0:
        return
    latest = f"{name}:latest"
    older = [tag for tag in listing.split() if tag not in (keep, latest) and not tag.endswith(":<none>")]
    if older:
        run_command([engine.docker, "rmi", *older], timeout=300, log_path=log_path)
