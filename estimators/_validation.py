"""Checks of the estimator's plain fields (counts, role, entry point, hyperparameters), run before any AWS call."""

from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping

from smddp_compat.estimators.errors import ConfigurationError, raised_as_estimator_errors

__all__ = [
    "check_instance_count", "check_role", "check_entry_point", "check_hyperparameters", "ROLE_ARN_PATTERN",
    "check_channel_names",
]

#: An IAM role ARN in any partition: arn:aws[-cn|-us-gov]:iam::<12-digit account>:role/<path/>name.
ROLE_ARN_PATTERN = re.compile(r"^arn:aws(-[a-z]+)*:iam::\d{12}:role/[\w+=,.@\-/]{1,512}$")


def check_instance_count(value: object, *, field: str = "instance_count") -> int:
    """Checks an instance count.

    Args:
        value: The count given.
        field: The field name for the error.

    Returns:
        The count.

    Raises:
        ConfigurationError: Not an integer >= 1.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(field, value, "must be an integer >= 1", "use e.g. instance_count=1 or 2")
    return value


def check_role(role: object, *, required: bool) -> str | None:
    """Checks an IAM role ARN.

    Args:
        role: The role given.
        required: True for jobs on AWS (local types accept any placeholder or none).

    Returns:
        The role.

    Raises:
        ConfigurationError: Missing when required, or not a well-formed role ARN.
    """
    fix = "pass the full ARN of a SageMaker execution role, e.g. role='arn:aws:iam::123456789012:role/SageMakerRole'"
    if role is None or role == "":
        if required:
            raise ConfigurationError("role", role, "an IAM role is required for jobs on SageMaker", fix)
        return None
    if not isinstance(role, str):
        raise ConfigurationError("role", role, "must be a string", fix)
    if required and not ROLE_ARN_PATTERN.match(role):
        problem = "not a well-formed IAM role ARN"
        if re.fullmatch(r"[\w+=,.@\-]+", role):
            problem += " (a bare role name cannot be resolved without an AWS call)"
        raise ConfigurationError("role", role, problem, fix)
    return role


def check_entry_point(entry_point: object, source_dir: object, dependencies: object) -> None:
    """Checks that the entry point, source dir and dependencies exist locally (S3 source dirs are not checked).

    Args:
        entry_point: The script, relative to ``source_dir`` when that is given.
        source_dir: A local directory, an ``s3://`` URI, or None.
        dependencies: Local directories shipped beside the source, or None.

    Raises:
        ConfigurationError: A missing or wrongly typed path.
    """
    if not isinstance(entry_point, str) or not entry_point:
        raise ConfigurationError(
            "entry_point", entry_point, "must be the path of the training script", "pass e.g. entry_point='train.py'"
        )
    if entry_point.startswith("s3://"):
        raise ConfigurationError(
            "entry_point", entry_point, "must be a local file, not an S3 URI",
            "pass the script's local path; put other code in source_dir",
        )
    if source_dir is not None and not isinstance(source_dir, str):
        raise ConfigurationError("source_dir", source_dir, "must be a path or an s3:// URI", "pass a string")
    if isinstance(source_dir, str) and source_dir.startswith("s3://"):
        return
    if source_dir:
        if not os.path.isdir(source_dir):
            raise ConfigurationError(
                "source_dir", source_dir, "is not an existing directory", "pass the directory holding your code"
            )
        script = os.path.join(source_dir, entry_point)
        if not os.path.isfile(script):
            raise ConfigurationError(
                "entry_point", entry_point, f"no such file in source_dir {source_dir!r}",
                "give the script's path relative to source_dir",
            )
    elif not os.path.isfile(entry_point):
        raise ConfigurationError(
            "entry_point", entry_point, "no such file", "give the path of an existing training script"
        )
    for dep in dependencies or []:
        if not isinstance(dep, str) or not os.path.exists(dep):
            raise ConfigurationError(
                "dependencies", dep, "is not an existing path", "list local directories or files to ship"
            )


def check_channel_names(inputs: object, *, field: str = "inputs") -> None:
    """Checks the channel names of ``fit(inputs)`` (or ``smddp submit --channel``) by local_mode's one rule.

    Each channel becomes the folder ``/opt/ml/input/data/<name>`` on every host: besides SageMaker's pattern (1-64
    letters, digits, '.', '-', '_'), the names ``.`` and ``..``, which SageMaker's pattern lets through, are
    refused because they name ``input/data`` itself or ``input``.

    Args:
        inputs: What ``fit`` takes: None, one URI or input object (the ``training`` channel), or a mapping of
            channel name to URI or input object.
        field: The argument named in the error (``inputs`` for ``fit``, ``--channel`` for the CLI).

    Raises:
        ConfigurationError: A channel name is refused (the error names ``field`` and the name).
    """
    if not isinstance(inputs, Mapping):
        return
    from smddp_compat.local_mode.spec import channel_name_problem  # the one rule (local_mode's spec is light)

    for name in inputs:
        problem = channel_name_problem(name)
        if problem is not None:
            raise ConfigurationError(
                field, name, problem, "use 1-64 letters, digits, '.', '-', '_', other than '.' and '..' "
                "(e.g. train, test)"
            )


def check_hyperparameters(hyperparameters: object, *, local_process: bool = False) -> dict[str, Any]:
    """Checks that hyperparameters are a dict of JSON-serialisable values (SageMaker sends them as JSON), and for a
    ``local_process`` job that local_mode, which will run it, accepts their names.

    Args:
        hyperparameters: The dict given, or None.
        local_process: The job runs through local_mode: check the names by local_mode's own rule now, before
            anything starts (SageMaker jobs keep SageMaker's rules: ``attach()`` passes the SDK's ``sagemaker_*``).

    Returns:
        The hyperparameters (an empty dict for None).

    Raises:
        ConfigurationError: Not a mapping, a non-string or empty name, for ``local_process`` a name local_mode
            refuses (not letters, digits, ``_-.``, or starting with ``sagemaker_``: it becomes the script's
            ``--NAME`` argument and ``SM_HP_NAME``), or a value JSON cannot encode.
    """
    if hyperparameters is None:
        return {}
    if not isinstance(hyperparameters, Mapping):
        raise ConfigurationError(
            "hyperparameters", hyperparameters, "must be a dictionary", "pass e.g. {'epochs': 3, 'lr': 0.001}"
        )
    for key, value in hyperparameters.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(
                "hyperparameters", key, "every name must be a non-empty string", "rename the hyperparameter"
            )
        if local_process:
            # local_mode's own rule (imported here: only local_process jobs load local_mode).
            from smddp_compat.local_mode.spec import check_hyperparameter_name

            with raised_as_estimator_errors():
                check_hyperparameter_name(key)
        if hasattr(value, "to_string") and hasattr(value, "expr"):  # a SageMaker pipeline parameter
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"hyperparameters[{key!r}]", value, f"is not JSON-serialisable ({exc})",
                "use a str, int, float, bool, list or dict of those",
            ) from None
    return dict(hyperparameters)
