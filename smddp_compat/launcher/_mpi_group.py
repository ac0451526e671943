"""Running a job's ranks under one ``mpirun``, supervised exactly like the Gloo path's processes.

:func:`run_mpi_group` takes :func:`run_process_group`'s per-rank :class:`ProcessSpec` list and returns its
:class:`GroupResult`, so callers choose an engine and keep everything else:

* every rank runs its own spec: the launcher writes the specs to a private folder and mpirun starts ``smddprun
  --rank-specs DIR`` on every rank, which loads its spec, adds what MPI gave it, and becomes the command
  (:mod:`smddp_compat.launcher._per_rank`);
* mpirun tags each output line with its rank (``--tag-output``); it is printed as ``[label] line`` and written to
  that rank's log file, as for Gloo ranks; mpirun's own lines are prefixed ``[mpirun]``;
* the rank mpirun reports as failed (exit code or kill) is the result's failed process, with its exit code and the
  reason it recorded (its failure file);
* the time limit, Ctrl-C and SIGTERM stop mpirun, which stops the ranks; what is left is killed after ``grace``
  seconds, and once mpirun has ended, so is what is left in the ranks' process groups (a rank's children).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import IO, Callable, Mapping, Sequence

import smddp_compat
from smddp_compat.errors import UsageError
from smddp_compat.launcher._supervisor import (
    GroupResult, ProcessResult, ProcessSpec, describe_failure, memory_note, private_tmpdir, run_process_group)

__all__ = [
    "MPIRUN_LABEL", "MPIRUN_TUNING", "mpirun_argv", "mpirun_unavailable_reason", "write_rank_specs", "load_rank_spec",
    "record_process_group", "MpirunOutput", "TaggedLines", "ANY_RANK_TAG", "run_mpi_group",
]

#: Prefix of the lines mpirun prints itself (not a rank's output).
MPIRUN_LABEL = "mpirun"

#: Open MPI settings for ranks that share this machine's cores with their own threads (bench: LATEST.md).
MPIRUN_TUNING = (
    # Shared memory between the ranks (vader, with its default single-copy mechanism, CMA) and nothing else.
    ("btl", "self,vader"),
    # A rank waiting in MPI yields its core: Horovod's background thread and TensorFlow's pools need it
    # (bench: without it a 64 MB allreduce was 2.2x slower on 2 cores).
    ("mpi_yield_when_idle", "1"),
    # A rank that exits with an error ends the job (mpirun's default, stated because supervision relies on it).
    ("orte_abort_on_non_zero_status", "1"),
)

# mpirun --tag-output puts "[jobid,rank]<stdout>:" before every chunk a rank wrote and after every newline in it
# (Open MPI 4.x). A chunk without a newline (a program writing unbuffered) is followed directly by the next chunk's
# tag, possibly another rank's, on the same line: a rank's line is complete only where a newline follows.
_TAG = re.compile(r"\[\d+,(\d+)\]<(stdout|stderr|stddiag)>:")
#: mpirun's tag, or the form sagemaker-training's output watcher rewrites it to before printing it (process.watch:
#: "[1,mpirank:3,algo-2]<stdout>:"); group 1 is the rank.
ANY_RANK_TAG = re.compile(r"\[\d+,(?:mpirank:)?(\d+)(?:,[^\]\s]+)?\]<(?:stdout|stderr|stddiag)>:")
# mpirun's report of the first rank that failed.
_EXIT_CODE_RANK = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+")
_ABORT_CODE = re.compile(r"with errorcode (-?\d+)")

_SPEC_FILE = "rank-{rank}.json"
_GROUP_FILE = "rank-{rank}.pgid"


def mpirun_unavailable_reason() -> str | None:
    """Why ranks cannot run under mpirun here (None when they can)."""
    if shutil.which("mpirun") is None:
        return "mpirun is not on PATH (install Debian's openmpi-bin: setup.sh does)"
    return None


def mpirun_argv(num_ranks: int, rank_command: Sequence[str], *,
                extra_mca: Mapping[str, str] | None = None) -> list[str]:
    """The mpirun command that starts ``num_ranks`` copies of ``rank_command`` on this machine.

    Args:
        rank_command: What every rank runs (smddprun as a per-rank wrapper).
        extra_mca: Open MPI settings added to (or replacing) :data:`MPIRUN_TUNING`.

    Raises:
        UsageError: mpirun is not installed, or ``num_ranks`` < 1.
    """
    reason = mpirun_unavailable_reason()
    if reason:
        raise UsageError(f"the MPI engine needs mpirun: {reason}; or use the Gloo engine (--gloo).")
    if num_ranks < 1:
        raise UsageError(f"mpirun needs at least 1 rank, got {num_ranks}.")
    argv = [shutil.which("mpirun") or "mpirun", "-np", str(num_ranks), "--host", f"localhost:{num_ranks}"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["--bind-to", "none", "--map-by", "slot", "--tag-output"]
    for name, value in {**dict(MPIRUN_TUNING), **(extra_mca or {})}.items():
        argv += ["--mca", name, value]
    return argv + list(rank_command)


def write_rank_specs(specs: Sequence[ProcessSpec], directory: str) -> None:
    """Writes each rank's command, environment and working directory where its wrapper reads them.

    The files hold the ranks' whole environment, so they are readable by this user only, and each is removed as
    soon as its rank has read it.
    """
    for rank, spec in enumerate(specs):
        path = os.path.join(directory, _SPEC_FILE.format(rank=rank))
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"argv": spec.command, "env": spec.env, "cwd": spec.cwd}, out)


def load_rank_spec(directory: str, rank: int) -> tuple[list[str], dict[str, str], str | None]:
    """This rank's (argv, environment, working directory), as :func:`write_rank_specs` wrote them.

    Raises:
        UsageError: The file is missing or unreadable (the folder does not belong to this job).
    """
    path = os.path.join(directory, _SPEC_FILE.format(rank=rank))
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        os.unlink(path)  # it holds the rank's whole environment (secrets included): read once, then gone
        return list(data["argv"]), dict(data["env"]), data.get("cwd")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"--rank-specs {directory}: cannot read rank {rank}'s spec {path} ({exc}); the folder is written by "
            "smddprun's MPI engine for the ranks it starts, and is not meant to be given by hand."
        ) from exc


def record_process_group(directory: str, rank: int) -> None:
    """Notes this rank's process group (mpirun gives each rank its own) where the launcher finds it at the end."""
    with open(os.path.join(directory, _GROUP_FILE.format(rank=rank)), "w", encoding="ascii") as out:
        out.write(str(os.getpgrp()))


