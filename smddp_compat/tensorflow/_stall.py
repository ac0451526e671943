"""Stall watchdog: a rank that waits too long in a collective is reported, then ended, so the job stops.

It replaces Horovod 0.28.1's stall inspector, which never fires under the Gloo controller (docs/reliability.md),
for the collectives entered through smddp_compat, on any controller.

* Every *eager* collective (``allreduce``, ``broadcast_variables``, an eager ``DistributedGradientTape.gradient``...)
  registers ``(description, start time)`` in a dict until it returns: about a microsecond per collective
  (``pytest tests/reliability/test_stall.py -k hot_path -s`` prints it; the test fails above 5 us).
* Every collective traced in a ``tf.function`` (the same ones, a DistributedOptimizer's and Keras ``fit``'s
  included) does the same at run time, through two Python calls the trace adds around it (:func:`enter_traced`,
  :func:`leave_traced`): about 40 us of CPU per collective and step; nothing is added when the watchdog is off.
* A daemon thread per process publishes this rank's state to ``$SMDDP_STALL_DIR/rank-<N>.json`` (the collective it
  waits in and since when, or how many it completed and the last one; at least every second as a heartbeat). At
  ``SMDDP_STALL_WARNING_SECONDS`` in one collective it warns, naming the collective and the ranks not in it (from
  their files); at ``SMDDP_STALL_TIMEOUT_SECONDS`` it prints the reason, writes it to ``$SM_OUTPUT_DIR/failure``
  when that is set, and exits with :data:`STALL_EXIT_CODE`; the launcher then stops every other rank.

Not seen: collectives called through Horovod's own API, compiled by XLA (``jit_compile``) or built in a
``tf.compat.v1`` session's graph; :func:`watch` around a step's call watches the whole step.

The launcher sets the variables; the watchdog runs when at least one is set. ``SMDDP_STALL_DIR`` is a directory
shared by all ranks (without it a stalled rank is still warned about and ended, but the missing ranks are unknown);
the warning defaults to 60 s (Horovod's default); the timeout to never.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import math
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from smddp_compat.contract import SM_CURRENT_HOST, SM_OUTPUT_DIR, write_atomically, write_failure_file
from smddp_compat.errors import UsageError

__all__ = [
    "STALL_EXIT_CODE", "DEFAULT_WARNING_SECONDS", "DIR_VARIABLE", "WARNING_VARIABLE", "TIMEOUT_VARIABLE", "StallConfig",
    "Identity", "StallWatchdog", "status_path", "describe_missing_ranks", "describe", "enter", "leave", "enter_traced",
    "leave_traced", "watch", "active_watchdog",
]

#: Exit code of a rank ended by the watchdog (EX_SOFTWARE: "internal software error").
STALL_EXIT_CODE = 70
#: Warning threshold when the watchdog is on but SMDDP_STALL_WARNING_SECONDS is not set (Horovod's default).
DEFAULT_WARNING_SECONDS = 60.0

DIR_VARIABLE = "SMDDP_STALL_DIR"
WARNING_VARIABLE = "SMDDP_STALL_WARNING_SECONDS"
TIMEOUT_VARIABLE = "SMDDP_STALL_TIMEOUT_SECONDS"

_HEARTBEAT_SECONDS = 1.0
# A status not rewritten for this long belongs to a process that is hung or gone.
_STALE_SECONDS = 10.0


def _seconds(environ: Mapping[str, str], name: str) -> float | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{name}={text!r} must be a positive number of seconds, e.g. {name}=60.")
    return value


@dataclass(frozen=True)
class StallConfig:
    """When to warn and when to end a rank, and where ranks publish their state.

    Attributes:
        directory: The shared status directory, or None.
        warning_seconds: Seconds in one collective before a warning.
        timeout_seconds: Seconds in one collective before the rank is ended, or None for never.
    """

    directory: str | None
    warning_seconds: float
    timeout_seconds: float | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "StallConfig | None":
        """Reads the SMDDP_STALL_* variables; None when none is set (the watchdog stays off).

        Raises:
            UsageError: A value is not a positive number, or the timeout is shorter than the warning.
        """
        env = os.environ if environ is None else environ
        directory = env.get(DIR_VARIABLE) or None
        warning = _seconds(env, WARNING_VARIABLE)
        timeout = _seconds(env, TIMEOUT_VARIABLE)
        if directory is None and warning is None and timeout is None:
            return None
        if warning is None:
            warning = DEFAULT_WARNING_SECONDS if timeout is None else min(DEFAULT_WARNING_SECONDS, timeout / 2)
        if timeout is not None and timeout < warning:
            raise UsageError(
                f"{TIMEOUT_VARIABLE}={timeout:g} is shorter than {WARNING_VARIABLE}={warning:g}: the warning must "
                "come first; raise the timeout or lower the warning."
            )
        return cls(directory=directory, warning_seconds=warning, timeout_seconds=timeout)

    @property
    def poll_seconds(self) -> float:
        """How often the watchdog looks: a tenth of the shortest limit, between 0.05 and 1 second."""
        shortest = min(self.warning_seconds, self.timeout_seconds or math.inf)
        return min(1.0, max(0.05, shortest / 10))


@dataclass(frozen=True)
class Identity:
    """Who this process is in the job."""

    rank: int
    size: int
    host: str


def _host_name() -> str:
    return os.environ.get("HOROVOD_HOSTNAME") or os.environ.get(SM_CURRENT_HOST) or socket.gethostname()


def _horovod_identity() -> Identity | None:
    """This rank's identity once Horovod is initialized (None before)."""
    hvd = sys.modules.get("horovod.tensorflow")
    if hvd is None:
        return None
    try:
        if not hvd.is_initialized():
            return None
        return Identity(rank=int(hvd.rank()), size=int(hvd.size()), host=_host_name())
    except (ValueError, RuntimeError):  # shut down in between
        return None


