"""The base image, made here: a Debian root filesystem from ``debootstrap``, ``docker import``-ed.

No container registry can be reached, so no ``FROM debian`` can be pulled. ``debootstrap`` builds a minimal Debian
(``minbase``) from the same Debian mirror the host's apt uses, which the machine can reach. The host's own extra CA
certificates (``/usr/local/share/ca-certificates``) are added, so that pip and apt inside the image build trust what
the host trusts (a TLS-inspecting proxy, a company CA). The image is tagged by a digest of that recipe: the same
recipe on the same machine is built once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import Engine
from smddp_compat.image.errors import ImageBuildError

__all__ = ["BaseImageRecipe", "host_codename", "host_base_recipe", "ensure_base_image", "image_exists"]

BASE_REPOSITORY = "smddp-compat-base"
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
_DEBOOTSTRAP_SECONDS = 1800.0
_IMPORT_SECONDS = 600.0
_CA_DIR = Path("/usr/local/share/ca-certificates")


@dataclass(frozen=True)
class BaseImageRecipe:
    """What goes into the base image.

    Attributes:
        suite: Debian release (codename).
        mirror: Debian mirror URL.
        security_mirror: Debian security mirror URL.
        variant: debootstrap variant (``minbase``: essential packages and apt only).
        include: Extra packages debootstrap installs.
        ca_certificates: Extra CA certificate files (PEM) trusted inside the image.
    """

    suite: str = DEFAULT_SUITE
    mirror: str = DEFAULT_MIRROR
    security_mirror: str = DEFAULT_SECURITY_MIRROR
    variant: str = "minbase"
    include: tuple[str, ...] = ("ca-certificates",)
    ca_certificates: tuple[Path, ...] = field(default=())

    def digest(self) -> str:
        """SHA-256 of the recipe, CA certificates' contents included."""
        recipe = asdict(self)
        recipe["ca_certificates"] = [
            [path.name, hashlib.sha256(path.read_bytes()).hexdigest()] for path in self.ca_certificates
        ]
        return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()

    @property
    def tag(self) -> str:
        """The image tag: ``smddp-compat-base:<suite>-<digest>``."""
        return f"{BASE_REPOSITORY}:{self.suite}-{self.digest()[:16]}"


