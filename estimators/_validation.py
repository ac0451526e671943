"""Checks of the estimator's plain fields (instance type and count, role, entry point, hyperparameters), and of the
values the CLI turns into requests or paths (numbers, job names, S3 URIs, the region), run before any AWS call."""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
import types
from typing import Any, Mapping

from smddp_compat import contract
from smddp_compat.estimators.errors import ConfigurationError, UnknownInstanceTypeError
from smddp_compat.instance_types import InstanceSpec, find_instance_type, unknown_instance_type
from smddp_compat.local_mode.api_model import check_member

__all__ = [
    "sagemaker_mlflow_config",
    "instance_spec", "check_instance_count", "check_role", "check_entry_point", "check_hyperparameters",
    "ROLE_ARN_PATTERN", "check_positive_int", "check_positive_seconds", "check_job_name", "check_s3_uri",
    "known_regions", "check_region", "resolve_region", "check_channel_names",
]

#: An IAM role ARN in any partition: arn:aws[-cn|-us-gov]:iam::<12-digit account>:role/<path/>name.
ROLE_ARN_PATTERN = re.compile(r"^arn:aws(-[a-z]+)*:iam::\d{12}:role/[\w+=,.@\-/]{1,512}$")


def instance_spec(instance_type: object, *, field: str = "instance_type") -> InstanceSpec:
    """The spec of an instance type (:func:`smddp_compat.instance_types.find_instance_type`), refusing unknown ones.

    Returns its vCPU and GPU counts; ``field`` is named in the error.

    Raises:
        UnknownInstanceTypeError: Not a string, or not a known type (the message suggests the closest ones).
    """
    spec = find_instance_type(instance_type) if isinstance(instance_type, str) else None
    if spec is None:
        raise UnknownInstanceTypeError(field, instance_type, *unknown_instance_type(instance_type))
    return spec


def check_instance_count(value: object, *, field: str = "instance_count") -> int:
    """The instance count ``value``; a ConfigurationError naming ``field`` when it is not an integer >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(field, value, "must be an integer >= 1", "use e.g. instance_count=1 or 2")
    return value


def check_role(role: object, *, required: bool) -> str | None:
    """Checks an IAM role ARN and returns it; ``required`` for jobs on AWS (local types accept any placeholder or
    none).

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
    for name in inputs:
        problem = contract.channel_name_problem(name)
        if problem is not None:
            raise ConfigurationError(
                field, name, problem, "use 1-64 letters, digits, '.', '-', '_', other than '.' and '..' "
                "(e.g. train, test)"
            )


def check_hyperparameters(hyperparameters: object, *, local_process: bool = False) -> dict[str, Any]:
    """Checks that hyperparameters are a dict of JSON-serialisable values (SageMaker sends them as JSON), and for a
    ``local_process`` job that local_mode, which will run it, accepts their names.

    Returns them (an empty dict for None). ``local_process``: the names are checked by local_mode's own rule now,
    before anything starts (SageMaker jobs keep SageMaker's rules: ``attach()`` passes the SDK's ``sagemaker_*``).

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
        if local_process and (problem := contract.hyperparameter_name_problem(key)) is not None:
            raise ConfigurationError("hyperparameters", key, *problem)
        if _is_pipeline_variable(value):
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"hyperparameters[{key!r}]", value, f"is not JSON-serialisable ({exc})",
                "use a str, int, float, bool, list or dict of those",
            ) from None
    return dict(hyperparameters)


def _is_pipeline_variable(value: object) -> bool:
    """A SageMaker pipeline parameter, whose value is only known when the pipeline runs."""
    return hasattr(value, "to_string") and hasattr(value, "expr")


def check_positive_int(value: object, field: str, example: str) -> int:
    """``value``, a count or a number of seconds or GB, once it is a whole number >= 1; else a ConfigurationError
    naming ``field`` as the user wrote it (``--max-run``, ``volume_size``) with ``example`` as the fix
    (``--max-run 86400``). Bools, floats, NaN and infinities are refused."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(field, value, "must be an integer >= 1", f"give a whole number, e.g. {example}")
    return value


