"""The options that describe a training job, defined once for ``smddp local`` and ``smddp submit``: the same
option names, metavars, help and forms.

The ``NAME=VALUE`` options take one or more words and may be given again (``--channel a=x b=y`` is
``--channel a=x --channel b=y``); a word without ``=`` after them (an entry point, say) is refused by
:func:`smddp_compat.local_mode.name_values.parse_name_values` with the fix. Numbers are read by the launcher's types (NaN and
infinity refused by argparse); their ranges are checked by the model each value goes to (``JobSpec``, the
estimator, :mod:`smddp_compat.distribution_config`), in the same words for the command line and the Python API.
Standard library and the kit's own standard-library modules only.
"""

from __future__ import annotations

import argparse

from typing import Any

from smddp_compat import contract
from smddp_compat.errors import ConfigurationError
from smddp_compat.launcher import finite_seconds, whole_number
from smddp_compat.local_mode.name_values import decode_value, parse_name_values
from smddp_compat.local_mode.tracking import MlflowSettings
from smddp_compat.strategies import NAMES

__all__ = ["add_job_options", "JOB_OPTIONS_TITLE", "model_dir_option", "NO_MODEL_DIR", "hyperparameters_from_args",
           "add_tracking_options", "tracking_from_args", "sagemaker_tracking_from_args"]

NO_MODEL_DIR = "none"
"""``--model-dir none``: the script gets no ``--model_dir`` (the estimator's ``model_dir=False``)."""


def model_dir_option(text: str) -> str | bool:
    """``--model-dir``'s value: a folder of the container's tree (see :func:`smddp_compat.contract.model_dir_problem`),
    or False for ``none``."""
    if text == NO_MODEL_DIR:
        return False
    problem = contract.model_dir_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {problem}. Fix: a folder under {contract.OPT_ML}/ (default {contract.CONTAINER_MODEL_DIR}), "
            f"or {NO_MODEL_DIR} for no --model_dir")
    return text

#: The title of the group the job options are listed under in both commands' help.
JOB_OPTIONS_TITLE = "the job (the same options in smddp local and smddp submit)"


def add_job_options(
    parser: argparse.ArgumentParser,
    *,
    entry_point_help: str,
    instance_count_default: str,
    processes_per_host_default: str,
    distribution_default: str,
    output_help: str,
    output_default: str | None = None,
    max_run_help: str,
    max_run_default: float | None = None,
) -> argparse._ArgumentGroup:
    """Adds the job's options to ``parser``, in a group of their own.

    ENTRY_POINT is optional to argparse in both commands (``smddp local`` runs its demo without one; ``smddp submit``
    refuses its absence itself, after a misplaced script name after a ``NAME=VALUE`` option is named as such).

    The ``*_help`` texts say what ENTRY_POINT, ``--output`` and ``--max-run`` are in this command; ``output_default``
    and ``max_run_default`` are those options' defaults; the three other ``*_default`` texts only state a default in
    the help (the value stays None when the option is not given).
    Returns the group, for a command that adds options of its own to it.
    """
    group = parser.add_argument_group(JOB_OPTIONS_TITLE)
    group.add_argument("entry_point", nargs="?", metavar="ENTRY_POINT", help=entry_point_help)
    group.add_argument("--source-dir", metavar="DIR",
                       help="folder sent as the job's code (holds ENTRY_POINT, which is then relative to it)")
    group.add_argument("--instance-count", type=whole_number, metavar="H",
                       help=f"number of hosts (instances) (default: {instance_count_default})")
    group.add_argument("--processes-per-host", type=whole_number, metavar="P",
                       help=f"processes per host (default: {processes_per_host_default})")
    group.add_argument("--distribution", metavar="KIND",
                       help=f"one of {', '.join(NAMES)} (default: {distribution_default})")
    group.add_argument("--hyperparameters", "--hp", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                       help="hyperparameters, passed to the script as --NAME VALUE; values that parse as JSON are "
                       "JSON (epochs=3 is the number 3), others text (repeatable)")
    group.add_argument("--channel", nargs="+", action="extend", default=[], metavar="NAME=PATH|s3://...",
                       help="an input channel from a local folder or file or an s3:// prefix; the script reads it "
                       "under SM_CHANNEL_<NAME> (repeatable)")
    group.add_argument("--output", default=output_default, metavar="DIR|s3://...", help=output_help)
    group.add_argument("--max-run", type=finite_seconds, default=max_run_default, metavar="SECONDS",
                       help=max_run_help)
    group.add_argument("--model-dir", type=model_dir_option, default=contract.CONTAINER_MODEL_DIR,
                       metavar=f"PATH|{NO_MODEL_DIR}",
                       help="the script's --model_dir, as the TensorFlow estimator's model_dir: a folder under "
                       f"{contract.OPT_ML}/ (each host's own), or {NO_MODEL_DIR} for none (default: "
                       f"{contract.CONTAINER_MODEL_DIR}, the host's model folder, uploaded as model.tar.gz)")
    group.add_argument("--job-name", metavar="NAME",
                       help="the job's name (default: the script's name and a timestamp)")
    group.add_argument("--mesh", nargs="+", metavar="DIM=SIZE,...",
                       help="dtensor: the global mesh, e.g. batch=4,model=2 (default: one batch dimension over "
                       "every device)")
    group.add_argument("--devices-per-process", type=whole_number, metavar="N",
                       help="dtensor: devices per client (default: GPUs / processes per host; on CPU, mesh / clients)")
    return group


