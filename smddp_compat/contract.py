"""The names of SageMaker's training-container contract and how values are written into it: one place for all of them.

A training container finds its job in the ``/opt/ml`` tree, in environment variables (``SM_*``, from the training
toolkit, and a few from the platform) and in hyperparameters, among which the SDK and the toolkit pass their own
``sagemaker_*`` settings. Every module of the kit that reads or writes one of these names takes it from here and
writes values with the encoders below: naming rules, the tree, the variables, the hyperparameters, their encoders
and the failure file, each a section below (and a group of ``__all__``). Standard library only: entry points and
container drivers import it without TensorFlow or any third-party package.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smddp_compat.errors import ConfigurationError
from smddp_compat.job_files import UnsafeJobFileError, read_job_file

__all__ = [
    # SageMaker's names
    "LOCAL_ACCOUNT", "training_job_arn", "JOB_NAME_PATTERN", "job_name_problem", "channel_name_problem",
    "hyperparameter_name_problem",
    # the /opt/ml tree
    "OPT_ML", "INPUT_DIR", "INPUT_CONFIG_DIR", "INPUT_DATA_DIR", "HYPERPARAMETERS_FILE", "RESOURCE_CONFIG_FILE",
    "INPUT_DATA_CONFIG_FILE", "CODE_DIR", "MODEL_DIR", "OUTPUT_DIR", "OUTPUT_DATA_DIR", "OUTPUT_INTERMEDIATE_DIR",
    "FAILURE_FILE", "CHECKPOINTS_DIR", "DEFAULT_CHECKPOINT_DIR", "TENSORBOARD_DIR", "DEFAULT_TENSORBOARD_DIR",
    "TENSORBOARD_CONFIG_FILE", "TENSORBOARD_CONFIG_FILE_PATH",
    # environment variables
    "SM_PREFIX", "SM_MODEL_DIR", "SM_OUTPUT_DIR", "SM_OUTPUT_DATA_DIR", "SM_CHANNEL_PREFIX", "SM_HOSTS",
    "SM_CURRENT_HOST", "SM_NUM_CPUS", "SM_NUM_GPUS", "SM_HPS", "SM_DISTRIBUTED_CONFIG", "SM_ENTRY_SCRIPT",
    "TRAINING_JOB_NAME", "SAGEMAKER_JOB_NAME", "CURRENT_HOST", "SAGEMAKER_REGION", "SAGEMAKER_BASE_DIR",
    "SAGEMAKER_TRAINING_MODULE", "TENSORFLOW_TRAINING_MODULE", "sm_variable", "module_name",
    "naming_the_entry_point",
    # hyperparameters
    "SAGEMAKER_PREFIX", "PROGRAM", "SUBMIT_DIRECTORY", "ENABLE_CLOUDWATCH_METRICS", "REGION", "CONTAINER_LOG_LEVEL",
    "JOB_NAME", "DEFAULT_USER_MODULE_NAME", "TUNING_OBJECTIVE_METRIC", "S3_OUTPUT", "TOOLKIT_PARAMETERS",
    "split_toolkit_parameters", "MODEL_DIR_HYPERPARAMETER", "CONTAINER_MODEL_DIR", "model_dir_problem", "MPI_ENABLED",
    "MPI_PROCESSES_PER_HOST", "MPI_NUM_PROCESSES", "MPI_CUSTOM_OPTIONS", "SMDDP_ENABLED", "SMDDP_CUSTOM_MPI_OPTIONS",
    "MWMS_ENABLED", "PARAMETER_SERVER_ENABLED", "PYTORCH_DDP_ENABLED", "PYTORCH_XLA_MULTI_WORKER_ENABLED",
    "DISTRIBUTION_FLAGS", "DISTRIBUTION_INSTANCE_GROUPS", "INSTANCE_TYPE", "HYPERPARAMETER_VALUE_LIMIT",
    # encoders
    "env_value", "encode_hyperparameter", "encode_hyperparameters", "cmd_args", "driver_args", "ARGUMENT_RULES",
    # the failure file
    "FAILURE_REASON_LIMIT", "failure_file", "truncate_failure_reason", "write_atomically", "write_failure_file",
    "read_failure_reason",
]

# --- the /opt/ml tree ------------------------------------------------------------------------------------------------

OPT_ML = "/opt/ml"
"""Root of the tree in a SageMaker training container (the toolkit lets ``SAGEMAKER_BASE_DIR`` move it)."""

# Paths relative to the root, so that a local host's tree (any root) and the container's use the same names.
INPUT_DIR = "input"
INPUT_CONFIG_DIR = "input/config"
INPUT_DATA_DIR = "input/data"
"""Holds one folder per data channel: ``input/data/<channel>``."""
HYPERPARAMETERS_FILE = "input/config/hyperparameters.json"
"""Every hyperparameter, its value JSON-encoded (see :func:`encode_hyperparameters`)."""
RESOURCE_CONFIG_FILE = "input/config/resourceconfig.json"
"""``current_host``, ``hosts``, the instance groups and the network interface."""
INPUT_DATA_CONFIG_FILE = "input/config/inputdataconfig.json"
"""One entry per data channel."""
CODE_DIR = "code"
MODEL_DIR = "model"
"""Uploaded as ``model.tar.gz``."""
OUTPUT_DIR = "output"
OUTPUT_DATA_DIR = "output/data"
"""Uploaded as ``output.tar.gz``."""
OUTPUT_INTERMEDIATE_DIR = "output/intermediate"
FAILURE_FILE = "output/failure"
"""What the script writes when it fails; SageMaker reports its start as the job's ``FailureReason``."""
CHECKPOINTS_DIR = "checkpoints"
DEFAULT_CHECKPOINT_DIR = f"{OPT_ML}/{CHECKPOINTS_DIR}"
"""``CheckpointConfig.LocalPath`` when the request leaves it out."""
TENSORBOARD_DIR = "output/tensorboard"
DEFAULT_TENSORBOARD_DIR = f"{OPT_ML}/{TENSORBOARD_DIR}"
"""``TensorBoardOutputConfig.LocalPath`` when the request leaves it out (API reference: "Defaults to
/opt/ml/output/tensorboard"); SageMaker syncs that folder to ``TensorBoardOutputConfig.S3OutputPath``."""
TENSORBOARD_CONFIG_FILE = "input/config/tensorboardoutputconfig.json"
"""The job's ``TensorBoardOutputConfig`` as the container sees it (``{"LocalPath": ...}``; a missing file means the
job has none). The training toolkit sets no ``SM_*`` variable for it and the SDK no hyperparameter; AWS's SageMaker
Debugger reads the folder from this file (``smdebug.core.config_constants``:
``DEFAULT_SAGEMAKER_TENSORBOARD_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"``, read by
``get_tensorboard_dir_from_json_config``, key ``LocalPath``)."""
TENSORBOARD_CONFIG_FILE_PATH = "TENSORBOARD_CONFIG_FILE_PATH"
"""SageMaker Debugger's override of :data:`TENSORBOARD_CONFIG_FILE`'s location (its
``TENSORBOARD_CONFIG_FILE_PATH_ENV_STR``): a tree that is not at ``/opt/ml`` (local mode's hosts) points it here."""

