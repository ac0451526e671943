"""The SageMaker training-container contract, as seen from inside a training script (no TensorFlow here).

SageMaker (and this project's local mode) start a script as ``python script.py --name value ...`` with the job's
layout in ``SM_*`` variables: ``SM_MODEL_DIR`` (uploaded as model.tar.gz), ``SM_OUTPUT_DATA_DIR`` (output.tar.gz),
``SM_OUTPUT_DIR`` (holds the ``failure`` file), ``SM_CHANNEL_<NAME>`` (input data), ``SM_HOSTS`` /
``SM_CURRENT_HOST`` (the cluster), ``SM_NUM_GPUS`` / ``SM_NUM_CPUS``. Checkpoints live in ``/opt/ml/checkpoints``
when the job has a checkpoint S3 URI. TensorBoard summaries go to the job's ``TensorBoardOutputConfig.LocalPath``
(default ``/opt/ml/output/tensorboard``), else to ``<output dir>/tensorboard`` (see `resolve_tensorboard_dir`).
When the variables are absent (a plain ``python script.py`` run) every directory falls back to a folder under
``./sm_local`` (or ``$SMDDP_LOCAL_ROOT``), so the scripts run anywhere.

This module also owns the script's lifecycle: `run_entry_point` turns any exception into the failure file and a
non-zero exit, and installs a SIGTERM handler whose flag (`termination_requested`) lets training loops checkpoint
and stop cleanly when SageMaker (or the launcher) stops the job.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, TextIO

from smddp_compat.entry_points.common.errors import ClusterConfigError, EntryPointError, HyperparameterError
from smddp_compat import contract
from smddp_compat.cluster import Cluster
from smddp_compat.cluster import ClusterConfigError as ClusterDescriptionError  # the base of ClusterConfigError
from smddp_compat.contract import DEFAULT_CHECKPOINT_DIR

__all__ = [
    "TrainingEnv",
    "resolve_tensorboard_dir",
    "add_tensorboard_dir_argument",
    "parse_hyperparameters",
    "boolean",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "MetricLogger",
    "metric_regex",
    "metric_definitions",
    "parse_metric_line",
    "run_entry_point",
    "write_failure",
    "install_termination_handler",
    "termination_requested",
    "DEFAULT_CHECKPOINT_DIR",
]

_OPT_ML = Path(contract.OPT_ML)


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _local_root(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("SMDDP_LOCAL_ROOT") or Path.cwd() / "sm_local")


def resolve_tensorboard_dir(
    environ: Mapping[str, str], output_dir: str | os.PathLike[str], explicit: str | os.PathLike[str] | None = None
) -> Path:
    """Where TensorBoard summaries go, in this order:

    1. `explicit`, the ``--tensorboard-dir`` hyperparameter, when given (an empty string counts as not given);
    2. the job's ``TensorBoardOutputConfig.LocalPath``, read from ``/opt/ml/input/config/tensorboardoutputconfig.json``
       (or the file ``$TENSORBOARD_CONFIG_FILE_PATH`` names), as AWS's SageMaker Debugger reads it: SageMaker syncs
       that folder to the job's TensorBoard S3 path, and tells the container nothing else about it (the training
       toolkit sets no ``SM_*`` variable for it, the SDK adds no hyperparameter). A file without ``LocalPath`` means
       the API's default, ``/opt/ml/output/tensorboard``;
    3. otherwise ``<output_dir>/tensorboard``: ``/opt/ml/output/tensorboard`` on SageMaker (the same default, so a job
       whose TensorBoard configuration is added later needs no change; without one SageMaker uploads nothing from
       it) and ``./sm_local/output/tensorboard`` for a plain ``python script.py`` run.

    Local mode writes each host's ``tensorboardoutputconfig.json`` pointing at its tree's ``output/tensorboard``.

    Args:
        environ: The environment (for ``TENSORBOARD_CONFIG_FILE_PATH``).
        output_dir: The job's output folder (``SM_OUTPUT_DIR``).
        explicit: The ``--tensorboard-dir`` hyperparameter, if given.

    Returns:
        The folder.

    Raises:
        EntryPointError: The configuration file exists but is not a JSON object with a string ``LocalPath``.
    """
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    config_file = Path(environ.get(contract.TENSORBOARD_CONFIG_FILE_PATH) or _OPT_ML / contract.TENSORBOARD_CONFIG_FILE)
    if config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EntryPointError(f"cannot read the TensorBoard configuration {str(config_file)!r}: {exc}; it should "
                                  'be {"LocalPath": "<folder>"} (or pass --tensorboard-dir DIR).') from exc
        local_path = config.get("LocalPath", contract.DEFAULT_TENSORBOARD_DIR) if isinstance(config, dict) else None
        if not isinstance(local_path, str) or not local_path:
            raise EntryPointError(f"the TensorBoard configuration {str(config_file)!r} holds {config!r}, not "
                                  '{"LocalPath": "<folder>"}; fix the file or pass --tensorboard-dir DIR.')
        return Path(local_path)
    return Path(output_dir) / Path(contract.TENSORBOARD_DIR).relative_to(contract.OUTPUT_DIR)


def add_tensorboard_dir_argument(parser: argparse.ArgumentParser) -> None:
    """Adds the ``--tensorboard-dir`` hyperparameter (see `resolve_tensorboard_dir`) to a script's parser."""
    parser.add_argument("--tensorboard-dir", default=None,
                        help="TensorBoard summaries (rank 0 / the chief); default: the job's "
                             "TensorBoardOutputConfig.LocalPath, else <output dir>/tensorboard "
                             f"({contract.DEFAULT_TENSORBOARD_DIR} on SageMaker)")