def _kill_rank_groups(directory: str, num_ranks: int) -> None:
    """SIGKILL what is left in the ranks' process groups: children a rank started outlive it when mpirun ends it."""
    own = os.getpgrp()
    for rank in range(num_ranks):
        try:
            with open(os.path.join(directory, _GROUP_FILE.format(rank=rank)), encoding="ascii") as handle:
                group = int(handle.read().strip())
        except (OSError, ValueError):
            continue
        if group > 1 and group != own:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class TaggedLines:
    """Puts the ranks' lines of mpirun's tagged output back together, each whole and under its own tag.

    Unbuffered, a rank's ``print`` reaches mpirun as two chunks, its text and then its newline, each tagged, and
    other ranks' chunks may come between: mpirun prints ``[1,3]<stdout>:loss=0.25[1,2]<stdout>:...`` and, later,
    ``[1,3]<stdout>:`` with the newline (sagemaker-training prints the same with its ``[1,mpirank:3,algo-2]``
    tags). A rank's text is therefore kept, per tag, until a tag of that rank ends a line.

    Args:
        tag: The tag's pattern (default: mpirun's and the training toolkit's forms).
    """

    def __init__(self, tag: re.Pattern[str] = ANY_RANK_TAG) -> None:
        self.tag = tag
        self._partial: dict[str, tuple[re.Match[str], str]] = {}

    def feed(self, line: str | None) -> list[tuple[re.Match[str] | None, str]]:
        """The whole lines one line of output (without its newline) completes, each as (its tag, its text), in
        order; text before the line's first tag comes first, with the tag None (a line of mpirun's own, or of a
        program that does not tag its lines). None, at the end of the output, gives back the text still waiting.
        """
        if line is None:
            done = [(tag, text) for tag, text in self._partial.values() if text]
            self._partial.clear()
            return done
        tags = list(self.tag.finditer(line))
        if not tags:
            return [(None, line)]
        done: list[tuple[re.Match[str] | None, str]] = []
        if tags[0].start() > 0:
            done.append((None, line[: tags[0].start()]))
        for index, tag in enumerate(tags):
            end = tags[index + 1].start() if index + 1 < len(tags) else len(line)
            text = self._partial.pop(tag.group(0), (tag, ""))[1] + line[tag.end() : end]
            if index + 1 < len(tags):
                self._partial[tag.group(0)] = (tag, text)  # this chunk ended without its newline
            else:
                done.append((tag, text))
        return done