# --- environment variables -------------------------------------------------------------------------------------------

SM_PREFIX = "SM_"
"""The toolkit's variables: ``SM_`` + the upper-cased key of its environment (see :func:`sm_variable`)."""
SM_MODEL_DIR = "SM_MODEL_DIR"
SM_OUTPUT_DIR = "SM_OUTPUT_DIR"
SM_OUTPUT_DATA_DIR = "SM_OUTPUT_DATA_DIR"
SM_CHANNEL_PREFIX = "SM_CHANNEL_"
"""``SM_CHANNEL_<NAME>``: the folder of data channel ``name``."""
SM_HOSTS = "SM_HOSTS"
SM_CURRENT_HOST = "SM_CURRENT_HOST"
SM_NUM_CPUS = "SM_NUM_CPUS"
SM_NUM_GPUS = "SM_NUM_GPUS"
SM_HPS = "SM_HPS"
"""The user's hyperparameters as one JSON object."""
SM_DISTRIBUTED_CONFIG = "SM_DISTRIBUTED_CONFIG"
"""SDK v3's drivers: the distributed configuration's fields as JSON."""
SM_ENTRY_SCRIPT = "SM_ENTRY_SCRIPT"
"""SDK v3's drivers: the user's script, which the driver starts."""

# Set by the platform (not the toolkit) in a training container.
TRAINING_JOB_NAME = "TRAINING_JOB_NAME"
SAGEMAKER_JOB_NAME = "SAGEMAKER_JOB_NAME"
CURRENT_HOST = "CURRENT_HOST"
SAGEMAKER_REGION = "SAGEMAKER_REGION"
SAGEMAKER_BASE_DIR = "SAGEMAKER_BASE_DIR"
"""The toolkit's override of :data:`OPT_ML`."""
SAGEMAKER_TRAINING_MODULE = "SAGEMAKER_TRAINING_MODULE"
"""The framework module whose ``main`` the toolkit's ``train`` runs (the image sets it)."""
TENSORFLOW_TRAINING_MODULE = "sagemaker_tensorflow_container.training:main"
""":data:`SAGEMAKER_TRAINING_MODULE` in AWS's TensorFlow images and the kit's: the toolkit exports it to the script as
``SM_FRAMEWORK_MODULE``."""


