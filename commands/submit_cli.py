"""``smddp submit|status|logs|wait|fetch``: SageMaker training jobs from the command line (examples:
``estimators/README.md``).

``submit`` takes ``smddp local``'s job options (one definition: :mod:`smddp_compat.commands.job_options`) plus the SageMaker
ones; each command's ``--help`` says what it does, its exit codes and examples. Every value is checked before any
AWS client is made: numbers (whole and >= 1, or finite seconds > 0), job names (SageMaker's rule), the fetch
destination, then the job as the estimator checks it, and the region last (one SageMaker runs in; no region at all
is its own error).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Sequence

from smddp_compat import contract
from smddp_compat.cli_help import help_texts
from smddp_compat.distribution_config import DistributionConfig, FieldNames, mesh_option_text
from smddp_compat.estimators import (
    ConfigurationError, EstimatorError, JobTimeoutError, check_channel_names, check_destination, check_job_name,
    check_positive_int, check_positive_seconds, check_s3_uri, describe_job, fetch_model, format_status,
    iter_log_events, resolve_region, sagemaker_mlflow_config, wait_for_job,
)
from smddp_compat.image.cuda import CpuImageWarning
from smddp_compat.instance_types import LOCAL_INSTANCE_TYPES
from smddp_compat.commands.job_options import (
    add_job_options, add_tracking_options, hyperparameters_from_args, sagemaker_tracking_from_args, tracking_from_args,
)
from smddp_compat.local_mode.channels import check_local_channel
from smddp_compat.local_mode.errors import ChannelError
from smddp_compat.local_mode.name_values import parse_name_values

__all__ = ["main", "build_parser", "distribution_from_args"]

EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 3
DEFAULT_FRAMEWORK_VERSION = "2.21"
DEFAULT_PY_VERSION = "py311"
#: The distribution settings as ``smddp submit`` spells them.
_OPTION_NAMES = FieldNames(
    kind="--distribution", instance_count="--instance-count", processes_per_host="--processes-per-host",
    custom_mpi_options="--custom-mpi-options", mesh="--mesh", devices_per_process="--devices-per-process",
)


def distribution_from_args(kind: str, processes_per_host: int | None, mesh: str | None,
                           custom_mpi_options: str | None,
                           devices_per_process: int | None = None) -> dict[str, Any] | None:
    """The estimator's ``distribution`` dictionary (None for ``none``) for ``--distribution`` (``kind``) and its
    companion options, each argument named after its option (None: the distribution's default; ``mesh`` as
    ``DIM=SIZE,...`` text). They are checked by :mod:`smddp_compat.distribution_config`, as ``smddp local`` checks
    them.

    Raises:
        ConfigurationError: An unknown distribution, a bad value, or an option that does not apply to it.
    """
    return DistributionConfig.from_flat(
        kind, processes_per_host=processes_per_host, mesh=mesh, devices_per_process=devices_per_process,
        custom_mpi_options=custom_mpi_options, names=_OPTION_NAMES,
    ).to_sdk_dict()


_ROLE_EXAMPLE = "arn:aws:iam::123456789012:role/SageMakerRole"
_IMAGE_EXAMPLE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smddp-compat:latest"
_USAGE_CODE = ("2", "bad usage or configuration, refused before any AWS call")
_AWS_CODE = ("1", "an AWS call failed (the message names it)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``smddp submit|status|logs|wait|fetch``."""
    parser = argparse.ArgumentParser(prog="smddp", **help_texts(
        "SageMaker training jobs for smddp-compat: submit one, then follow it (status, logs, wait) and download its "
        "model (fetch). Run `smddp <command> --help` for each command's options.",
        exit_codes=[("0", "success"), ("1", "the job failed, or an AWS call did"), _USAGE_CODE,
                    ("3", "timed out waiting (the job goes on)")],
        examples=[("submit a job", "smddp submit train.py --instance-type ml.c5.2xlarge --role ARN --image-uri URI"),
                  ("then wait for it to end", "smddp wait JOB")],
    ))
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--region", default=None, metavar="REGION",
                        help="AWS region (default: the AWS configuration's, e.g. AWS_DEFAULT_REGION)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     help="submit, status, logs, wait or fetch (COMMAND --help: its options)")

    submit = commands.add_parser(
        "submit", parents=[common], help="submit a training job (SageMaker SDK v2 estimator)",
        **help_texts(
            """
            Submit a training job to SageMaker with the kit's estimator (smddp_compat.estimators.TensorFlow, the
            SageMaker SDK v2's TensorFlow estimator for TF 2.21): the script and --source-dir are packed and
            uploaded, local --channel folders are uploaded to the session's default bucket under
            <job>/input/<name>, and CreateTrainingJob is sent. With --wait, the job's status changes are shown
            until it ends.

            The job's options are those of smddp local, in the same forms. Every value is checked before any AWS
            client is made: numbers, job and channel names, the job as the estimator checks it, then the region.
            --instance-type local_process runs the job on this machine (smddp local's process backend), with no
            AWS account. The SDK's telemetry is opted out for the sessions made here.
            """,
            exit_codes=[("0", "submitted (with --wait or local_process: the job completed)"),
                        ("1", "the job failed, or an AWS call did (the message names it)"), _USAGE_CODE,
                        ("3", "--wait timed out (the job goes on: smddp wait JOB)")],
            examples=[
                ("2 x ml.p4d.24xlarge with SMDDP, a local channel uploaded, then wait for it",
                 "smddp submit train.py --instance-type ml.p4d.24xlarge --instance-count 2 --distribution smddp \\\n"
                 f"--role {_ROLE_EXAMPLE} --image-uri <ecr image> \\\n"
                 "--channel train=./data/train --hyperparameters epochs=3 --wait"),
                ("the same job on this machine, no AWS account needed",
                 "smddp submit train.py --instance-type local_process --instance-count 2 --distribution smddp \\\n"
                 "--channel train=./data/train --hp epochs=3 --output ./out"),
            ],
        ),
    )
    add_job_options(
        submit,
        entry_point_help="training script (required; relative to --source-dir when given)",
        instance_count_default="1",
        processes_per_host_default="the distribution's for the instance type: its GPUs for smddp and mpi, else 1",
        distribution_default="none",
        output_help="s3://bucket/prefix for the job's artifacts (default: the session's bucket); a folder for "
        "--instance-type local_process",
        max_run_help="the job's time limit in whole seconds (MaxRuntimeInSeconds; default SageMaker's, 86400)",
    )
    sagemaker = submit.add_argument_group("SageMaker")
    sagemaker.add_argument("--instance-type", required=True, metavar="TYPE",
                           help="e.g. ml.p4d.24xlarge, ml.c5.2xlarge, or local_process (this machine) (required)")
    sagemaker.add_argument("--role", default=None, metavar="ARN",
                           help=f"the job's IAM role, e.g. {_ROLE_EXAMPLE}")
    sagemaker.add_argument("--image-uri", default=None, metavar="URI",
                           help=f"the training image (the kit's, pushed to ECR), e.g. {_IMAGE_EXAMPLE}")
    sagemaker.add_argument("--framework-version", default=DEFAULT_FRAMEWORK_VERSION, metavar="VERSION",
                           help=f"TensorFlow version the estimator states (default {DEFAULT_FRAMEWORK_VERSION})")
    sagemaker.add_argument("--py-version", default=DEFAULT_PY_VERSION, metavar="VERSION",
                           help=f"Python version the estimator states (default {DEFAULT_PY_VERSION})")
    sagemaker.add_argument("--custom-mpi-options", default=None, metavar="OPTIONS",
                           help="smddp, mpi: extra mpirun options, as the SDK's custom_mpi_options")
    add_tracking_options(sagemaker, what="the job is an MLflow run (local_process: as smddp local tracks it)",
                         sagemaker=True)
    sagemaker.add_argument("--wait", action="store_true", help="wait for the job to end, showing its status changes")
    _add_wait_options(sagemaker, timeout=24 * 3600.0, what="--wait")

    def job_command(name: str, summary: str, description: str, exit_codes: list, example: tuple[str, str]) -> Any:
        command = commands.add_parser(name, parents=[common], help=summary,
                                      **help_texts(description, exit_codes=exit_codes, examples=[example]))
        command.add_argument("job", metavar="JOB", help="the training job's name (as smddp submit printed it)")
        return command

    job_command("status", "show a job's status", "Show a training job's status: its state and secondary status, "
                "instances, times, artifacts and failure reason (DescribeTrainingJob).",
                [("0", "the status was shown (whatever it is)"), _AWS_CODE, _USAGE_CODE],
                ("the status of a job", "smddp status train-2026-11-21-10-00-00-000"))
    logs = job_command("logs", "print a job's CloudWatch logs", "Print a training job's CloudWatch logs "
                       "(/aws/sagemaker/TrainingJobs), every host's, each line prefixed with its host ([algo-1]).",
                       [("0", "the logs were printed"), _AWS_CODE, _USAGE_CODE],
                       ("the first 100 lines of a job's logs", "smddp logs JOB --max-events 100"))
    logs.add_argument("--max-events", type=int, default=None, metavar="N",
                      help="print at most N log lines (default: all)")
    wait = job_command("wait", "wait for a job to end, showing progress",
                       "Wait for a training job to end, printing each change of its status; then show its status.",
                       [("0", "the job completed"), ("1", "the job failed or was stopped, or an AWS call failed"),
                        _USAGE_CODE, ("3", "--timeout passed (the job goes on)")],
                       ("wait at most an hour, checking every minute", "smddp wait JOB --timeout 3600 --poll 60"))
    _add_wait_options(wait, timeout=3600.0, what="smddp wait")
    fetch = job_command("fetch", "download and extract a job's model.tar.gz", "Download a training job's model "
                        "artifact (model.tar.gz) and extract it into DEST (safely: no member may leave DEST).",
                        [("0", "the model was extracted"), ("1", "the job has no model, or the download or "
                         "archive failed"), ("2", "bad usage (JOB, DEST: a new folder, or an empty one), before any "
                         "AWS call")],
                        ("the model of a job, into ./model", "smddp fetch JOB ./model"))
    fetch.add_argument("dest", metavar="DEST", help="a new or empty folder to extract the model into")
    return parser