@dataclass
class MpirunOutput:
    """Routes mpirun's tagged output to the ranks' labels and logs, and reads which rank failed first.

    Attributes:
        specs: The ranks' specs, in rank order.
        log_path: Log file of mpirun's own lines, or None.
        failed_rank: The rank mpirun reported as the first to fail, or None.
        failed_code: Its exit code (negative: the signal that killed it), or None.
        own_lines: The last lines mpirun printed itself (for a failure that names no rank).
    """

    specs: Sequence[ProcessSpec]
    log_path: str | None = None
    failed_rank: int | None = None
    failed_code: int | None = None
    own_lines: list[str] = field(default_factory=list)
    _pending_rank: int | None = None
    _lines: TaggedLines = field(default_factory=lambda: TaggedLines(_TAG))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, line: str | None) -> list[tuple[str, str, str | None]]:
        """The complete lines in one line of mpirun's output, each as (label, text, log); None (the output ended)
        flushes the ranks' unfinished lines."""
        with self._lock:
            if line is not None:
                first = _TAG.search(line)
                if first is None or first.start() > 0 and not self._known_rank(first):
                    self._read_report(line)
                    return [(MPIRUN_LABEL, line, self.log_path)]
            return [
                self._rank_line(int(tag.group(1)), text) if tag is not None else (MPIRUN_LABEL, text, self.log_path)
                for tag, text in self._lines.feed(line)
            ]

    def _known_rank(self, tag: re.Match[str]) -> bool:
        return 0 <= int(tag.group(1)) < len(self.specs)

    def _rank_line(self, rank: int, text: str) -> tuple[str, str, str | None]:
        if 0 <= rank < len(self.specs):
            return self.specs[rank].label, text, self.specs[rank].log_path
        return MPIRUN_LABEL, text, self.log_path

    def _read_report(self, line: str) -> None:
        self.own_lines = [*self.own_lines[-19:], line]
        if self.failed_rank is not None and self._pending_rank is None:
            return
        if (match := _SIGNAL.search(line)) is not None:
            self.failed_rank, self.failed_code = int(match.group(1)), -int(match.group(2))
        elif (match := _EXIT_CODE_RANK.search(line) or _ABORT.search(line)) is not None:
            self._pending_rank = int(match.group(1))
        elif self._pending_rank is not None and (match := _EXIT_CODE.search(line) or _ABORT_CODE.search(line)):
            self.failed_rank, self.failed_code = self._pending_rank, int(match.group(1))
            self._pending_rank = None


def _wrapper_command(python: str, directory: str) -> list[str]:
    # --no-shim: each spec's environment is already complete (the launcher put the alias there, or chose not to).
    return [python, "-m", "smddp_compat.launcher", "--no-shim", "--rank-specs", directory]