def hyperparameters_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--hyperparameters`` decoded, with ``--model-dir`` as ``model_dir`` (none for ``--model-dir none``), as the
    TensorFlow estimator adds its ``model_dir`` to the script's hyperparameters.

    Raises:
        ConfigurationError: ``--hyperparameters`` names ``model_dir`` (the option sets it).
    """
    texts = parse_name_values(args.hyperparameters, "--hyperparameters")
    name = contract.MODEL_DIR_HYPERPARAMETER
    if name in texts:
        raise ConfigurationError("--hyperparameters", f"{name}={texts[name]}", "is the job's model folder, which "
                                 "--model-dir sets (as the TensorFlow estimator's model_dir does)",
                                 f"pass --model-dir {texts[name]} (or --model-dir none for no --model_dir)")
    hyperparameters = {key: decode_value(text) for key, text in texts.items()}
    if args.model_dir:
        hyperparameters[name] = args.model_dir
    return hyperparameters


_TRACKING_COMPANIONS = ("mlflow_experiment", "mlflow_run_name", "mlflow_optional")


def add_tracking_options(group: argparse._ArgumentGroup, *, what: str, sagemaker: bool = False) -> None:
    """``--mlflow`` and its companions, as ``smddp local``, ``smddp tune`` and ``smddp submit`` take them (``what``:
    what is tracked; ``sagemaker``: the job may run on SageMaker, where ``--mlflow`` names SageMaker's MLflow)."""
    on_sagemaker = (" On SageMaker (smddp submit): the ARN of a SageMaker MLflow app or tracking server, sent as the "
                    "request's MlflowConfig" if sagemaker else "")
    group.add_argument("--mlflow", metavar="ARN" if sagemaker else "URI",
                       help=f"track in MLflow: {what} (its hyperparameters, metric series, status; the script gets "
                       "MLFLOW_TRACKING_URI and MLFLOW_RUN_ID), at a tracking server (http://HOST:PORT) or a local "
                       f"store (sqlite:///ABS/PATH.db).{on_sagemaker}")
    group.add_argument("--mlflow-experiment", metavar="NAME",
                       help="the MLflow experiment (made when missing; default: a replayed request's "
                       "MlflowExperimentName, else the job's name less its timestamp)")
    group.add_argument("--mlflow-run-name", metavar="NAME",
                       help="the MLflow run's name (default: a replayed request's MlflowRunName, else the job's name)")
    group.add_argument("--mlflow-optional", action="store_true",
                       help="when the tracking server cannot be reached at the start, run untracked (said) instead "
                       "of refusing to start")


def _companions_alone(args: argparse.Namespace) -> None:
    given = [f"--{name.replace('_', '-')}" for name in _TRACKING_COMPANIONS if getattr(args, name)]
    if given:
        raise ConfigurationError(given[0], getattr(args, given[0][2:].replace("-", "_")), "was given without "
                                 "--mlflow", "add --mlflow URI (the tracking server or store)")


def tracking_from_args(args: argparse.Namespace) -> MlflowSettings | None:
    """A local job's MLflow settings from :func:`add_tracking_options`' options (None without ``--mlflow``).

    Raises:
        ConfigurationError: A companion option without ``--mlflow``, or a bad URI or name.
    """
    if args.mlflow is None:
        _companions_alone(args)
        return None
    return MlflowSettings(args.mlflow, experiment_name=args.mlflow_experiment, run_name=args.mlflow_run_name,
                          untracked_if_unreachable=args.mlflow_optional)


def sagemaker_tracking_from_args(args: argparse.Namespace) -> dict[str, str] | None:
    """A SageMaker job's ``MlflowConfig`` from :func:`add_tracking_options`' options (None without ``--mlflow``),
    for the estimator to check as SageMaker does (:func:`smddp_compat.estimators.sagemaker_mlflow_config`).

    Raises:
        ConfigurationError: A companion option without ``--mlflow``, or ``--mlflow-optional`` (SageMaker reaches its
            own MLflow: nothing to fall back from).
    """
    if args.mlflow is None:
        _companions_alone(args)
        return None
    if args.mlflow_optional:
        raise ConfigurationError("--mlflow-optional", True, "applies to a job run here (the tracking server may be "
                                 "away); SageMaker reaches its own MLflow", "leave it out")
    return {"MlflowResourceArn": args.mlflow,
            **({"MlflowExperimentName": args.mlflow_experiment} if args.mlflow_experiment else {}),
            **({"MlflowRunName": args.mlflow_run_name} if args.mlflow_run_name else {})}
