"""Each local host's own ``/opt/ml``: SageMaker's paths, written literally by a script, land in that host's tree.

On SageMaker every instance has its own ``/opt/ml``, and public scripts name its folders literally
(``/opt/ml/model``, ``/opt/ml/checkpoints``, ``/opt/ml/input/config/hyperparameters.json``). In the process backend
every host's processes run in a mount namespace of the host's own, where ``/opt/ml`` is the host's tree (a bind
mount). This machine's ``/opt/ml`` is never made, read or written:

* where this machine has no ``/opt/ml``, the namespace sees ``/opt`` through an overlay (this machine's ``/opt``
  below, a folder of the job's above, in which ``/opt/ml`` is made): every other path of ``/opt`` reads as before,
  and nothing the job writes there reaches this machine's ``/opt``;
* where it has one, the host's tree is mounted over it (hidden from the job, untouched).

A holder process keeps each host's namespace (it ends when the launcher's end of its standard input closes, however
the launcher ends), and each process starts as ``nsenter --target HOLDER --mount -- argv``
(:attr:`~smddp_compat.launcher.ProcessSpec.enter`), which joins the
namespace and becomes the command: its PID, signals and output are the launcher's, as without the view. The
``SM_*`` variables keep naming the host's tree by its path on this machine, which the namespace shows too.

Making mount namespaces and mounts needs root (``CAP_SYS_ADMIN``); where a view cannot be made (not root, no
``unshare``/``nsenter``, no overlay file system, no ``/opt``), the job runs with this machine's ``/opt`` as before
and the launcher says so once, naming the fix; ``SMDDP_HOST_VIEW=shared`` chooses that on purpose.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from smddp_compat import contract
from smddp_compat.launcher import environment_choice

__all__ = ["HOST_VIEW_VARIABLE", "HostView", "host_view_choice", "host_views"]

#: ``private`` (the default: each host's own ``/opt/ml`` where one can be made) or ``shared`` (this machine's).
HOST_VIEW_VARIABLE = "SMDDP_HOST_VIEW"
_CHOICES = ("private", "shared")

_READY_SECONDS = 15.0
_STOP_SECONDS = 5.0

# Run by ``sh`` in the new mount namespace (every mount private to it): the paths are its arguments, never part of
# the script. It says "ready", then waits until its standard input closes.
_SETUP = """
set -e
root=$1 upper=$2 work=$3
if [ ! -d /opt/ml ]; then
  [ -d /opt ] || { echo "this machine has no /opt to show /opt/ml in" >&2; exit 1; }
  mount -t overlay overlay -o "lowerdir=/opt,upperdir=$upper,workdir=$work" /opt
  mkdir /opt/ml