def run_mpi_group(specs: Sequence[ProcessSpec], *, timeout: float | None = None, grace: float = 5.0,
                  stream: IO[str] | None = None, failure_reason: Callable[[ProcessSpec], str | None] | None = None,
                  mpirun_log: str | None = None, extra_mca: Mapping[str, str] | None = None,
                  python: str = sys.executable, console_hides: Callable[[str], bool] | None = None,
                  remove_if_killed: Sequence[str] = (), own_network: bool = True,
                  stop: threading.Event | None = None) -> GroupResult:
    """Runs the ranks under one mpirun on this machine: all succeed, or all are stopped.

    Args:
        specs: One spec per rank, in rank order (all on this machine).
        timeout, grace, stream, failure_reason, stop: As for :func:`run_process_group` (the failed process is a
            rank).
        mpirun_log: Log file of mpirun's own lines, or None.
        extra_mca: Open MPI settings added to :data:`MPIRUN_TUNING`.
        python: The interpreter that runs the per-rank wrapper (one with smddp_compat importable).
        console_hides: Rank lines for which it returns True go to the logs but not to the console.
        remove_if_killed: As for :func:`run_process_group` (the ranks' spec folder is added).
        own_network: As for :func:`run_process_group`: mpirun and its ranks in a network of the job's own, so
            mpirun's listeners (bound to every interface whatever its options say) accept no other machine.

    Returns:
        How the job ended, one result per rank: the failed rank carries its exit code, the others the code mpirun
        ended with (0 when the job succeeded).

    Raises:
        UsageError: No specs, mpirun is missing, or a bad timeout or grace.
        LaunchError: mpirun could not be started.
    """
    if not specs:
        raise UsageError("run_mpi_group needs at least one ProcessSpec, got none.")
    directory = tempfile.mkdtemp(prefix="smddp-mpi-ranks-")
    # Each rank's environment comes from its spec file: the job's temporary folder is set there.
    with private_tmpdir(specs) as (specs, job_tmp):
        # Open MPI's shared-memory segments (vader_segment.*, 4 MB per rank) go to a folder of the job's own in
        # /dev/shm, removed with it: a rank killed outright leaves its segment behind otherwise.
        shared_memory = _shared_memory_folder(job_tmp)
        extra_mca = {"btl_vader_backing_directory": shared_memory, **(extra_mca or {})}
        try:
            write_rank_specs(specs, directory)
            output = MpirunOutput(specs, log_path=mpirun_log)
            mpirun_env = dict(specs[0].env)
            mpirun_env["PYTHONPATH"] = os.pathsep.join(
                p for p in [_importable_root(), mpirun_env.get("PYTHONPATH", "")] if p
            )
            mpirun = ProcessSpec(
                argv=mpirun_argv(len(specs), _wrapper_command(python, directory), extra_mca=extra_mca),
                env=mpirun_env,
                label=MPIRUN_LABEL,
                cwd=specs[0].cwd,
                route_output=output.route,
                console_hides=console_hides,
            )
            group = run_process_group([mpirun], timeout=timeout, grace=grace, stream=stream,
                                      remove_if_killed=[directory, job_tmp, shared_memory, *remove_if_killed],
                                      own_network=own_network, stop=stop)
        finally:
            _kill_rank_groups(directory, len(specs))
            shutil.rmtree(directory, ignore_errors=True)
            shutil.rmtree(shared_memory, ignore_errors=True)
    return _per_rank_result(group, specs, output, failure_reason)


def _shared_memory_folder(fallback: str) -> str:
    """A fresh folder in /dev/shm (memory, as Open MPI's default place for its segments), or ``fallback`` where
    /dev/shm cannot be written."""
    try:
        return tempfile.mkdtemp(prefix="smddp-shm-", dir="/dev/shm")
    except OSError:
        return fallback


def _importable_root() -> str:
    """The folder holding the smddp_compat package in use (so the wrapper imports this very copy)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(smddp_compat.__file__)))


def _per_rank_result(
    group: GroupResult,
    specs: Sequence[ProcessSpec],
    output: MpirunOutput,
    failure_reason: Callable[[ProcessSpec], str | None] | None,
) -> GroupResult:
    mpirun_result = group.results[0]
    code = mpirun_result.returncode
    results = [ProcessResult(spec=spec, returncode=code, duration=mpirun_result.duration) for spec in specs]
    failed: ProcessResult | None = None
    reason = group.reason
    if group.failed is not None:
        if output.failed_rank is not None and 0 <= output.failed_rank < len(specs):
            failed = results[output.failed_rank]
            failed.returncode = output.failed_code
            recorded = failure_reason(failed.spec) if failure_reason is not None else None
            assert failed.returncode is not None
            reason = describe_failure(failed.spec, failed.returncode, recorded)
            reason += memory_note(group.oom_kills, failed.returncode)
        else:
            failed = ProcessResult(spec=mpirun_result.spec, returncode=code, duration=mpirun_result.duration)
            said = " | ".join(line.strip() for line in output.own_lines if line.strip() and "----" not in line)
            reason = f"{group.reason}; mpirun said: {said[-600:] or '(nothing)'}"
    return dataclasses.replace(group, results=results, reason=reason, failed=failed)