def _add_wait_options(parser: Any, *, timeout: float, what: str) -> None:
    parser.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                        help=f"seconds {what} waits at most (default {timeout:.0f}); the job goes on after it")
    parser.add_argument("--poll", type=float, default=30.0, metavar="SECONDS",
                        help="seconds between two status checks (default 30)")


_NO_REGION_FIX = "set --region or AWS_DEFAULT_REGION (e.g. --region us-east-1)"


def _region(region: str | None) -> str:
    """``--region``, else the AWS configuration's, checked (no AWS call)."""
    return resolve_region(region, "--region", how_to_set=_NO_REGION_FIX)


def _boto_session(region: str | None) -> Any:
    import boto3

    return boto3.Session(region_name=_region(region))


def _check_numbers(args: argparse.Namespace) -> None:
    """The numeric options of a command: refused with the option's name before anything else happens."""
    max_run = getattr(args, "max_run", None)
    if isinstance(max_run, float) and max_run.is_integer():
        args.max_run = int(max_run)  # read as smddp local reads it (``3600``, ``3.6e3``); SageMaker takes whole seconds
    # --instance-count is the estimator's instance_count, refused by it as "instance_count=..." (bad-input table).
    for option, example in (("max_run", "--max-run 86400"), ("max_events", "--max-events 100")):
        value = getattr(args, option, None)
        if value is not None:
            check_positive_int(value, "--" + option.replace("_", "-"), example)
    for option, example in (("timeout", "--timeout 3600"), ("poll", "--poll 30")):
        if hasattr(args, option):
            check_positive_seconds(getattr(args, option), "--" + option, example)