@dataclass(frozen=True)
class TrainingEnv:
    """Where a training script reads and writes, and which cluster it is part of.

    Attributes:
        model_dir: The final model goes here (rank 0 / chief only).
        output_data_dir: Extra outputs (plots, metrics, digests).
        output_dir: Holds the ``failure`` file.
        checkpoint_dir: Checkpoints are written to and resumed from here.
        channels: Data channels, lower-case name -> directory.
        hosts: Host names of the cluster, in SageMaker's order (algo-1, algo-2, ...).
        current_host: This host's name.
        host_addresses: Host name -> network address (from ``SMDDP_HOST_ADDRESSES``; a name maps to itself when
            absent, which is right on SageMaker where the names resolve).
        num_gpus: GPUs on this host.
        num_cpus: CPUs on this host.
        tensorboard_dir: TensorBoard summaries go here (rank 0 / the chief); ``None``: none are written.
    """

    model_dir: Path
    output_data_dir: Path
    output_dir: Path
    checkpoint_dir: Path
    channels: dict[str, Path] = field(default_factory=dict)
    hosts: tuple[str, ...] = ("algo-1",)
    current_host: str = "algo-1"
    host_addresses: dict[str, str] = field(default_factory=dict)
    num_gpus: int = 0
    num_cpus: int = 1
    tensorboard_dir: Path | None = None

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        tensorboard_dir: str | os.PathLike[str] | None = None,
    ) -> TrainingEnv:
        """Reads the SageMaker variables, with local fallbacks for the absent ones.

        Args:
            environ: The environment to read (default: ``os.environ``).
            checkpoint_dir: An explicit checkpoint directory (the ``--checkpoint-dir`` hyperparameter); ``None``
                means ``/opt/ml/checkpoints`` when it exists and is writable, else ``<output_dir>/checkpoints``.
            tensorboard_dir: An explicit TensorBoard folder (the ``--tensorboard-dir`` hyperparameter); ``None``
                means the job's ``TensorBoardOutputConfig.LocalPath``, else ``<output_dir>/tensorboard``
                (`resolve_tensorboard_dir`).

        Returns:
            The environment.

        Raises:
            smddp_compat.cluster.ClusterConfigError: ``SM_HOSTS`` / ``SMDDP_HOST_ADDRESSES`` are malformed, or the
                current host is not one of the hosts (read by :class:`smddp_compat.cluster.Cluster`, as by every
                launcher).
            ClusterConfigError: ``SM_NUM_GPUS`` / ``SM_NUM_CPUS`` are not integers.
            EntryPointError: The job's TensorBoard configuration file is malformed.
        """
        env = os.environ if environ is None else environ
        local = _local_root(env)

        def directory(variable: str, on_sagemaker: Path, local_default: Path) -> Path:
            if env.get(variable):
                return Path(env[variable])
            return on_sagemaker if _writable_dir(on_sagemaker) else local_default

        model_dir = directory(contract.SM_MODEL_DIR, _OPT_ML / contract.MODEL_DIR, local / contract.MODEL_DIR)
        output_dir = directory(contract.SM_OUTPUT_DIR, _OPT_ML / contract.OUTPUT_DIR, local / contract.OUTPUT_DIR)
        output_data_dir = (
            Path(env[contract.SM_OUTPUT_DATA_DIR]) if env.get(contract.SM_OUTPUT_DATA_DIR) else output_dir / "data"
        )
        if checkpoint_dir is not None and str(checkpoint_dir) != "":
            checkpoints = Path(checkpoint_dir)
        elif _writable_dir(Path(DEFAULT_CHECKPOINT_DIR)):
            checkpoints = Path(DEFAULT_CHECKPOINT_DIR)
        elif env.get(contract.SAGEMAKER_BASE_DIR) and _writable_dir(
            Path(env[contract.SAGEMAKER_BASE_DIR]) / contract.CHECKPOINTS_DIR
        ):
            # Local mode's per-host tree: its checkpoints/ is linked to the job's --checkpoint-dir when given.
            checkpoints = Path(env[contract.SAGEMAKER_BASE_DIR]) / contract.CHECKPOINTS_DIR
        else:
            checkpoints = output_dir / contract.CHECKPOINTS_DIR

        channels: dict[str, Path] = {}
        for key, value in env.items():
            if key.startswith(contract.SM_CHANNEL_PREFIX) and value:
                channels[key[len(contract.SM_CHANNEL_PREFIX):].lower()] = Path(value)

        cluster = Cluster.from_environ(env)

        def count(variable: str, default: int) -> int:
            raw = env.get(variable)
            try:
                return int(raw) if raw not in (None, "") else default
            except ValueError:
                raise ClusterConfigError(f"{variable}={raw!r} is not an integer.") from None

        return cls(
            model_dir=model_dir,
            output_data_dir=output_data_dir,
            output_dir=output_dir,
            checkpoint_dir=checkpoints,
            channels=channels,
            hosts=cluster.hosts,
            current_host=cluster.current_host,
            host_addresses=dict(cluster.addresses),
            num_gpus=count(contract.SM_NUM_GPUS, 0),
            num_cpus=count(contract.SM_NUM_CPUS, os.cpu_count() or 1),
            tensorboard_dir=resolve_tensorboard_dir(env, output_dir, tensorboard_dir),
        )

    @property
    def host_index(self) -> int:
        """Position of the current host in `hosts` (0 for the first, the "chief" host)."""
        return self.hosts.index(self.current_host)

    @property
    def is_multi_host(self) -> bool:
        """Whether the job spans more than one host."""
        return len(self.hosts) > 1

    @property
    def cluster(self) -> Cluster:
        """The hosts, this host and their addresses, as every launcher of the kit reads them."""
        return Cluster(self.hosts, self.current_host, self.host_addresses)

    def address_of(self, host: str) -> str:
        """Network address of `host`: its ``SMDDP_HOST_ADDRESSES`` entry, else the name itself."""
        return self.cluster.address_of(host)

    def channel(self, name: str) -> str | None:
        """Directory of data channel `name` (``SM_CHANNEL_<NAME>``), or ``None`` when the job has no such channel."""
        path = self.channels.get(name.lower())
        return None if path is None else str(path)

    def prepare_dirs(self, *, checkpoints: bool = True) -> None:
        """Creates the model, output, output-data, TensorBoard and (optionally) checkpoint directories.

        Call it on the process that writes them (rank 0 / the chief).

        Raises:
            EntryPointError: A directory cannot be created or is not writable.
        """
        targets = [("model", self.model_dir), ("output", self.output_dir), ("output data", self.output_data_dir)]
        if checkpoints:
            targets.append(("checkpoint", self.checkpoint_dir))
        if self.tensorboard_dir is not None:
            targets.append(("TensorBoard", self.tensorboard_dir))
        for what, path in targets:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise EntryPointError(f"cannot create the {what} directory {str(path)!r}: {exc.strerror}.") from exc
            if not os.access(path, os.W_OK | os.X_OK):
                hint = {"checkpoint": " (pass --checkpoint-dir DIR)",
                        "TensorBoard": " (pass --tensorboard-dir DIR)"}.get(what, "")
                raise EntryPointError(f"the {what} directory {str(path)!r} is not writable{hint}.")