def status_path(directory: str, rank: int) -> str:
    """The status file of ``rank`` in ``directory``."""
    return os.path.join(directory, f"rank-{rank}.json")


def _read_status(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ago(seconds: float) -> str:
    return f"{max(0.0, seconds):.1f} s"


def describe_missing_ranks(
    directory: str | None, me: Identity, collective: str, now_wall: float | None = None
) -> tuple[list[int], list[str]]:
    """Which ranks are not in ``collective`` and what each is doing instead, from their status files.

    Returns (missing ranks, one line per missing rank), both empty when every rank is in it; ``me`` is the rank
    asking, ``now_wall`` defaults to ``time.time()``.
    """
    now = time.time() if now_wall is None else now_wall
    missing: list[int] = []
    lines: list[str] = []
    if directory is None:
        return [], [f"the other ranks are unknown ({DIR_VARIABLE} is not set; launch with smddprun or smddp local)"]
    for rank in range(me.size):
        if rank == me.rank:
            continue
        status = _read_status(status_path(directory, rank))
        if status is None:
            missing.append(rank)
            lines.append(
                f"rank {rank}: no status (it has not initialized yet, or its host does not share {directory})"
            )
            continue
        where = f"rank {rank} (host {status.get('host', '?')}, pid {status.get('pid', '?')})"
        if status.get("state") == "finished":
            missing.append(rank)
            lines.append(f"{where}: has finished its script")
            continue
        age = now - float(status.get("updated", 0.0))
        if age > _STALE_SECONDS:
            missing.append(rank)
            lines.append(f"{where}: no heartbeat for {_ago(age)} (hung or dead)")
            continue
        theirs = status.get("collective")
        if theirs == collective:
            continue
        missing.append(rank)
        if theirs:
            waited = now - float(status.get("since", now))
            lines.append(f"{where}: waits in {theirs} instead, for {_ago(waited)}")
        else:
            last = status.get("last_completed")
            if last:
                finished = now - float(status.get("last_completed_at", now))
                lines.append(
                    f"{where}: not in any collective; it completed {status.get('completed', 0)}, "
                    f"the last ({last}) {_ago(finished)} ago"
                )
            else:
                lines.append(f"{where}: not in any collective; it has not entered one yet")
    return missing, lines


class StallWatchdog:
    """Watches this process's collectives; one per process (see the module docstring). ``identity`` returns this
    rank's identity, or None until it is known (default: from Horovod); ``stream`` (default ``sys.stderr``) receives
    the warnings and the stall reason; ``exit_process`` (default ``os._exit``) ends the process: tests pass a recorder.
    """

    def __init__(
        self,
        config: StallConfig,
        *,
        identity: Callable[[], Identity | None] = _horovod_identity,
        stream: object = None,
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        self.config = config
        self._identity = identity
        self._stream = stream
        self._exit_process = exit_process
        # Hot path state: token -> (description, monotonic start). Written by the training threads only.
        self.active: dict[int, tuple[str, float]] = {}
        self.completed = 0
        self.last_completed: tuple[str, float] | None = None
        self._tokens = itertools.count()
        self._warned: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._published: tuple | None = None
        self._published_at = 0.0
        self._me: Identity | None = None
        self._finished = False
        self.reason: str | None = None

    # -- hot path -----------------------------------------------------------------------------------------------
    def enter(self, description: str) -> int:
        """Registers a collective that starts now; returns the token for :meth:`leave`."""
        token = next(self._tokens)
        self.active[token] = (description, time.monotonic())
        return token

    def leave(self, token: int) -> None:
        """Marks the collective of ``token`` as finished (whether it succeeded or raised)."""
        entry = self.active.pop(token, None)
        if entry is not None:
            self.completed += 1
            self.last_completed = (entry[0], time.monotonic())

    # -- watchdog thread ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Starts the watchdog thread (a daemon: it never keeps the process alive)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="smddp-stall-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stops the thread and publishes a final "finished" state."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        self._finished = True
        with contextlib.suppress(OSError):
            self._publish(time.monotonic(), force=True)

    def _run(self) -> None:
        while not self._stop.wait(self.config.poll_seconds):
            try:
                self.check(time.monotonic())
            except Exception as exc:  # never let the watchdog take the training down by accident
                self._print(f"smddp_compat: stall watchdog error (ignored): {exc!r}")

    def _print(self, text: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        try:
            stream.write(text + "\n")  # type: ignore[attr-defined]
            stream.flush()  # type: ignore[attr-defined]
        except (OSError, ValueError):
            pass

    def _oldest(self) -> tuple[int, str, float] | None:
        entries = list(self.active.items())
        if not entries:
            return None
        token, (description, start) = min(entries, key=lambda item: item[1][1])
        return token, description, start

    def _publish(self, now: float, force: bool = False) -> None:
        if self.config.directory is None or self._me is None:
            return
        _, collective, since = self._oldest() or (None, None, None)
        last, last_at = self.last_completed or (None, None)
        completed, finished = self.completed, self._finished
        state = (collective, since, completed, last, last_at, finished)
        if not force and state == self._published and now - self._published_at < _HEARTBEAT_SECONDS:
            return
        wall = time.time()
        status = {
            "rank": self._me.rank,
            "size": self._me.size,
            "host": self._me.host,
            "pid": os.getpid(),
            "state": "finished" if finished else ("waiting" if collective else "running"),
            "collective": collective,
            "since": wall - (now - since) if since is not None else None,
            "completed": completed,
            "last_completed": last,
            "last_completed_at": wall - (now - last_at) if last_at is not None else None,
            "updated": wall,
        }
        write_atomically(status_path(self.config.directory, self._me.rank), json.dumps(status), durable=False)
        self._published, self._published_at = state, now

    def check(self, now: float) -> None:
        """One look: publish the state, warn or end the rank when its oldest collective waited too long."""
        self._me = self._identity() or self._me
        if self._me is None:
            return
        with contextlib.suppress(OSError):
            self._publish(now)
        oldest = self._oldest()
        if oldest is None:
            return
        token, description, start = oldest
        waited = now - start
        timeout = self.config.timeout_seconds
        if timeout is not None and waited >= timeout:
            self._end(description, waited)
        elif waited >= self.config.warning_seconds and token not in self._warned:
            self._warned.add(token)
            self._print(f"smddp_compat: WARNING: {self._situation(description, waited)}")

    def _situation(self, description: str, waited: float) -> str:
        assert self._me is not None
        missing, lines = describe_missing_ranks(self.config.directory, self._me, description)
        text = (
            f"rank {self._me.rank} (host {self._me.host}) has waited {waited:.1f} s in {description} for the other "
            "ranks; "
        )
        if missing:
            text += f"ranks not in it: {', '.join(map(str, missing))}. " + " ".join(f"[{line}]" for line in lines)
        elif self.config.directory is None:
            text += lines[0] + "."
        else:
            text += "every rank is in it: the collective itself is stuck (network or peer process)."
        return text

    def _end(self, description: str, waited: float) -> None:
        assert self._me is not None and self.config.timeout_seconds is not None
        self.reason = (
            f"Stalled collective: {self._situation(description, waited)} Every rank must call the same "
            "collectives in the same order; look at what the missing ranks do instead (a rank that sleeps, loops, "
            "skips a step or reads different data). The limit is "
            f"{TIMEOUT_VARIABLE}={self.config.timeout_seconds:g} s (smddprun --stall-shutdown-seconds); "
            f"rank {self._me.rank} exits with code {STALL_EXIT_CODE} so that the job stops."
        )
        self._print(f"smddp_compat: ERROR: {self.reason}")
        output_dir = os.environ.get(SM_OUTPUT_DIR)
        if output_dir:
            with contextlib.suppress(OSError):
                write_failure_file(output_dir, self.reason)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self._stop.set()
        self._exit_process(STALL_EXIT_CODE)


_watchdog: StallWatchdog | None = None
_configured = False
_lock = threading.Lock()


def active_watchdog() -> StallWatchdog | None:
    """The process's watchdog, started on first use when the environment asks for one (None otherwise)."""
    global _watchdog, _configured
    if _configured:
        return _watchdog
    with _lock:
        if not _configured:
            config = StallConfig.from_environ()
            if config is not None:
                _watchdog = StallWatchdog(config)
                _watchdog.start()
                atexit.register(_watchdog.stop)
            _configured = True
    return _watchdog


def _forget_in_child() -> None:
    # A forked child is not a rank of the job: it must not publish under its parent's rank.
    global _watchdog, _configured
    _watchdog, _configured = None, True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def describe(operation: str, detail: str = "", tensor: str | None = None) -> str:
    """How reports name a collective, e.g. ``allreduce of tensor 'grad_0' (3 gradients)``."""
    description = operation
    if tensor:
        description += f" of tensor {tensor!r}"
    if detail:
        description += f" ({detail})"
    return description


def enter(operation: str, detail: str = "", tensor: str | None = None) -> int | None:
    """Registers an eager collective with the process's watchdog; returns a token for :func:`leave` (None if off)."""
    watchdog = _watchdog if _configured else active_watchdog()
    if watchdog is None:
        return None
    return watchdog.enter(describe(operation, detail, tensor))


def leave(token: int | None) -> None:
    """Ends what :func:`enter` registered."""
    if token is not None and _watchdog is not None:
        _watchdog.leave(token)


def enter_traced(description: list[str]) -> int:
    """Run-time start of a collective traced in a ``tf.function`` (called by the graph, see ``_ops``): registers
    ``description[0]``, set once the trace named the collective; returns the token for :func:`leave_traced`."""
    return _watchdog.enter(description[0]) if _watchdog is not None else -1


def leave_traced(token: object) -> int:
    """Run-time end of what :func:`enter_traced` registered; returns 0 (a graph op needs an output)."""
    leave(int(token))  # type: ignore[call-overload]
    return 0


@contextlib.contextmanager
def watch(name: str) -> Iterator[None]:
    """Watches a block as one collective, e.g. the call of a ``tf.function`` training step::

        with watch("train_step"):
            loss = train_step(images, labels)

    Every rank must enter blocks of the same ``name`` for the others to count it as present.
    """
    token = enter(name)
    try:
        yield
    finally:
        leave(token)

# Start at import (smddp_compat.tensorflow imports this module) so that a rank publishes its state from the start,
# even while it has not entered any collective yet.
active_watchdog()