fi
mount --bind "$root" /opt/ml
echo ready
exec cat >/dev/null
"""
#: Characters the overlay's mount options cannot hold in a path (option and path-list separators, escapes).
_UNSAFE_IN_OPTIONS = frozenset(",:\\\n")


def host_view_choice(environ: Mapping[str, str] | None = None) -> str:
    """The host view the environment asks for: ``private`` (unset) or ``shared``.

    Raises:
        ConfigurationError: ``SMDDP_HOST_VIEW`` is set to anything else.
    """
    return environment_choice(
        HOST_VIEW_VARIABLE, _CHOICES, "a host view",
        "unset it or give 'private' (each local host its own /opt/ml, the default), or 'shared' (this machine's "
        "/opt/ml, as a script started by hand sees it)", environ)


@dataclasses.dataclass
class HostView:
    """One host's mount namespace, held open for its processes.

    Attributes:
        host: The host (``algo-1``, ...).
        holder: The holder process (its PID names the namespace).
    """

    host: str
    holder: subprocess.Popen

    def entering(self, argv: Sequence[str], environ: Mapping[str, str], cwd: str | None) -> tuple[str, ...]:
        """The command that runs ``argv`` in the host's view, in ``cwd`` (``nsenter`` joins it, then becomes the
        command): :attr:`~smddp_compat.launcher.ProcessSpec.enter`. Empty for a program that cannot be found on the
        ``PATH`` of ``environ``, so starting it fails naming the program. (Entering a mount namespace moves to its
        root folder: the working folder is named again.)"""
        if shutil.which(argv[0], path=environ.get("PATH", os.defpath)) is None:
            return ()
        return ("nsenter", f"--target={self.holder.pid}", "--mount", f"--wd={cwd or os.getcwd()}", "--")

    def close(self) -> None:
        """Ends the holder (the namespace goes with its last process)."""
        with contextlib.suppress(OSError):
            self.holder.stdin.close()  # type: ignore[union-attr]
        try:
            self.holder.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()
        if self.holder.stdout is not None:
            self.holder.stdout.close()


def _unavailable_reason(paths: Sequence[Path]) -> str | None:
    """Why no view can be made here, before trying (None: try)."""
    if os.geteuid() != 0:
        return "not root (a mount namespace of the job's own needs CAP_SYS_ADMIN)"
    missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (install Debian's util-linux)"
    unsafe = [str(path) for path in paths if _UNSAFE_IN_OPTIONS & set(str(path))]
    if unsafe:
        return f"the job's folder {unsafe[0]} holds a character a mount option cannot (one of , : \\)"
    return None


def _start(host: str, root: Path, scratch: Path) -> HostView:
    """Starts ``host``'s holder; raises OSError (with what failed) when its view cannot be made."""
    upper, work = scratch / "upper", scratch / "work"
    upper.mkdir(parents=True)
    work.mkdir()
    with tempfile.TemporaryFile() as said:
        holder = subprocess.Popen(  # noqa: S603 - argv is a list; the paths are arguments of the script
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _SETUP, f"view-{host}", str(root),
             str(upper), str(work)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=said, start_new_session=True)
        assert holder.stdout is not None
        ready = bool(select.select([holder.stdout], [], [], _READY_SECONDS)[0])
        if not ready or holder.stdout.readline().strip() != b"ready":
            holder.kill()
            holder.communicate(timeout=_STOP_SECONDS)
            said.seek(0)
            lines = said.read(1 << 16).decode(errors="replace").strip().splitlines()
            raise OSError(f"{host}'s view could not be made: {lines[-1] if lines else 'no answer'}")
    return HostView(host, holder)


@contextlib.contextmanager
def host_views(
    roots: Mapping[str, Path], scratch: Path, say: Callable[[str], None] | None = None
) -> Iterator[dict[str, HostView]]:
    """Each host's own ``/opt/ml`` (``roots``: host -> its tree) while the block runs, as host -> view; empty when
    the environment does not want them (``SMDDP_HOST_VIEW=shared``) or they cannot be made: ``say`` is then told
    why, in one line. ``scratch`` (made here, left to the caller to remove) holds the overlays' own folders.

    Raises:
        ConfigurationError: ``SMDDP_HOST_VIEW`` is neither ``private`` nor ``shared``.
    """
    if host_view_choice() == "shared":
        yield {}
        return
    reason = _unavailable_reason([scratch, *roots.values()])
    views: dict[str, HostView] = {}
    started = time.monotonic()
    try:
        if reason is None:
            try:
                for index, (host, root) in enumerate(roots.items()):
                    views[host] = _start(host, root, scratch / str(index))
            except OSError as exc:
                reason = str(exc)
        if reason is not None:
            for view in views.values():
                view.close()
            views = {}
            if say is not None:
                say(f"every host sees this machine's {contract.OPT_ML} (a script writing its paths literally "
                    f"writes this machine's folders): {reason}; {HOST_VIEW_VARIABLE}=shared runs so without this "
                    "warning")
        elif say is not None and time.monotonic() - started > 1.0:
            say(f"each host's own {contract.OPT_ML} took {time.monotonic() - started:.1f} s to make")
        yield views
    finally:
        for view in views.values():
            view.close()
