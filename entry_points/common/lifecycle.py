"""A training script's lifecycle under the SageMaker contract (no TensorFlow here): `run_entry_point` runs ``main``,
turning any exception into the failure file and a non-zero exit, with SIGTERM as a flag (`termination_requested`)
so that training loops checkpoint and stop cleanly; `write_failure` for a script that ends itself.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from smddp_compat import contract
from smddp_compat.cluster import ClusterConfigError
from smddp_compat.entry_points.common.errors import EntryPointError
from smddp_compat.entry_points.common.training_env import TrainingEnv, local_root

__all__ = [
    "run_entry_point", "write_failure", "install_termination_handler", "termination_requested", "STOPPED_REASON",
]

_terminate = threading.Event()
_handler_installed = False


def _on_sigterm(signum: int, frame: object) -> None:
    if _terminate.is_set():
        # A second SIGTERM: stop waiting for the training loop and die the default way.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _terminate.set()
    print(f"SIGTERM received (pid {os.getpid()}): checkpointing and stopping at the next step.",
          file=sys.stderr, flush=True)


def install_termination_handler() -> None:
    """Makes SIGTERM set the `termination_requested` flag instead of killing the process (main thread only)."""
    global _handler_installed
    if not _handler_installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        _handler_installed = True


def termination_requested() -> bool:
    """Whether SIGTERM has arrived since the handler was installed: checkpoint and return from training."""
    return _terminate.is_set()


def _failure_dir(output_dir: str | os.PathLike[str] | None) -> Path:
    if output_dir is not None:
        return Path(output_dir)
    try:
        return TrainingEnv.from_environ().output_dir
    except (EntryPointError, ClusterConfigError):
        fallback = os.environ.get(contract.SM_OUTPUT_DIR)
        return Path(fallback) if fallback else local_root(os.environ) / contract.OUTPUT_DIR


def write_failure(reason: str, output_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Writes `reason` to ``<output_dir>/failure`` atomically (SageMaker shows its start as the FailureReason).

    Args:
        reason: What went wrong and how to fix it.
        output_dir: Directory of the failure file (default: `TrainingEnv.output_dir`).

    Returns:
        The failure file, or ``None`` if it could not be written (the reason is then only on stderr).
    """
    folder = _failure_dir(output_dir)
    try:
        return contract.write_failure_file(folder, reason)
    except OSError as exc:
        print(f"could not write the failure file {contract.failure_file(folder)}: {exc}", file=sys.stderr, flush=True)
        return None


def run_entry_point(main: Callable[[], int | None], *, output_dir: str | os.PathLike[str] | None = None) -> NoReturn:
    """Runs a script's `main` under the SageMaker contract and exits the process.

    Installs the SIGTERM handler, calls `main()`, and exits with its return value (``None`` -> 0), or with 143 and
    :data:`STOPPED_REASON` in the failure file when SIGTERM arrived meanwhile (the script checkpointed and returned:
    the job is not complete, whoever sent the signal). On any
    exception (and on ``SystemExit`` with a non-zero code) it prints the traceback, writes
    ``<type>: <message>`` (then the traceback) to the failure file, and exits non-zero (1, or the SystemExit code).

    Args:
        main: The script's body.
        output_dir: Where the failure file goes (default: ``TrainingEnv.from_environ().output_dir``).
    """
    install_termination_handler()
    started = time.monotonic()
    try:
        code = main()
    except SystemExit as exc:
        if exc.code in (0, None):
            _exit_if_stopped(output_dir, started)
            raise
        status = exc.code if isinstance(exc.code, int) else 1
        write_failure(f"SystemExit: the script exited with status {exc.code!r}", output_dir)
        sys.stdout.flush()
        sys.exit(status)
    except BaseException as exc:  # noqa: BLE001 - everything must reach the failure file
        details = traceback.format_exc()
        kind = type(exc).__name__
        message = str(exc) or repr(exc)
        summary = f"{kind}: {message}"
        print(details, file=sys.stderr, end="", flush=True)
        print(f"training failed after {time.monotonic() - started:.1f} s: {summary}", file=sys.stderr, flush=True)
        write_failure(f"{summary}\n\n{details}", output_dir)
        sys.stdout.flush()
        sys.exit(130 if isinstance(exc, KeyboardInterrupt) else 1)
    _exit_if_stopped(output_dir, started)
    sys.stdout.flush()
    sys.exit(0 if code is None else int(code))


#: The failure reason of a script that stopped on SIGTERM: a stop is never a completed run (SageMaker says
#: ``Stopped`` when it sent the signal; one from anywhere else must not look like success either).
STOPPED_REASON = ("Stopped: the script received SIGTERM and stopped before it finished; what it saved is kept (run "
                  "the job again to resume from its last checkpoint)")


def _exit_if_stopped(output_dir: str | os.PathLike[str] | None, started: float) -> None:
    """A script that returned after SIGTERM exits 143 with :data:`STOPPED_REASON` as its failure reason."""
    if termination_requested():
        write_failure(STOPPED_REASON, output_dir)
        print(f"training stopped on SIGTERM after {time.monotonic() - started:.1f} s: exit {128 + signal.SIGTERM}, "
              "not a completed run", file=sys.stderr, flush=True)
        sys.stdout.flush()
        sys.exit(128 + signal.SIGTERM)