def check_positive_seconds(value: object, field: str, example: str) -> float:
    """``value``, a duration in seconds, as a float once it is a finite number > 0; else (not a number, NaN,
    infinite, zero or negative) a ConfigurationError naming ``field`` (``--timeout``) with ``example`` as the fix
    (``--timeout 3600``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            field, value, "must be a finite number of seconds > 0", f"give a number of seconds, e.g. {example}"
        )
    return float(value)


def check_job_name(name: object, field: str = "job_name") -> str:
    """``name`` once it passes SageMaker's job-name rule (:func:`smddp_compat.contract.job_name_problem`), checked
    before it is sent or becomes part of an S3 key or a path; else a ConfigurationError naming ``field`` (``JOB``,
    ``--job-name``, ``job_name``)."""
    problem = contract.job_name_problem(name)
    if problem is not None:
        raise ConfigurationError(field, name, *problem)
    return name  # type: ignore[return-value]


def check_s3_uri(uri: object, field: str) -> str:
    """``uri`` once it is an ``s3://bucket[/prefix]`` URI (a pipeline parameter passes as it is); else a
    ConfigurationError naming ``field`` (``output_path``)."""
    if _is_pipeline_variable(uri):
        return uri  # type: ignore[return-value]
    if not isinstance(uri, str) or not re.match(r"^s3://[^/\s]+(/|$)", uri):
        raise ConfigurationError(
            field, uri, "is not an s3://bucket/prefix URI (a SageMaker job writes to S3 only)",
            "give e.g. s3://my-bucket/jobs; a local folder is only for instance_type local_process",
        )
    return uri


@functools.lru_cache(maxsize=1)
def known_regions() -> Mapping[str, tuple[str, ...]]:
    """The regions the installed botocore knows SageMaker in, by partition (``aws``, ``aws-cn``, ``aws-us-gov``...).

    Reads botocore's bundled endpoint data (once per process): no AWS call.
    """
    import boto3

    session = boto3.session.Session(region_name="us-east-1")
    return types.MappingProxyType({
        partition: tuple(session.get_available_regions("sagemaker", partition_name=partition))
        for partition in session.get_available_partitions()
    })


def check_region(region: object, field: str = "region", *, source: str | None = None) -> str:
    """Checks that a region is one the installed botocore knows SageMaker in, in any partition.

    An unknown name is refused rather than sent: botocore would turn it into a host name that does not exist (or
    the SDK fail on it with a KeyError). A region newer than the installed botocore is refused too: its fix is to
    upgrade boto3/botocore, whose endpoint data then lists it. ``field`` is the option or field (``--region``,
    ``region``), ``source`` where the value came from when the user did not give it here (named in the problem).

    Raises:
        ConfigurationError: Not a string, or not a SageMaker region of any partition botocore knows.
    """
    import botocore

    by_partition = known_regions()
    if isinstance(region, str) and any(region in regions for regions in by_partition.values()):
        return region
    every = sorted(r for regions in by_partition.values() for r in regions)
    close = difflib.get_close_matches(region, every, n=3) if isinstance(region, str) else []
    problem = "is not a region SageMaker runs in" + (f" (from {source})" if source else "")
    fix = (f"did you mean {' or '.join(close)}? Otherwise " if close else "") + (
        "give a SageMaker region such as us-east-1 (boto3.Session().get_available_regions('sagemaker') lists "
        f"them); a region newer than this botocore ({botocore.__version__}) needs `pip install -U boto3 botocore`"
    )
    raise ConfigurationError(field, region, problem, fix)


def resolve_region(region: str | None, field: str = "region", *, how_to_set: str | None = None) -> str:
    """The region a job or command uses: ``region`` when given, else the AWS configuration's, checked.

    ``field`` is the option or field it was given as, named in errors; ``how_to_set`` the fix when no region is
    configured (default: pass ``field`` or set AWS_DEFAULT_REGION).

    Raises:
        ConfigurationError: No region anywhere, or one :func:`check_region` refuses.
    """
    if region is not None:
        return check_region(region, field)
    import boto3

    configured = boto3.Session().region_name  # environment and config files only: no AWS call
    if not configured:
        raise ConfigurationError(
            field, None, "no AWS region is configured",
            how_to_set or f"pass {field}='us-east-1' (a SageMaker region), or set AWS_DEFAULT_REGION",
        )
    return check_region(
        configured, field, source="the AWS configuration: AWS_DEFAULT_REGION or the profile's region"
    )


_MLFLOW_ARN_EXAMPLE = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-EXAMPLE"


def sagemaker_mlflow_config(setting: Any, instance_type: str, field: str = "mlflow") -> dict[str, str]:
    """SageMaker's ``MlflowConfig`` for a job that runs on SageMaker: ``setting`` is the ARN of a SageMaker MLflow
    app or tracking server, or the config itself (``MlflowResourceArn``, optionally ``MlflowExperimentName`` and
    ``MlflowRunName``), checked against SageMaker's API model.

    Raises:
        ConfigurationError: A tracking URI or :class:`~smddp_compat.local_mode.tracking.MlflowSettings` (which only a
            ``local_process`` job is tracked at), or a config SageMaker would refuse, naming the member.
    """
    config = {"MlflowResourceArn": setting} if isinstance(setting, str) else setting
    if not isinstance(config, Mapping) or not str(config.get("MlflowResourceArn", "")).startswith("arn:"):
        arn = config.get("MlflowResourceArn") if isinstance(config, Mapping) else None
        shown = arn or getattr(setting, "public_uri", setting)  # an MlflowSettings' URI without its credentials
        local = "--instance-type local_process" if field.startswith("--") else "instance_type='local_process'"
        as_config = "" if field.startswith("--") else (
            ", or {'MlflowResourceArn': ARN, 'MlflowExperimentName': NAME, 'MlflowRunName': NAME}")
        raise ConfigurationError(
            field, shown, f"is not SageMaker's MLflow: a job on {instance_type} is tracked by SageMaker's managed "
            f"MLflow, named by its ARN (a tracking URI is for {local})",
            f"pass the ARN of your SageMaker MLflow app or tracking server, e.g. {field}={_MLFLOW_ARN_EXAMPLE!r}"
            f"{as_config}")
    config = dict(config)
    check_member("MlflowConfig", config)  # SageMaker's own rules: the ARN's pattern, the names' lengths
    return config