# ---------------------------------------------------------------------------------------------------------------
# Hyperparameters


def boolean(text: str) -> bool:
    """argparse type for SageMaker booleans: true/false, True/False, 1/0, yes/no."""
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes", "y", "on"):
        return True
    if lowered in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean; use true or false")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (also accepts ``"3.0"``, as JSON numbers sometimes arrive)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 0")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def _integer(text: str) -> int:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    return int(number)


def _unquote(value: str) -> str:
    # The SageMaker SDK JSON-encodes hyperparameter values; strings may reach the script still quoted.
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value


_SDK_MODEL_DIR = ("--model_dir", "--model-dir")
_SDK_OPTION_PREFIXES = (f"--{contract.SAGEMAKER_PREFIX}", f"--{contract.SAGEMAKER_PREFIX.replace('_', '-')}")


def _normalise_argv(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    known = set(parser._option_string_actions)  # noqa: SLF001 - argparse offers no public accessor
    result: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and len(token) > 2:
            name, eq, inline = token.partition("=")
            sdk_owned = name.lower().startswith(_SDK_OPTION_PREFIXES) or name in _SDK_MODEL_DIR
            spellings = {name, name.replace("_", "-"), name.replace("-", "_")}
            if sdk_owned and not spellings & known:
                # SDK-internal hyperparameters (sagemaker_program, sagemaker_mpi_enabled, ...) are not the script's;
                # neither is the TensorFlow estimator's model_dir (an S3 path for scripts that save there: these
                # scripts save to SM_MODEL_DIR, which SageMaker uploads).
                if not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                    i += 1
                i += 1
                continue
            if name not in known:
                for spelling in (name.replace("_", "-"), name.replace("-", "_")):
                    if spelling in known:
                        name = spelling
                        break
            result.append(name)
            if eq:
                result.append(_unquote(inline))
        else:
            result.append(_unquote(token))
        i += 1
    return result


def parse_hyperparameters(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses SageMaker-style hyperparameters (``--name value``) with `parser`.

    Accepts ``--name value`` and ``--name=value``; ``snake_case`` and ``kebab-case`` names interchangeably;
    JSON-quoted strings (``"adam"``); drops the SDK's own ``--sagemaker_*`` entries and the TensorFlow
    estimator's ``--model_dir`` (unless the script defines it). Abbreviations are refused.
    Unlike plain argparse it never exits: every problem becomes a `HyperparameterError` naming the value and the accepted ones.

    Args:
        parser: The script's parser (options with defaults, so that no argument is required).
        argv: Arguments to parse (default: ``sys.argv[1:]``).

    Returns:
        The parsed namespace.

    Raises:
        HyperparameterError: An unknown hyperparameter, a malformed value or a value out of range.
    """
    tokens = _normalise_argv(parser, list(sys.argv[1:] if argv is None else argv))

    def fail(message: str) -> NoReturn:
        raise _parser_failure(message, tokens, parser.format_usage().strip())

    original_error, original_abbrev = parser.error, parser.allow_abbrev
    parser.error = fail  # type: ignore[method-assign]
    parser.allow_abbrev = False  # a misspelt hyperparameter must not silently match a longer one
    try:
        namespace, unknown = parser.parse_known_args(tokens)
    finally:
        parser.error = original_error  # type: ignore[method-assign]
        parser.allow_abbrev = original_abbrev
    if unknown:
        options = sorted(o for o in parser._option_string_actions if o.startswith("--") and o != "--help")  # noqa: SLF001
        raise HyperparameterError(
            "hyperparameters", unknown, "this script has no such hyperparameter", f"use the ones it accepts: {options}"
        )
    return namespace


_ARGPARSE_ARGUMENT = re.compile(r"^argument (?P<options>[^:]+): (?P<problem>.*)$", re.DOTALL)


def _parser_failure(message: str, tokens: Sequence[str], usage: str) -> HyperparameterError:
    """argparse's complaint as a `HyperparameterError` naming the hyperparameter (``argument --x: ...``) and its value."""
    fix = f"pass values this script accepts ({usage})"
    match = _ARGPARSE_ARGUMENT.match(message)
    if match is None:
        return HyperparameterError("hyperparameters", list(tokens), message, fix)
    spellings = match["options"].split("/")
    given = [tokens[i + 1] for i, token in enumerate(tokens[:-1]) if token in spellings]
    return HyperparameterError(spellings[0], given[-1] if given else None, match["problem"], fix)


# ---------------------------------------------------------------------------------------------------------------
# Metrics

_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|nan|inf|-inf"
_PAIR = re.compile(r"(?:^|(?<=\s)|(?<=;))([A-Za-z_][A-Za-z0-9_]*)=(" + _NUMBER + r"|[^;\s]*);")


def metric_regex(name: str) -> str:
    """The regular expression (one capture group) that picks metric `name` out of a log line.

    ``loss`` does not match ``test_loss=``. Suitable for SageMaker ``metric_definitions``.
    """
    return r"(?:^|[^A-Za-z0-9_])" + re.escape(name) + r"=(" + _NUMBER + r");"


def metric_definitions(names: Sequence[str]) -> list[dict[str, str]]:
    """``[{"Name": name, "Regex": metric_regex(name)}, ...]`` for an estimator's ``metric_definitions``."""
    return [{"Name": name, "Regex": metric_regex(name)} for name in names]


def parse_metric_line(line: str) -> dict[str, str]:
    """Parses a ``name=value; name=value;`` line into a dict of strings (empty when the line holds none)."""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line.strip())}