def _upload_channels(session: Any, channels: dict[str, str], job_name: str) -> dict[str, str]:
    for name, source in channels.items():  # every channel checked before the first upload
        if not source.startswith("s3://"):
            check_local_channel(name, source)
    uploaded: dict[str, str] = {}
    for name, source in channels.items():
        if source.startswith("s3://"):
            uploaded[name] = source
        else:
            uploaded[name] = session.upload_data(source, key_prefix=f"{job_name}/input/{name}")
            print(f"smddp submit: uploaded channel {name!r} ({source}) to {uploaded[name]}", file=sys.stderr)
    return uploaded


def _submit(args: argparse.Namespace) -> int:
    from smddp_compat.estimators import TensorFlow  # the SageMaker SDK v2: only submit needs it

    if args.job_name is not None:
        check_job_name(args.job_name, "--job-name")  # before channels are uploaded under <job>/input/
    hyperparameters = hyperparameters_from_args(args)
    model_dir = hyperparameters.pop(contract.MODEL_DIR_HYPERPARAMETER, False)  # the estimator's to send
    channels = parse_name_values(args.channel, "--channel")
    if args.entry_point is None:  # after the NAME=VALUE options, which name a script given after them as such
        raise ConfigurationError("ENTRY_POINT", None, "is missing",
                                 "name the training script first: smddp submit train.py --instance-type ...")
    check_channel_names(channels, field="--channel")
    mesh = mesh_option_text(args.mesh, "--mesh")
    distribution = distribution_from_args(args.distribution or "none", args.processes_per_host, mesh,
                                          args.custom_mpi_options, args.devices_per_process)
    local = args.instance_type == "local_process"
    for name, source in channels.items():
        if not source.startswith("s3://") and not os.path.exists(source):
            raise ConfigurationError(
                f"--channel {name}", source, "no such file or directory", "give an existing path or an s3:// URI"
            )
    if args.output is not None and args.instance_type not in LOCAL_INSTANCE_TYPES:
        check_s3_uri(args.output, "--output")
    kwargs: dict[str, Any] = {}
    if args.max_run is not None:
        kwargs["max_run"] = args.max_run
    tracking: Any = tracking_from_args(args) if local else sagemaker_tracking_from_args(args)
    if tracking is not None:
        kwargs["mlflow"] = tracking
    try:
        # The estimator checks the job, then the region, and only then makes the SDK's session (telemetry off).
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", CpuImageWarning)
            estimator = TensorFlow(
                entry_point=args.entry_point,
                source_dir=args.source_dir,
                role=args.role,
                instance_type=args.instance_type,
                instance_count=1 if args.instance_count is None else args.instance_count,
                image_uri=args.image_uri,
                framework_version=args.framework_version,
                py_version=args.py_version,
                hyperparameters=hyperparameters,
                model_dir=model_dir,
                output_path=args.output,
                distribution=distribution,
                region=args.region,
                **kwargs,
            )
        for warning in said:  # a GPU type with an image without CUDA: said before any upload, in our words
            if issubclass(warning.category, CpuImageWarning):
                print(f"smddp submit: warning: {warning.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    except ConfigurationError as exc:
        if exc.field == "region":
            _region(args.region)  # the same refusal, in the command line's words
        if exc.field == "mlflow":
            sagemaker_mlflow_config(tracking, args.instance_type, field="--mlflow")  # likewise
        raise
    if local:
        result = estimator.fit(channels or None, job_name=args.job_name)
        ok = bool(getattr(result, "ok", getattr(result, "succeeded", True)))
        return EXIT_OK if ok else EXIT_JOB_FAILED
    from sagemaker.utils import name_from_base

    job_name = args.job_name or name_from_base(os.path.splitext(os.path.basename(args.entry_point))[0][:30] or "job")
    inputs = _upload_channels(estimator.sagemaker_session, channels, job_name) if channels else None
    estimator.fit(inputs, wait=False, job_name=job_name)
    print(f"smddp submit: started training job {job_name}")
    if not args.wait:
        return EXIT_OK
    client = estimator.sagemaker_session.sagemaker_client
    description = wait_for_job(client, job_name, timeout=args.timeout, poll=args.poll)
    print(format_status(description))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one subcommand.

    Args:
        argv: The arguments, starting with the subcommand name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (0 ok, 1 job failed, 2 bad usage, 3 timeout).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    try:
        _check_numbers(args)
        if args.command == "submit":
            return _submit(args)
        check_job_name(args.job, "JOB")
        if args.command == "fetch":
            check_destination(args.dest, "DEST")
        session = _boto_session(args.region)
        if args.command == "status":
            print(format_status(describe_job(session.client("sagemaker"), args.job)))
        elif args.command == "logs":
            for event in iter_log_events(session.client("logs"), args.job, max_events=args.max_events):
                host = event.stream.split("/", 1)[-1]
                print(f"[{host}] {event.message}")
        elif args.command == "wait":
            description = wait_for_job(session.client("sagemaker"), args.job, timeout=args.timeout, poll=args.poll)
            print(format_status(description))
        elif args.command == "fetch":
            files = fetch_model(session.client("sagemaker"), session.client("s3"), args.job, args.dest)
            print(f"smddp fetch: extracted {len(files)} file(s) into {args.dest}")
        return EXIT_OK
    except ConfigurationError as exc:  # the estimators' and those of what they call (the kit's one class)
        print(f"smddp {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ChannelError as exc:  # a channel's folder holds what no upload can read
        print(f"smddp {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except JobTimeoutError as exc:
        print(f"smddp {args.command}: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT
    except EstimatorError as exc:  # a failed job (JobError) or AWS call
        print(f"smddp {args.command}: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    except ValueError as exc:  # the SDK's configuration errors
        print(f"smddp {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if not type(exc).__module__.startswith(("botocore", "boto3", "s3transfer")):
            raise
        print(f"smddp {args.command}: AWS call failed: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED


if __name__ == "__main__":
    sys.exit(main())