def sm_variable(key: str) -> str:
    """The toolkit's variable for one key of its environment (``model_dir``, ``channel_train``,
    ``hp_learning_rate``...): ``SM_`` + the upper-cased key, e.g. ``SM_MODEL_DIR``."""
    return SM_PREFIX + key.upper()


def module_name(entry_point: str) -> str:
    """The toolkit's ``module_name`` of an entry point (``SM_MODULE_NAME``): its name less ``.py``
    (``train.py`` -> ``train``; ``run.sh`` stays ``run.sh``)."""
    return entry_point[:-3] if entry_point.endswith(".py") else entry_point


def naming_the_entry_point(environ: Mapping[str, str], entry_point: str) -> dict[str, str]:
    """The toolkit's variables that name the script it started (``SM_USER_ENTRY_POINT``, ``SM_MODULE_NAME``, and
    both inside ``SM_TRAINING_ENV``), rewritten to name ``entry_point``: what a script started by a launcher the kit
    ships in its place (a job driver) would have seen had the toolkit started it directly. Only the variables
    present in ``environ`` are returned."""
    names = {"user_entry_point": entry_point, "module_name": module_name(entry_point)}
    out = {sm_variable(key): value for key, value in names.items() if sm_variable(key) in environ}
    training_env = environ.get(sm_variable("training_env"))
    if training_env:
        try:
            properties = json.loads(training_env)
        except ValueError:  # not the toolkit's JSON: left as it is
            return out
        if isinstance(properties, dict):
            out[sm_variable("training_env")] = env_value({**properties, **names})
    return out


# --- hyperparameters -------------------------------------------------------------------------------------------------

SAGEMAKER_PREFIX = "sagemaker_"
"""Hyperparameter names of the SDK and the toolkit; a user's hyperparameter may not start with it."""
PROGRAM = "sagemaker_program"
"""The entry point, relative to the code folder."""
SUBMIT_DIRECTORY = "sagemaker_submit_directory"
"""Where the source comes from (an ``s3://`` tarball, or a local folder)."""
ENABLE_CLOUDWATCH_METRICS = "sagemaker_enable_cloudwatch_metrics"
REGION = "sagemaker_region"
CONTAINER_LOG_LEVEL = "sagemaker_container_log_level"
JOB_NAME = "sagemaker_job_name"
DEFAULT_USER_MODULE_NAME = "default_user_module_name"
TUNING_OBJECTIVE_METRIC = "_tuning_objective_metric"
S3_OUTPUT = "sagemaker_s3_output"

TOOLKIT_PARAMETERS = frozenset(
    {
        PROGRAM,
        SUBMIT_DIRECTORY,
        ENABLE_CLOUDWATCH_METRICS,
        REGION,
        CONTAINER_LOG_LEVEL,
        JOB_NAME,
        DEFAULT_USER_MODULE_NAME,
        TUNING_OBJECTIVE_METRIC,
        S3_OUTPUT,
    }
)
"""Hyperparameters the toolkit consumes itself: in neither ``SM_HPS`` nor ``SM_FRAMEWORK_PARAMS``."""