def _format_value(value: object) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) or hasattr(value, "__float__"):
        number = float(value)  # type: ignore[arg-type]
        if not math.isfinite(number):
            return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
        if number != 0.0 and abs(number) < 1e-4:
            return f"{number:.4e}"
        return f"{number:.4f}"
    text = str(value)
    if re.search(r"[;\s=]", text):
        raise ValueError(f"metric value {text!r} contains ';', '=' or whitespace")
    return text


class MetricLogger:
    """Prints metrics as stable ``name=value;`` lines, plus a progress bar when the stream is a terminal.

    Lines look like ``epoch=1; step=120; loss=0.3100; accuracy=0.9100;`` (floats with 4 decimals), so that
    `metric_regex` / SageMaker ``metric_definitions`` can read them. A disabled logger (ranks other than 0)
    prints nothing.

    Args:
        enabled: Print anything at all.
        stream: Where to print (default: ``sys.stdout`` at call time).
    """

    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self._stream = stream
        self._bar_shown = False

    @property
    def stream(self) -> TextIO:
        """The output stream."""
        return self._stream if self._stream is not None else sys.stdout

    def _is_tty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def log(self, **metrics: object) -> str:
        """Prints one metrics line (in argument order) and returns it.

        Args:
            **metrics: name=value pairs; ints print as ints, floats (and numpy/TF scalars) with 4 decimals.

        Returns:
            The line, without the newline (also when the logger is disabled).
        """
        line = " ".join(f"{name}={_format_value(value)};" for name, value in metrics.items())
        if self.enabled:
            if self._bar_shown:
                self.stream.write("\r\033[K")
                self._bar_shown = False
            self.stream.write(line + "\n")
            self.stream.flush()
        return line

    def progress(self, current: int, total: int, **metrics: object) -> None:
        """Redraws a one-line progress bar, only when attached to a terminal (never in logs)."""
        if not self.enabled or not self._is_tty() or total <= 0:
            return
        width = 30
        done = min(width, int(width * current / total))
        extra = " ".join(f"{k}={_format_value(v)}" for k, v in metrics.items())
        self.stream.write(f"\r[{'=' * done}{' ' * (width - done)}] {current}/{total} {extra}\033[K")
        self.stream.flush()
        self._bar_shown = True


# ---------------------------------------------------------------------------------------------------------------
# Lifecycle: SIGTERM flag and the failure file

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
    except (EntryPointError, ClusterDescriptionError):
        fallback = os.environ.get(contract.SM_OUTPUT_DIR)
        return Path(fallback) if fallback else _local_root(os.environ) / contract.OUTPUT_DIR


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

    Installs the SIGTERM handler, calls `main()`, and exits with its return value (``None`` -> 0). On any
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
    sys.stdout.flush()
    sys.exit(0 if code is None else int(code))
