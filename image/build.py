"""The kit's training image: build context, content digest, ``docker build``.

The context is assembled in a temporary folder from the kit's checkout:

* ``Dockerfile`` from this folder (``image/`` of the checkout);
* ``stack/``: ``setup.sh``, ``constraints.txt`` and a ``pyproject.toml`` holding only the project's name, version
  and dependency lists (no packages): what the set-up needs to install the whole stack, but
  none of the kit's code or other settings, so that the heavy layer survives every change but a dependency's;
* ``stack/.wheels/<key>/``: the host's Horovod wheel from setup.sh's wheel cache, when it was built for the image's
  Debian release and Python (same glibc, libstdc++, OpenMPI and CPython ABI), which spares the ~3-minute build;
* ``kit/``: ``pyproject.toml``, ``README.md``, ``constraints.txt`` and the packages pyproject installs.

The tag is ``smddp-compat:<digest>``, the digest covering every file of the context (path, mode, bytes) and the base
image: an unchanged kit reuses its image, any change gives a new one (and Docker's layer cache keeps the rebuild to
the layers that changed).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import Engine
from smddp_compat.image.errors import ImageBuildError
from smddp_compat.image.rootfs import BaseImageRecipe, ensure_base_image, host_codename, image_exists

__all__ = ["IMAGE_REPOSITORY", "ImageBuild", "kit_root", "ensure_image", "assemble_context", "context_digest"]

IMAGE_REPOSITORY = "smddp-compat"
LATEST_TAG = f"{IMAGE_REPOSITORY}:latest"
_BUILD_SECONDS = 3600.0
# The image's Python, per Debian release (what python3-venv brings): the wheel cache key's "py" part.
_DEBIAN_PYTHON = {"bookworm": "311"}
_SKIPPED = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", "*.egg-info")
_DOCKERFILE = "image/Dockerfile"
# The first line of the stack's generated pyproject.toml. Its bytes are part of the stack layer's cache key (stack/ is
# copied before setup.sh runs): any change rebuilds the whole stack (~6 minutes), so it keeps the words it was first
# built with, which name this module's earlier place. Change it together with a dependency, which rebuilds anyway.
_STACK_HEADER = "# Generated from the kit's pyproject.toml: dependencies only (see local_mode/docker/_image.py)."


@dataclass(frozen=True)
class ImageBuild:
    """The outcome of :func:`ensure_image`.

    Attributes:
        tag: The image's tag.
        built: False when the image was already there.
        seconds: Time spent (checks, context and build).
        horovod_wheel: The host wheel copied into the build, or None (Horovod built inside, or not built).
    """

    tag: str
    built: bool
    seconds: float
    horovod_wheel: Path | None


def kit_root() -> Path:
    """The kit's checkout (the folder holding ``setup.sh``, ``pyproject.toml`` and ``image/Dockerfile``).

    Raises:
        ImageBuildError: The kit is installed without its sources (e.g. from a wheel).
    """
    root = Path(__file__).resolve().parents[1]
    for needed in ("setup.sh", "pyproject.toml", "constraints.txt", _DOCKERFILE):
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


def host_horovod_wheel(root: Path, suite: str) -> tuple[str, Path] | None:
    """The host's cached Horovod wheel when the image can use it, as ``(cache key, wheel path)``.

    setup.sh keys its wheel cache by Horovod, TensorFlow, engines and Python (``horovod-0.28.1-tf-2.21.0-gloo-mpi-
    py311``). The image uses the CPU engines (gloo-mpi) and Debian's Python, and links against Debian's libraries, so
    the host's wheel fits only when the host runs the same Debian release.

    Args:
        root: The kit's checkout.
        suite: The image's Debian release.

    Returns:
        The key and the wheel, or None.
    """
    python = _DEBIAN_PYTHON.get(suite)
    horovod = _setup_variable(root / "setup.sh", "HOROVOD_VERSION")
    tensorflow = _setup_variable(root / "setup.sh", "TF_VERSION")
    if python is None or horovod is None or tensorflow is None or host_codename() != suite:
        return None
    cache = Path(os.environ.get("SMDDP_WHEEL_CACHE", Path.home() / ".cache/smddp-compat/wheels"))
    key = f"horovod-{horovod}-tf-{tensorflow}-gloo-mpi-py{python}"
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


def _ignore(_directory: str, names: list[str]) -> set[str]:
    return {name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in _SKIPPED)}


def assemble_context(root: Path, destination: Path, *, wheel: tuple[str, Path] | None) -> None:
    """Writes the build context into ``destination`` (an empty folder).

    Args:
        root: The kit's checkout.
        destination: Where the context goes.
        wheel: The host Horovod wheel to include (cache key, path), or None.
    """
    shutil.copy2(root / _DOCKERFILE, destination / "Dockerfile")
    stack = destination / "stack"
    stack.mkdir()
    for name in ("setup.sh", "constraints.txt"):
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
    """SHA-256 over the base image's tag and every file of the context (relative path, executable bit, bytes).

    Args:
        context: The assembled context.
        base_tag: The base image's tag (itself a digest of its recipe).

    Returns:
        The hex digest.
    """
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


def ensure_image(
    engine: Engine,
    *,
    base: BaseImageRecipe,
    reuse_host_wheel: bool = True,
    force: bool = False,
    log_path: str | None = None,
    stream: IO[str] | None = None,
) -> ImageBuild:
    """Returns the kit's image, building it (and its base) when the engine does not hold it yet.

    Args:
        engine: The Docker engine.
        base: The base image's recipe.
        reuse_host_wheel: Copy the host's Horovod wheel in when it fits (else Horovod is built in the image).
        force: Build even if an image with the same digest exists (Docker's layer cache still applies).
        log_path: File the build output is appended to.
        stream: Where build output is printed, or None.

    Returns:
        The tag and whether it was built.

    Raises:
        ImageBuildError: The checkout is incomplete or a build step failed.
    """
    start = time.monotonic()
    root = kit_root()
    base_tag = ensure_base_image(engine, base, log_path=log_path, stream=stream)
    wheel = host_horovod_wheel(root, base.suite) if reuse_host_wheel else None
    with tempfile.TemporaryDirectory(prefix="smddp-image-context-") as context_dir:
        context = Path(context_dir)
        assemble_context(root, context, wheel=wheel)
        digest = context_digest(context, base_tag)
        tag = f"{IMAGE_REPOSITORY}:{digest[:16]}"
        if not force and image_exists(engine, tag):
            return ImageBuild(tag, False, time.monotonic() - start, wheel[1] if wheel else None)
        if stream is not None:
            how = f"host wheel {wheel[1].name}" if wheel else "Horovod built inside (about 3 minutes)"
            stream.write(f"==> building {tag} on {base_tag} ({how})\n")
            stream.flush()
        env = dict(os.environ, DOCKER_BUILDKIT="0")  # the classic builder: no buildx plugin needed
        argv = [
            engine.docker, "build", "--network", "host",
            "--build-arg", f"BASE_IMAGE={base_tag}",
            "--label", f"org.smddp-compat.digest={digest}",
            "--tag", tag, str(context),
        ]  # fmt: skip
        result = run_command(argv, timeout=_BUILD_SECONDS, log_path=log_path, stream=stream, prefix="    ", env=env)
        if not result.ok:
            raise ImageBuildError("docker build", result.describe(), log_path)
    tagged = run_command([engine.docker, "tag", tag, LATEST_TAG], timeout=60, log_path=log_path)
    if not tagged.ok:
        raise ImageBuildError("docker tag", tagged.describe(), log_path)
    _remove_older_images(engine, keep=tag, log_path=log_path)
    return ImageBuild(tag, True, time.monotonic() - start, wheel[1] if wheel else None)


def _remove_older_images(engine: Engine, *, keep: str, log_path: str | None) -> None:
    """Untags the kit's earlier images (each kit change makes one), so that their layers can go.

    An image a container still uses is left alone (``docker rmi`` refuses it); failures are only logged.
    """
    code, listing = capture(
        [engine.docker, "images", IMAGE_REPOSITORY, "--format", "{{.Repository}}:{{.Tag}}"], timeout=60
    )
    if code != 0:
        return
    older = [name for name in listing.split() if name not in (keep, LATEST_TAG) and not name.endswith(":<none>")]
    if older:
        run_command([engine.docker, "rmi", *older], timeout=300, log_path=log_path)