def split_toolkit_parameters(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``values`` (a job's hyperparameters) as (what the script gets: its arguments and ``SM_HPS``, what only the
    toolkit reads: :data:`TOOLKIT_PARAMETERS`, e.g. a tuning trial's ``_tuning_objective_metric``)."""
    script = {name: value for name, value in values.items() if name not in TOOLKIT_PARAMETERS}
    return script, {name: value for name, value in values.items() if name in TOOLKIT_PARAMETERS}

MODEL_DIR_HYPERPARAMETER = "model_dir"
"""The hyperparameter SageMaker's TensorFlow estimator adds to every job (``--model_dir`` for the script) unless
``model_dir=False``."""
CONTAINER_MODEL_DIR = f"{OPT_ML}/{MODEL_DIR}"
"""The ``model_dir`` the kit's jobs give a script unless told otherwise: the host's model folder, uploaded as
``model.tar.gz`` (the SDK's own value for MPI jobs). The SDK's ``s3://`` default for the other distributions is no
place for the kit's scripts: TensorFlow 2.21 has no S3 file system, in the kit's image or on this machine."""


def model_dir_problem(value: str) -> str | None:
    """Why ``value`` cannot be a job's ``model_dir`` as the kit's commands take it (a folder of the container's tree,
    an absolute path under ``/opt/ml`` without ``..``, which each local host has in its own tree), or None."""
    if value.startswith("s3://"):
        return ("TensorFlow 2.21 has no S3 file system (in the kit's image or here): a script saving there fails; "
                "SageMaker uploads the model folder as model.tar.gz")
    if not value.startswith(OPT_ML + "/") or ".." in value.split("/") or "\0" in value:
        return f"must be a folder of the container's tree, an absolute path under {OPT_ML}/ without '..'"
    return None


MPI_ENABLED = "sagemaker_mpi_enabled"
MPI_PROCESSES_PER_HOST = "sagemaker_mpi_num_of_processes_per_host"
MPI_NUM_PROCESSES = "sagemaker_mpi_num_processes"
MPI_CUSTOM_OPTIONS = "sagemaker_mpi_custom_mpi_options"
SMDDP_ENABLED = "sagemaker_distributed_dataparallel_enabled"
SMDDP_CUSTOM_MPI_OPTIONS = "sagemaker_distributed_dataparallel_custom_mpi_options"
MWMS_ENABLED = "sagemaker_multi_worker_mirrored_strategy_enabled"
PARAMETER_SERVER_ENABLED = "sagemaker_parameter_server_enabled"
PYTORCH_DDP_ENABLED = "sagemaker_pytorch_ddp_enabled"
PYTORCH_XLA_MULTI_WORKER_ENABLED = "sagemaker_pytorch_xla_multi_worker_enabled"
DISTRIBUTION_INSTANCE_GROUPS = "sagemaker_distribution_instance_groups"
INSTANCE_TYPE = "sagemaker_instance_type"
"""The SDK's instance type, sent with SMDDP (whose launcher checks it)."""

DISTRIBUTION_FLAGS = (
    MPI_ENABLED,
    PARAMETER_SERVER_ENABLED,
    SMDDP_ENABLED,
    PYTORCH_DDP_ENABLED,
    PYTORCH_XLA_MULTI_WORKER_ENABLED,
    MWMS_ENABLED,
)
"""Framework parameters that put the instance group among the toolkit's distribution groups."""

HYPERPARAMETER_VALUE_LIMIT = 2500
"""SageMaker's limit on one hyperparameter's value (characters of its JSON text)."""

# --- encoders --------------------------------------------------------------------------------------------------------


def env_value(value: Any) -> str:
    """One JSON-serialisable value (or bytes) as the toolkit writes it into an ``SM_*`` variable: a string unchanged,
    bytes as Latin-1 text, ``""`` for None, else compact JSON with sorted keys."""
    if isinstance(value, bytes):
        return value.decode("latin1")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def encode_hyperparameter(name: str, value: Any) -> str:
    """The JSON text SageMaker stores for one hyperparameter in ``hyperparameters.json``: ``json.dumps(value)``.

    Raises:
        ConfigurationError: ``value`` is not JSON-serialisable (NaN and infinity included) or longer than
            :data:`HYPERPARAMETER_VALUE_LIMIT`.
    """
    field = f"hyperparameters[{name!r}]"
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            field, value, f"is not JSON-serialisable ({exc})",
            "pass a string, number, boolean, None, or a list/dict of those",
        ) from None
    if len(text) > HYPERPARAMETER_VALUE_LIMIT:
        raise ConfigurationError(
            field, f"{text[:40]}... ({len(text)} characters)",
            f"is longer than SageMaker's limit of {HYPERPARAMETER_VALUE_LIMIT} characters",
            "pass large inputs through a channel instead of a hyperparameter",
        )
    return text


#: The account a job run on this machine names in its ARN (no AWS account runs it).
LOCAL_ACCOUNT = "000000000000"


def training_job_arn(region: str, job_name: str, account: str = LOCAL_ACCOUNT) -> str:
    """A training job's ARN as SageMaker forms it: ``arn:aws:sagemaker:<region>:<account>:training-job/<name>``, the
    name in lower case."""
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{job_name.lower()}"


#: SageMaker's rule for training job names (CreateTrainingJob's ``TrainingJobName``), which every entry applies.
JOB_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_JOB_NAME_RULE = "1 to 63 letters, digits and '-', starting and ending with a letter or digit (SageMaker's rule)"


def job_name_problem(name: object) -> tuple[str, str] | None:
    """What is wrong with a training job name by SageMaker's rule, as ``(problem, fix)`` for
    the kit's :class:`~smddp_compat.errors.ConfigurationError`; None for a valid name.

    ``_``, ``.``, ``/``, ``..``, a leading or trailing ``-`` and more than 63 characters are refused, so a valid name
    is safe as a path segment and an S3 key part."""
    if isinstance(name, str) and JOB_NAME_PATTERN.match(name):
        return None
    return f"is not a training job name: {_JOB_NAME_RULE}", "use e.g. my-job-1 (replace '_' and '.' with '-')"


_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HYPERPARAMETER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,255}$")


