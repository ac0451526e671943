"""``smddp local``: run a SageMaker training job on this machine (``smddp local --help`` lists the options, defined
once with ``smddp submit``'s in :mod:`smddp_compat.commands.job_options`).

With no ENTRY_POINT it runs the bundled ``entry_points/smddp_mnist.py`` as 2 hosts x 1 process with distribution
smddp (the README's first command). Hyperparameter values are read as JSON when they parse (``epochs=3`` is the
number 3, ``flag=true`` a boolean) and as strings otherwise (``optimizer=adam``), like SageMaker's console does.

``--backend docker`` runs the same job as SageMaker would: the request the kit's estimator sends for it (built
against a private moto server; local channels uploaded there) is replayed by the SageMaker twin in the kit's image
(built on first use), on CPU instance types. ``--request``/``--job`` replay a request as it is.

Exit codes: 0 completed; the failed process's code when one failed; 124 when --max-run passed; 128+signal when
interrupted; 2 for a usage or configuration error (nothing was started); 1 for another error of the kit's.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from smddp_compat import errors as kit_errors
from smddp_compat.distribution_config import mesh_option_text
from smddp_compat.cli_help import help_texts
from smddp_compat.commands.job_options import (
    add_job_options, add_tracking_options, hyperparameters_from_args, tracking_from_args,
)
from smddp_compat.launcher import positive_count, positive_seconds

from smddp_compat.estimators.replay import replay_spec
from smddp_compat.local_mode.backends import DockerBackend, ProcessBackend
from smddp_compat.local_mode.docker.request import TrainingJobRequest
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.s3 import is_s3_uri
from smddp_compat.local_mode.spec import DEFAULT_MAX_RUN, DEFAULT_OUTPUT_PATH, JobSpec
from smddp_compat.local_mode.name_values import parse_name_values

__all__ = ["main", "build_parser", "spec_from_args", "bundled_entry_points_dir", "DEMO_ENTRY_POINT",
           "add_environment_and_metrics", "run_reporting_errors"]

DEMO_ENTRY_POINT = "smddp_mnist.py"
_DEMO_HOSTS = 2
_DEMO_DISTRIBUTION = "smddp"

_USAGE_ERROR = 2
_EXIT_CODES = [
    ("0", "the job completed"),
    ("1", "an error of the kit's stopped the job (the message says which)"),
    ("2", "a usage or configuration error: nothing was started"),
    ("124", "--max-run passed: everything was stopped (MaxRuntimeExceeded)"),
    ("128+N", "interrupted by signal N (130: Ctrl-C)"),
    ("other", "the exit code of the job's process that failed first"),
]


def bundled_entry_points_dir() -> Path:
    """The folder of the bundled entry points (``entry_points/`` beside this package)."""
    return Path(__file__).resolve().parent.parent / "entry_points"


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp local`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="smddp local",
        **help_texts(
            """
            Run a SageMaker training job on this machine, as SageMaker runs it: H hosts (algo-1, algo-2, ... on
            127.0.0.2, 127.0.0.3, ...) x P processes, each host with its own /opt/ml tree and the SM_* variables,
            the distribution's launcher and environment (Horovod ranks, TF_CONFIG, DTENSOR_JOBS), the job's
            artifacts and logs written to --output. With --backend docker, the same job runs in the SageMaker twin
            (the kit's image, one container per host).

            Without ENTRY_POINT it runs the bundled smddp_mnist.py as 2 hosts x 1 process with distribution
            smddp.
            """,
            exit_codes=_EXIT_CODES,
            examples=[
                ("the bundled MNIST job: 2 hosts x 1 process, distribution smddp", "smddp local"),
                ("your script, 2 hosts x 2 processes, a channel, hyperparameters",
                 "smddp local train.py --source-dir src/ --instance-count 2 --processes-per-host 2 \\\n"
                 "--distribution smddp --channel train=./data --hyperparameters epochs=3 lr=0.01"),
                ("the bundled DTensor sentiment model, model parallel on 2 hosts (run in the checkout)",
                 "smddp local entry_points/dtensor_sentiment.py --distribution dtensor --instance-count 2 \\\n"
                 "--hp mode=model epochs=2"),
                ("the same job in the SageMaker twin (Docker)",
                 "smddp local train.py --backend docker --instance-count 2"),
                ("replay a CreateTrainingJob request in the twin",
                 "smddp local --backend docker --request request.json"),
            ],
        ),
    )
    add_job_options(
        parser,
        entry_point_help=f"training script (.py or .sh) (default: the bundled {DEMO_ENTRY_POINT}, {_DEMO_HOSTS} "
        f"hosts x 1 process, distribution {_DEMO_DISTRIBUTION})",
        instance_count_default="1",
        processes_per_host_default="1",
        distribution_default="none",
        output_help="folder or s3://bucket/prefix for <job>/output/{model,output}.tar.gz and <job>/logs "
        f"(default ./{DEFAULT_OUTPUT_PATH})",
        output_default=DEFAULT_OUTPUT_PATH,
        max_run_help=f"the job's time limit: everything is stopped after it, exit 124 (default {DEFAULT_MAX_RUN}, "
        "a day; fractions allowed)",
        max_run_default=DEFAULT_MAX_RUN,
    )
    more = parser.add_argument_group("more options of smddp local")
    add_environment_and_metrics(more, metric_help="its last value is in the summary")
    add_tracking_options(more, what="the job is an MLflow run")
    more.add_argument("--checkpoint-dir", metavar="DIR|s3://...",
                      help="folder shared as every host's checkpoints folder, or an s3:// prefix (SageMaker's "
                      "checkpoint_s3_uri: each host's folder starts from it and is stored there at the end); give it "
                      "again to resume")
    more.add_argument("--work-dir", metavar="DIR", help="keep the hosts' /opt/ml trees here (default: temporary)")
    more.add_argument(
        "--backend",
        choices=("process", "docker"),
        default="process",
        help="process: this machine's processes (default); docker: the SageMaker twin, in the kit's image: the "
        "request the kit's estimator would send for the job, or a request given with --request or --job",
    )
    more.add_argument(
        "--show-tf-logs", action="store_true",
        help="show TensorFlow's C++ log lines on the console (hidden by default, unless TF_CPP_MIN_LOG_LEVEL is set; "
        "the per-host log files always keep them)",
    )
    twin = parser.add_argument_group(
        "the SageMaker twin (--backend docker)",
        "Replays a CreateTrainingJob request under a job name of its own (default: the request's name + "
        "-replay- + 6 hex digits; --job-name sets it). Artifacts and logs go to OUTPUT/<job name>/ (--output: a "
        "folder, default ./smddp_local_output, or s3://...), never over an existing job's; checkpoints are read "
        "from the request's CheckpointConfig.S3Uri and synced under the output, or read from and synced to "
        "--checkpoint-dir (a folder or s3://...; give it again to resume).",
    )
    source = twin.add_mutually_exclusive_group()
    source.add_argument("--request", metavar="FILE", help="the CreateTrainingJob parameters as JSON")
    source.add_argument("--job", metavar="NAME",
                        help="a job's request read with DescribeTrainingJob (AWS_ENDPOINT_URL)")
    twin.add_argument("--gpus-per-host", type=positive_count, metavar="N",
                      help="GPU instance types: processes per host on the CPU (default: cores / hosts)")
    twin.add_argument("--stop-grace", type=positive_seconds, default=None, metavar="SECONDS",
                      help="SIGTERM to SIGKILL on a stop or time-out (default: SageMaker's 120)")
    twin.add_argument("--interrupt-after", type=positive_seconds, default=None, metavar="SECONDS",
                      help="managed spot jobs (EnableManagedSpotTraining): a spot interruption this long after the "
                      "containers start; the same job then restarts from its synced checkpoints, as on SageMaker")
    twin.add_argument("--short-toolkit-waits", action=argparse.BooleanOptionalAction, default=None,
                      help="cut the training toolkit's fixed 30 s sleeps after an MPI or SMDDP launch (leader and "
                      "workers) to 1 s: about 30 s less per multi-host MPI/SMDDP job. Not SageMaker's behaviour (it "
                      "waits them, billed); the answer says so in Twin.Warnings. Default: cut when "
                      "SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1 is in the environment, kept otherwise")
    return parser


def add_environment_and_metrics(group: argparse._ArgumentGroup, *, metric_help: str) -> None:
    """``--env`` and ``--metric``, as ``smddp local`` and ``smddp tune`` take them (``metric_help``: what the
    command does with a metric)."""
    group.add_argument("--env", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                       help="extra environment variables")
    group.add_argument("--metric", nargs="+", action="extend", default=[], metavar="NAME=REGEX",
                       help=f"a metric read from the logs, as SageMaker's MetricDefinitions: {metric_help} (the "
                       "regex's first group captures it; repeatable)")


def spec_from_args(args: argparse.Namespace) -> JobSpec:
    """Builds the validated job from :func:`build_parser`'s arguments (the demo job when no entry point is given).

    Raises:
        ConfigurationError: A value is invalid.
    """
    entry_point, source_dir = args.entry_point, args.source_dir
    hosts, distribution = args.instance_count, args.distribution
    if entry_point is None:
        if source_dir is not None:
            raise ConfigurationError(
                "--source-dir",
                source_dir,
                "was given without ENTRY_POINT",
                "name the script: smddp local SCRIPT --source-dir DIR",
            )
        entry_point, source_dir = DEMO_ENTRY_POINT, str(bundled_entry_points_dir())
        hosts = _DEMO_HOSTS if hosts is None else hosts
        distribution = _DEMO_DISTRIBUTION if distribution is None else distribution
    hyperparameters = hyperparameters_from_args(args)
    s3_checkpoints = args.checkpoint_dir if args.checkpoint_dir and is_s3_uri(args.checkpoint_dir) else None
    return JobSpec(
        entry_point=entry_point,
        source_dir=source_dir,
        instance_count=1 if hosts is None else hosts,
        processes_per_host=1 if args.processes_per_host is None else args.processes_per_host,
        distribution="none" if distribution is None else distribution,
        hyperparameters=hyperparameters,
        channels=parse_name_values(args.channel, "--channel"),
        output_path=args.output,
        max_run=args.max_run,
        job_name=args.job_name,
        environment=parse_name_values(args.env, "--env"),
        checkpoint_path=None if s3_checkpoints else args.checkpoint_dir,
        checkpoint_s3_uri=s3_checkpoints,
        mlflow=tracking_from_args(args),
        dtensor_mesh=mesh_option_text(args.mesh, "--mesh"),  # DIM=SIZE,...: checked by the distribution model
        devices_per_process=args.devices_per_process,
        work_dir=args.work_dir,
        metric_definitions=[
            {"Name": name, "Regex": regex} for name, regex in parse_name_values(args.metric, "--metric").items()
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``smddp local`` with the arguments after ``local`` (``sys.argv[1:]`` when None); returns the exit code
    (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.request or args.job:
        return _replay(args)
    if args.interrupt_after is not None:
        print(f"smddp local: error: --interrupt-after={args.interrupt_after:g}: a spot interruption applies to a "
              "replayed managed spot request only (EnableManagedSpotTraining). Fix: add --backend docker --request "
              "FILE (or --job NAME), or leave it out", file=sys.stderr)
        return _USAGE_ERROR
    if args.backend == "docker":
        return _run_in_twin(args)
    if args.short_toolkit_waits:
        print("smddp local: error: --short-toolkit-waits: the training toolkit runs in the twin only (the process "
              "backend has no toolkit and no waits). Fix: add --backend docker, or leave it out", file=sys.stderr)
        return _USAGE_ERROR

    def run() -> int:
        result = ProcessBackend(show_tf_logs=args.show_tf_logs).run(spec_from_args(args))
        if not result.ok:  # the summary on standard output says it too; errors also go to standard error
            print(f"smddp local: job {result.job_name} ended {result.secondary_status}: "
                  f"{result.failure_reason or 'stopped'}", file=sys.stderr)
        return result.exit_code

    return run_reporting_errors(run)


def run_reporting_errors(job: Callable[[], int], prog: str = "smddp local") -> int:
    """Runs ``job`` and returns its exit code; a configuration error prints (``prog: error: ...``) and gives 2, any
    other error of the kit's prints and gives 1."""
    try:
        return job()
    except kit_errors.ConfigurationError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return _USAGE_ERROR
    except kit_errors.SmddpError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1


def _run_in_twin(args: argparse.Namespace) -> int:
    """``smddp local [ENTRY_POINT] --backend docker``: the job as SageMaker runs it, from the request the kit's
    estimator would send for it (built against a private moto server), replayed by the twin in the kit's image.

    The options are checked as the process backend checks them (:func:`spec_from_args`), then as the estimator
    checks them, before anything starts. Prints the DescribeTrainingJob answer, as a replay does.
    """
    for option, value in (("--work-dir", args.work_dir), ("--gpus-per-host", args.gpus_per_host)):
        if value is not None:
            fix = ("leave it out: each host's /opt/ml is a container's; its logs and artifacts go to --output"
                   if option == "--work-dir" else "leave it out: a script runs on CPU instance types; set the "
                   "processes per host with --processes-per-host")
            print(f"smddp local: error: {option}={value!r}: only applies to the process backend"
                  f"{'' if option == '--work-dir' else ' or a replayed request (GPU instance types)'}. Fix: {fix}",
                  file=sys.stderr)
            return _USAGE_ERROR

    def run() -> int:
        spec = spec_from_args(args)
        try:
            result = replay_spec(spec, stream=sys.stderr, stop_grace=args.stop_grace,
                                 short_toolkit_waits=args.short_toolkit_waits)
        except KeyboardInterrupt:  # before the twin took over the signals: nothing of the job runs yet
            print("smddp local: interrupted before the job started; nothing was left running", file=sys.stderr)
            return 128 + signal.SIGINT
        print(json.dumps(result.describe(), indent=2, default=str))
        return result.exit_code

    return run_reporting_errors(run)


def _replay(args: argparse.Namespace) -> int:
    """``smddp local --backend docker --request FILE | --job NAME``: the request, replayed by the SageMaker twin."""

    given = [f"--{name.replace('_', '-')}" for name in ("entry_point", "source_dir", "instance_count",
             "processes_per_host", "distribution") if getattr(args, name)]
    if args.backend != "docker" or given:
        what = "--request" if args.request else "--job"
        problem = f"{', '.join(given)} cannot be combined with {what}" if given else f"{what} needs --backend docker"
        print(f"smddp local: error: {problem}: the request defines the whole job. Use `smddp local --backend docker "
              f"{what} ...` alone (change the job in the request itself).", file=sys.stderr)
        return _USAGE_ERROR

    def replay() -> int:
        request = TrainingJobRequest.from_file(args.request) if args.request else _described_request(args.job)
        backend = DockerBackend(
            gpus_per_host=args.gpus_per_host, stop_grace=args.stop_grace, stream=sys.stderr, job_name=args.job_name,
            output=args.output, checkpoints=args.checkpoint_dir, interrupt_after=args.interrupt_after,
            short_toolkit_waits=args.short_toolkit_waits, tracking=tracking_from_args(args),
        )
        result = backend.run(request)
        print(json.dumps(result.describe(), indent=2, default=str))
        return result.exit_code

    return run_reporting_errors(replay)


def _described_request(job_name: str) -> Any:
    """The request of an existing job, read with DescribeTrainingJob (which honours ``AWS_ENDPOINT_URL``)."""
    import boto3  # AWS's clients: only to describe an existing job
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    except (BotoCoreError, ClientError) as exc:
        raise ConfigurationError(
            "--job", job_name, f"could not be described ({exc})",
            "check the name, the region (AWS_DEFAULT_REGION), your credentials, and AWS_ENDPOINT_URL",
        ) from exc
    return TrainingJobRequest.from_params(described)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
