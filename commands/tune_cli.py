"""``smddp tune``: a hyperparameter tuning job on this machine, every trial a job of ``smddp local``'s process backend.

It takes ``smddp local``'s job options (the job every trial runs, with the trial's values over its hyperparameters)
plus what SageMaker's CreateHyperParameterTuningJob takes: the ranges (``--continuous``, ``--integer``,
``--categorical``), the objective (one of the ``--metric`` definitions, read from each trial's logs as SageMaker reads
it), the strategy, early stopping and the limits. The search is local tuning's (:mod:`smddp_compat.local_mode.tuning`:
Random, Grid, or Bayesian and Hyperband through Optuna), run as the SDKs' tuners run it here
(:func:`smddp_compat.estimators.run_tuning_job`). Every trial is kept under ``OUTPUT/<tuning job>/<trial>/`` (logs,
model, output), beside ``tuning-job.json`` (the tuning job's DescribeHyperParameterTuningJob answer) and
``tuning.png`` (each trial's objective and the best so far); a table of the trials and the best one end the output.

Exit codes: 0 the tuning job completed (some trial gave the objective); 1 no trial did, or an error of the kit's;
2 a usage or configuration error (nothing was started); 130 interrupted (Ctrl-C: the running trials are stopped, the
ended ones kept); 128+N another stop signal N (SIGTERM, SIGHUP, SIGQUIT), handled as Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from smddp_compat import contract
from smddp_compat import errors as kit_errors
from smddp_compat.cli_help import help_texts
from smddp_compat.estimators import run_tuning_job
from smddp_compat.estimators.replay import replay_spec
from smddp_compat.commands.job_options import add_job_options, add_tracking_options
from smddp_compat.launcher import StopSignalled, whole_number
from smddp_compat.commands.local_cli import (
    add_environment_and_metrics, run_reporting_errors, spec_from_args)
from smddp_compat.local_mode.backends import ProcessBackend
from smddp_compat.local_mode.environment import default_region
from smddp_compat.local_mode.s3 import is_s3_uri
from smddp_compat.local_mode.spec import DEFAULT_MAX_RUN, DEFAULT_OUTPUT_PATH, JobSpec
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.search_strategies import STRATEGIES
from smddp_compat.local_mode.tracking import MlflowSettings
from smddp_compat.local_mode.tuning import WARM_START_TYPES
from smddp_compat.local_mode.name_values import decode_value, parse_name_values

__all__ = ["main", "build_parser", "tuning_request"]

_EXIT_CODES = [
    ("0", "the tuning job completed: some trial gave the objective"),
    ("1", "no trial gave the objective, or an error of the kit's (the message says which)"),
    ("2", "a usage or configuration error: nothing was started"),
    ("130", "interrupted (Ctrl-C): the running trials are stopped (each ends Stopped); the ended ones are kept"),
    ("128+N", "stopped by signal N (SIGTERM 143, a closed terminal's SIGHUP 129, SIGQUIT 131), as Ctrl-C"),
]
#: SageMaker's rule for a tuning job's name (CreateHyperParameterTuningJob: 1 to 32 characters).
_TUNING_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,31}$")
_RANGE_OPTIONS = {"--continuous": "Continuous", "--integer": "Integer", "--categorical": "Categorical"}


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp tune`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="smddp tune",
        **help_texts(
            """
            Tune a training job's hyperparameters on this machine, as SageMaker's hyperparameter tuning does: each
            trial is the job smddp local would run (the same options), with the trial's values over its
            hyperparameters and _tuning_objective_metric naming the objective; the objective is one of the --metric
            definitions, read from the trial's logs. Without ENTRY_POINT it tunes the bundled smddp_mnist.py (2
            hosts x 1 process, distribution smddp). Trials, their logs and models are kept under
            OUTPUT/<tuning job>/.
            """,
            exit_codes=_EXIT_CODES,
            examples=[
                ("the bundled MNIST job: learning rate and batch size, 6 trials, held-out accuracy",
                 "smddp tune --metric 'test_accuracy=test_accuracy=([0-9.]+)' --objective test_accuracy \\\n"
                 "--continuous learning-rate=0.0005:0.01:Logarithmic --categorical batch-size=32,64 --max-jobs 6"),
                ("your script, a loss to minimise, 2 trials at once, Random search",
                 "smddp tune train.py --source-dir src/ --metric 'val_loss=val_loss=([0-9.]+)' --objective val_loss "
                 "\\\n--objective-type Minimize --integer layers=1:4 --strategy Random --max-jobs 8 "
                 "--max-parallel-jobs 2"),
            ],
        ),
    )
    add_job_options(
        parser,
        entry_point_help="training script (.py or .sh) every trial runs (default: the bundled smddp_mnist.py, 2 "
        "hosts x 1 process, distribution smddp)",
        instance_count_default="1",
        processes_per_host_default="1",
        distribution_default="none",
        output_help=f"folder for <tuning job>/<trial>/ and <tuning job>/tuning-job.json (default ./"
        f"{DEFAULT_OUTPUT_PATH})",
        output_default=DEFAULT_OUTPUT_PATH,
        max_run_help=f"each trial's time limit (default {DEFAULT_MAX_RUN}, a day; fractions allowed)",
        max_run_default=DEFAULT_MAX_RUN,
    )
    more = parser.add_argument_group("more options of every trial (as smddp local's)")
    add_environment_and_metrics(more, metric_help="the objective must be one")
    add_tracking_options(more, what="the tuning job is a run, each trial a run under it")
    more.add_argument("--show-logs", action="store_true",
                      help="print the trials' output as they run (each trial's logs are kept in its folder anyway)")
    more.add_argument("--backend", choices=("process", "docker"), default="process",
                      help="process (default): each trial on this machine's processes, as smddp local runs a job; "
                      "docker: each trial in the SageMaker twin, from the request the kit's estimator sends (as "
                      "smddp local --backend docker runs it; the kit's image is built on first use)"),
    tuning = parser.add_argument_group("the tuning job (as SageMaker's CreateHyperParameterTuningJob)")
    tuning.add_argument("--objective", required=True, metavar="METRIC", help="the metric to optimise")
    tuning.add_argument("--objective-type", choices=("Maximize", "Minimize"), default="Maximize",
                        help="whether a larger or a smaller objective is better (default: Maximize)")
    tuning.add_argument("--strategy", choices=STRATEGIES, default="Bayesian",
                        help="how trials' values are chosen (default: Bayesian, through Optuna's TPE; Hyperband: "
                        "random values, trials stopped by Optuna's Hyperband pruner)")
    tuning.add_argument("--early-stopping", choices=("Off", "Auto"), default="Off",
                        help="Auto: stop a trial whose objective at an epoch is worse than the median of the earlier "
                        "trials' running averages (SageMaker's rule; each printed objective value is an epoch)")
    tuning.add_argument("--max-resource", type=whole_number, default=None, metavar="EPOCHS",
                        help="Hyperband: a trial's most epochs (default: the static epochs hyperparameter)")
    tuning.add_argument("--min-resource", type=whole_number, default=None, metavar="EPOCHS",
                        help="Hyperband: epochs before a trial may be stopped (default: 1)")
    tuning.add_argument("--max-jobs", type=whole_number, default=None, metavar="N",
                        help="how many trials (default: 4; Grid: every combination)")
    tuning.add_argument("--max-parallel-jobs", type=whole_number, default=1, metavar="N",
                        help="trials run at once, as this machine's cores allow (default: 1)")
    tuning.add_argument("--random-seed", type=whole_number, default=None, metavar="N",
                        help="repeat a search's values (Random and Bayesian)")
    tuning.add_argument("--warm-start", nargs="+", action="extend", default=[], metavar="TUNING_JOB",
                        help="learn from up to 5 earlier tuning jobs in the same --output folder (their trials "
                        "inform a Bayesian search)")
    tuning.add_argument("--warm-start-type", choices=WARM_START_TYPES, default=WARM_START_TYPES[0],
                        help="IdenticalDataAndAlgorithm (the default: the best trial is also compared with the "
                        "parents' best) or TransferLearning")
    for option, kind in _RANGE_OPTIONS.items():
        form = "V1,V2,..." if kind == "Categorical" else "MIN:MAX[:SCALING]"
        scaling = "" if kind == "Categorical" else " (SCALING: Auto, Linear, Logarithmic" + (
            ", ReverseLogarithmic)" if kind == "Continuous" else ")")
        tuning.add_argument(option, nargs="+", action="extend", default=[], metavar=f"NAME={form}",
                            help=f"a {kind.lower()} range{scaling}; repeatable")
    return parser


def _ranges(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """``ParameterRanges`` from the range options (SageMaker's checks are local tuning's, when it starts)."""
    ranges: dict[str, list[dict[str, Any]]] = {}
    for option, kind in _RANGE_OPTIONS.items():
        entries = ranges.setdefault(f"{kind}ParameterRanges", [])
        for name, spec in parse_name_values(getattr(args, option[2:]), option).items():
            if kind == "Categorical":
                entries.append({"Name": name, "Values": spec.split(",")})
                continue
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(parts):
                raise kit_errors.ConfigurationError(option, f"{name}={spec}", "is not NAME=MIN:MAX[:SCALING]",
                                                    f"write e.g. {option} {name}=0.001:0.1:Logarithmic")
            entry = {"Name": name, "MinValue": parts[0], "MaxValue": parts[1]}
            if len(parts) == 3:
                entry["ScalingType"] = parts[2]
            entries.append(entry)
    return {key: entries for key, entries in ranges.items() if entries}


def _tuning_job_name(args: argparse.Namespace, spec: JobSpec) -> str:
    if args.tuning_job_name is not None:
        if not _TUNING_JOB_NAME.match(args.tuning_job_name):
            raise kit_errors.ConfigurationError(
                "--job-name", args.tuning_job_name, "is not a tuning job name: 1 to 32 letters, digits and '-', "
                "starting and ending with a letter or digit (SageMaker's rule)", "use e.g. lr-sweep-1")
        return args.tuning_job_name
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", Path(spec.entry_point_name).stem).strip("-")[:12] or "job"
    return f"{stem}-tune-{time.strftime('%y%m%d-%H%M%S')}"


def tuning_request(args: argparse.Namespace, spec: JobSpec) -> dict[str, Any]:
    """The CreateHyperParameterTuningJob request of ``smddp tune``'s options, every trial ``spec``'s job.

    Raises:
        ConfigurationError: No range, or an objective without a ``--metric`` definition.
    """
    ranges = _ranges(args)
    if not ranges:
        raise kit_errors.ConfigurationError("ranges", "none", "nothing to tune",
                                            "give --continuous, --integer or --categorical NAME=...")
    metrics = [definition["Name"] for definition in spec.metric_definitions]
    if args.objective not in metrics:
        raise kit_errors.ConfigurationError(
            "--objective", args.objective, f"has no metric definition ({', '.join(metrics) or 'no --metric given'})",
            f"add --metric '{args.objective}=REGEX' (its first group captures the value)")
    tuned = {entry["Name"] for entries in ranges.values() for entry in entries}
    config: dict[str, Any] = {
        "Strategy": args.strategy,
        "HyperParameterTuningJobObjective": {"Type": args.objective_type, "MetricName": args.objective},
        "ResourceLimits": {"MaxNumberOfTrainingJobs": args.max_jobs or (1000 if args.strategy == "Grid" else 4),
                           "MaxParallelTrainingJobs": args.max_parallel_jobs},
        "ParameterRanges": ranges,
    }
    if args.random_seed is not None:
        config["RandomSeed"] = args.random_seed
    if args.early_stopping != "Off":
        config["TrainingJobEarlyStoppingType"] = args.early_stopping
    resources = {key: value for key, value in (("MinResource", args.min_resource), ("MaxResource", args.max_resource))
                 if value is not None}
    if resources:
        if args.strategy != "Hyperband":
            raise kit_errors.ConfigurationError("--max-resource/--min-resource", resources, "are Hyperband's",
                                                "add --strategy Hyperband, or leave them out")
        config["StrategyConfig"] = {"HyperbandStrategyConfig": resources}
    static = {name: value for name, value in contract.encode_hyperparameters(spec.hyperparameters).items()
              if name not in tuned}
    definition = {"StaticHyperParameters": static, **{key: value for key, value in spec.request_params(
        "local_process").items() if key in ("AlgorithmSpecification", "InputDataConfig", "StoppingCondition")}}
    request = {"HyperParameterTuningJobName": _tuning_job_name(args, spec), "HyperParameterTuningJobConfig": config,
               "TrainingJobDefinition": definition}
    if args.warm_start:
        request["WarmStartConfig"] = {"WarmStartType": args.warm_start_type, "ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": name} for name in args.warm_start]}
    return request


def _run(args: argparse.Namespace) -> int:
    base = spec_from_args(args)
    if is_s3_uri(base.output_path):
        raise kit_errors.ConfigurationError("--output", base.output_path, "is not a local folder",
                                            "tune into a folder (smddp tune keeps every trial there)")
    request = tuning_request(args, base)
    folder = os.path.abspath(os.path.join(base.output_path, request["HyperParameterTuningJobName"]))
    out = sys.stdout

    def run_trial(trial_name: str, hyperparameters: Mapping[str, str], control: JobControl,
                  tracking: MlflowSettings | None) -> Mapping[str, Any]:
        trial = dataclasses.replace(base, job_name=trial_name, output_path=folder, mlflow=tracking, hyperparameters={
            name: decode_value(value) for name, value in hyperparameters.items()})
        with contextlib.ExitStack() as stack:
            stream = out if args.show_logs else stack.enter_context(open(os.devnull, "w"))
            if args.backend == "docker":
                return replay_spec(trial, stream=stream, control=control).describe()
            return ProcessBackend(stream=stream).run(trial, control=control).describe()

    try:
        job = run_tuning_job(request, run_trial, folder=folder, region=default_region(),
                             processes_per_trial=base.instance_count * base.processes_per_host, stream=out,
                             mlflow=base.mlflow, backend=args.backend)
    except (KeyboardInterrupt, StopSignalled) as stopped:
        signum = stopped.signum if isinstance(stopped, StopSignalled) else signal.SIGINT
        print(f"smddp tune: interrupted ({signal.Signals(signum).name}): the running trials were stopped; the ended "
              "ones are kept", file=sys.stderr)
        return 128 + signum
    return 0 if job.status == "Completed" else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``smddp tune`` with the arguments after ``tune`` (``sys.argv[1:]`` when None); returns the exit code."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    args.checkpoint_dir = args.work_dir = None  # not options of a tuning job: each trial's are its own
    args.tuning_job_name, args.job_name = args.job_name, None  # --job-name names the tuning job; trials their own
    return run_reporting_errors(lambda: _run(args), "smddp tune")