def channel_name_problem(name: object) -> str | None:
    """What is wrong with a channel name, or None when SageMaker and the job's tree both accept it.

    SageMaker's pattern (1-64 letters, digits, '.', '-', '_') lets ``.`` and ``..`` through, but the channel becomes
    the folder ``input/data/<name>``: those two would name ``input/data`` itself or ``input`` (and, in local mode,
    the job's staging folders), so they are refused too. The problem is worded for
    :class:`~smddp_compat.errors.ConfigurationError`.
    """
    if not isinstance(name, str) or not _CHANNEL_NAME.match(name):
        return "is not a valid channel name"
    if name in (".", ".."):
        return f"names no folder of its own: input/data/{name} is {'input/data' if name == '.' else 'input'} itself"
    return None


def hyperparameter_name_problem(name: object) -> tuple[str, str] | None:
    """What is wrong with a hyperparameter's name for a job the kit runs, as ``(problem, fix)``; None when it is
    usable. The name becomes the script's ``--NAME`` argument and ``SM_HP_NAME``: letters, digits, ``_``, ``-`` and
    ``.`` (at most 256), not starting with ``sagemaker_`` (the framework's own hyperparameters)."""
    if not isinstance(name, str) or not _HYPERPARAMETER_NAME.match(name):
        return ("is not a usable hyperparameter name (it becomes the --NAME argument and SM_HP_NAME)",
                "use letters, digits, '_', '-', '.' (no spaces or '='), e.g. learning_rate")
    if name.lower().startswith(SAGEMAKER_PREFIX):
        return ("names starting with 'sagemaker_' are reserved for the framework (the SageMaker SDK and local_mode set "
                "them)", "rename the hyperparameter")
    return None


def encode_hyperparameters(values: Mapping[str, Any]) -> dict[str, str]:
    """``hyperparameters.json`` content: every decoded value JSON-encoded, by name, as the SageMaker SDK sends them."""
    return {name: json.dumps(value) for name, value in values.items()}


def _argument_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{key}={item}" for key, item in sorted(value.items()))
    if value is None:
        return ""
    return str(value)


def cmd_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """The script's arguments for its hyperparameters: sagemaker-training's rule (``mapping.to_cmd_args``), which
    the training toolkit applies before it runs a script (the process backend applies it too).

    Returns:
        ``["--name", "value", ...]`` sorted by name; a one-letter name becomes ``-n``; a decoded value is ``str()``
        of it (strings bare, ``True`` as ``True``), a dict ``k=v,k2=v2``, None an empty string.
    """
    args: list[str] = []
    for name in sorted(hyperparameters):
        args.append(f"--{name}" if len(name) > 1 else f"-{name}")
        args.append(_argument_text(hyperparameters[name]))
    return args