def _apt_sources(root: Path = Path("/etc/apt")) -> list[tuple[str, list[str]]]:
    """(URI, suites) pairs from the host's apt sources, one-line and deb822 formats."""
    found: list[tuple[str, list[str]]] = []
    one_line = [root / "sources.list", *sorted((root / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            words = re.sub(r"\[[^\]]*\]", "", line).split()
            if len(words) >= 3 and words[0] == "deb":
                found.append((words[1], [words[2]]))
    for path in sorted((root / "sources.list.d").glob("*.sources")):
        for block in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            fields: dict[str, str] = {}
            for line in block.splitlines():
                if ":" in line and not line.startswith(("#", " ")):
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.strip()
            if fields.get("enabled", "yes").lower() == "no" or "deb" not in fields.get("types", "").split():
                continue
            for uri in fields.get("uris", "").split():
                found.append((uri, fields.get("suites", "").split()))
    return found


def host_codename() -> str | None:
    """This machine's Debian (or Ubuntu) release codename from ``/etc/os-release``, or None when it names none."""
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.MULTILINE)
    return match.group(1) if match else None


def host_base_recipe(suite: str = DEFAULT_SUITE) -> BaseImageRecipe:
    """The recipe of a ``suite`` (Debian release) image for this machine: the host's Debian mirrors
    (``SMDDP_DEBIAN_MIRROR`` overrides) and extra CAs."""
    mirror = os.environ.get("SMDDP_DEBIAN_MIRROR", "")
    security = os.environ.get("SMDDP_DEBIAN_SECURITY_MIRROR", "")
    for uri, suites in _apt_sources():
        if not mirror and suite in suites and "security" not in uri:
            mirror = uri
        if not security and f"{suite}-security" in suites:
            security = uri
    cas = tuple(sorted(_CA_DIR.glob("*.crt"))) if _CA_DIR.is_dir() else ()
    return BaseImageRecipe(
        suite=suite,
        mirror=(mirror or DEFAULT_MIRROR).rstrip("/"),
        security_mirror=(security or DEFAULT_SECURITY_MIRROR).rstrip("/"),
        ca_certificates=cas,
    )


def image_exists(engine: Engine, tag: str) -> bool:
    """True when the local engine holds an image named ``tag``."""
    code, _ = capture([engine.docker, "image", "inspect", "--format", "{{.Id}}", tag], timeout=30)
    return code == 0


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (debootstrap mounts /proc and /sys inside the tree while it works)."""
    prefix = str(root.resolve())
    mounts = []
    with open("/proc/mounts", encoding="utf-8") as table:
        for line in table:
            point = line.split()[1].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                mounts.append(point)
    return sorted(mounts, key=len, reverse=True)


def _remove_tree(root: Path) -> None:
    """Deletes the root filesystem tree, never through a mount point left inside it."""
    for point in _mounts_under(root):
        subprocess.run(["umount", "-l", point], check=False, timeout=60)  # noqa: S603,S607
    if _mounts_under(root):
        raise ImageBuildError("cleanup", f"{root} still has mounts inside; remove it by hand after unmounting them")
    shutil.rmtree(root, ignore_errors=True)


def _write_sources(root: Path, recipe: BaseImageRecipe) -> None:
    lines = [
        f"deb {recipe.mirror} {recipe.suite} main",
        f"deb {recipe.mirror} {recipe.suite}-updates main",
        f"deb {recipe.security_mirror} {recipe.suite}-security main",
    ]
    (root / "etc/apt/sources.list").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _check(result_ok: bool, step: str, describe: str, log_path: str | None) -> None:
    if not result_ok:
        raise ImageBuildError(step, describe, log_path)


def ensure_base_image(
    engine: Engine,
    recipe: BaseImageRecipe,
    *,
    log_path: str | None = None,
    stream: IO[str] | None = None,
    work_dir: str | None = None,
) -> str:
    """Returns the base image's tag, building it first when the engine does not hold it.

    Args:
        log_path: File the build's output is appended to.
        stream: Where progress is printed, or None.
        work_dir: Where the root filesystem is made (default: ``/var/tmp``); needs ~400 MB.

    Raises:
        ImageBuildError: Not root, debootstrap missing, or a step failed.
    """
    tag = recipe.tag
    if image_exists(engine, tag):
        return tag
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageBuildError(
            "debootstrap", "debootstrap is not installed; install it: `sudo apt-get install debootstrap`"
        )
    if os.geteuid() != 0:
        raise ImageBuildError(
            "debootstrap",
            "making the base root filesystem needs root; run the build once as root "
            "(`sudo .venv/bin/smddp image` from the checkout), later runs reuse the image",
        )
    root = Path(tempfile.mkdtemp(prefix="smddp-rootfs-", dir=work_dir or "/var/tmp"))
    say = (lambda text: (stream.write(text + "\n"), stream.flush())) if stream else (lambda text: None)
    try:
        say(f"==> base image {tag}: debootstrap {recipe.variant} {recipe.suite} from {recipe.mirror}")
        argv = [debootstrap, f"--variant={recipe.variant}", f"--include={','.join(recipe.include)}", recipe.suite,
                str(root), recipe.mirror]
        result = run_command(argv, timeout=_DEBOOTSTRAP_SECONDS, log_path=log_path)
        _check(result.ok, "debootstrap", result.describe(), log_path)
        _write_sources(root, recipe)
        if recipe.ca_certificates:
            target = root / _CA_DIR.relative_to("/")
            target.mkdir(parents=True, exist_ok=True)
            for cert in recipe.ca_certificates:
                shutil.copyfile(cert, target / cert.name)
            result = run_command(["chroot", str(root), "update-ca-certificates"], timeout=120, log_path=log_path)
            _check(result.ok, "update-ca-certificates", result.describe(), log_path)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / leftover).glob("*"):
                if item.is_file():
                    item.unlink()
        if _mounts_under(root):
            raise ImageBuildError("debootstrap", f"mounts were left inside {root}: {_mounts_under(root)}")
        say(f"==> base image {tag}: docker import")
        _import(engine, root, tag, recipe, log_path)
        return tag
    finally:
        _remove_tree(root)


def _import(engine: Engine, root: Path, tag: str, recipe: BaseImageRecipe, log_path: str | None) -> None:
    changes = ('CMD ["/bin/bash"]', "ENV LANG=C.UTF-8", f"LABEL org.smddp-compat.base-recipe={recipe.digest()}")
    tar = subprocess.Popen(  # noqa: S603,S607 - argument list
        ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", "-", "."],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        argv = [engine.docker, "import", *(part for change in changes for part in ("--change", change))]
        assert tar.stdout is not None
        result = run_command([*argv, "-", tag], timeout=_IMPORT_SECONDS, log_path=log_path, stdin=tar.stdout)
        tar.stdout.close()
    finally:
        try:
            tar.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tar.kill()
            tar.wait(timeout=10)
    _check(result.ok and tar.returncode == 0, "docker import", result.describe(), log_path)