def driver_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """The script's arguments for its hyperparameters: SDK v3's rule (its drivers pass SM_HPS on as ``--name value``),
    which the kit's v3 job drivers apply and the process backend applies to a ``ModelTrainer``'s job.

    Returns:
        ``["--name", "value", ...]`` in the hyperparameters' order; a string as it is, any other value as JSON
        (``true``, ``3``, ``{"a": 1}``).
    """
    args: list[str] = []
    for name, value in hyperparameters.items():
        args += [f"--{name}", value if isinstance(value, str) else json.dumps(value)]
    return args


ARGUMENT_RULES = {"sagemaker-training": cmd_args, "sdk-v3-driver": driver_args}
"""How a job's hyperparameters become its script's arguments, by the upstream whose rule it is: the training toolkit
(SageMaker's TensorFlow containers, SDK v2 jobs) or SDK v3's drivers (``ModelTrainer`` jobs)."""


# --- the failure file ------------------------------------------------------------------------------------------------

FAILURE_REASON_LIMIT = 1024
"""SageMaker's limit on a job's ``FailureReason`` (characters): a longer failure file is cut."""


def failure_file(output_dir: str | os.PathLike[str]) -> Path:
    """The failure file ``<output_dir>/failure`` of a host's ``output`` folder (``SM_OUTPUT_DIR``)."""
    return Path(output_dir) / Path(FAILURE_FILE).name


def truncate_failure_reason(text: str) -> str:
    """A failure reason of any length as SageMaker would report it: cut to :data:`FAILURE_REASON_LIMIT` characters,
    ending in ``...`` when it was cut."""
    if len(text) <= FAILURE_REASON_LIMIT:
        return text
    return text[: FAILURE_REASON_LIMIT - 3] + "..."


def write_atomically(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    """Replaces the file ``path`` with ``text`` in one step: readers see the old content or the new, never a part.

    The text goes to a temporary file in the same folder (so the final rename stays on one file system), is
    flushed to disk (when ``durable``), and then renamed over ``path``. If the process dies before the rename,
    ``path`` is unchanged and the temporary file is removed when possible.

    Args:
        durable: ``fsync`` the UTF-8 content before the rename, so that it survives a crash of the machine too (a status
            file rewritten every second can skip it).

    Raises:
        OSError: The file could not be written (``path`` is unchanged).
    """
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_failure_file(output_dir: str | os.PathLike[str], reason: str) -> Path:
    """Writes ``reason`` to ``<output_dir>/failure`` with :func:`write_atomically` (durable): a reader sees the
    previous file (or none) or the whole new reason, and a process killed half-way leaves the previous file as it
    was. The whole reason is kept (people read the file); whoever reports it applies :data:`FAILURE_REASON_LIMIT`
    (:func:`read_failure_reason`).

    ``output_dir`` is created if missing; a final newline is added to ``reason`` when missing. Returns the file.

    Raises:
        OSError: The folder or the file could not be written (the previous file, if any, is unchanged).
    """
    path = failure_file(output_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, reason if reason.endswith("\n") else reason + "\n")
    return path


def read_failure_reason(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> str | None:
    """The failure reason a process recorded, as SageMaker reports it (stripped, cut to the limit).

    The file is the job's data, never a path to follow: it is read only when it is a regular file inside ``root``
    (no link followed, a FIFO refused without blocking, at most a few times the limit read). A failure file that
    is a link, a FIFO, a device or a socket gives a reason saying so instead of its target's content.

    ``root`` (default: the file's own folder) is the job's tree, e.g. the host's ``/opt/ml``. Returns None when the
    file is missing, unreadable or blank.
    """
    try:
        # 4 bytes per character at most in UTF-8, and room for leading blanks: enough to fill the limit.
        data = read_job_file(path, root if root is not None else Path(path).parent, limit=8 * FAILURE_REASON_LIMIT)
    except UnsafeJobFileError as exc:
        return truncate_failure_reason(f"(its failure file {os.fspath(path)} {exc.problem})")
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace").strip()
    if len(data) == 8 * FAILURE_REASON_LIMIT and len(text) <= FAILURE_REASON_LIMIT:
        text += "..."  # the file went on: say it was cut even when its start was mostly blank
    return truncate_failure_reason(text) or None
