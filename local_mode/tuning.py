"""Hyperparameter tuning jobs on this machine, in SageMaker's terms: a CreateHyperParameterTuningJob request in,
trials run by the caller's ``run_trial``, DescribeHyperParameterTuningJob and ListTrainingJobsForHyperParameterTuningJob
answers out. No SageMaker SDK here: SDK v2's glue (:mod:`smddp_compat.estimators._local_tuning`) and any other
caller hand it the request and a way to run one training job.

SageMaker's semantics (developer guide, "How Hyperparameter Tuning Works" and "Define Hyperparameter Ranges"):

- ranges: ``ContinuousParameterRanges`` and ``IntegerParameterRanges`` (``MinValue``, ``MaxValue``, ``ScalingType``
  ``Linear``, ``Logarithmic`` (values > 0), ``ReverseLogarithmic`` (continuous, 0 <= values < 1) or ``Auto``,
  searched here as ``Linear``) and ``CategoricalParameterRanges`` (``Values``);
- ``Random``: each trial's values drawn independently (``RandomSeed`` makes the draws repeatable); ``Grid``:
  categorical ranges only, every combination once, in order, ``MaxNumberOfTrainingJobs`` defaulting to their count;
  ``Bayesian``: Optuna's TPE sampler (SageMaker's own Bayesian model is not public: the trials it picks differ);
  ``Hyperband``: Optuna's Hyperband pruner over randomly drawn values (SageMaker's own Hyperband is not public:
  which trials it stops differs), each value of the objective a trial prints one epoch (its resource), a trial
  stopped once it printed ``MaxResource`` values (given, or read from the static ``epochs``, ``numepochs``,
  ``n-epochs``, ``n_epochs`` or ``num_epochs``) and never before ``MinResource``;
- early stopping (``TrainingJobEarlyStoppingType`` ``Auto``, "Stop Training Jobs Early"): after each epoch (each value
  of the objective a trial prints), a trial whose value is worse than the median of the running averages of the
  ended trials' values up to that epoch is stopped (:mod:`~local_mode.early_stopping`);
- a trial stopped early (by either) ends ``Stopped`` and its last value is its objective;
- each trial gets the static and tuned hyperparameters and ``_tuning_objective_metric``; its objective is the
  objective metric's final value (``FinalMetricDataList``: the last value its ``MetricDefinitions`` regex found);
- a failed trial is counted (``TrainingJobStatusCounters.NonRetryableError``, ``ObjectiveStatusCounters.Failed``,
  as is a completed one without the metric) and the search goes on; the tuning job fails only when no trial gave an
  objective;
- at most ``MaxParallelTrainingJobs`` trials at once, fewer when this machine's cores cannot run that many.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

from smddp_compat import contract
from smddp_compat.launcher import StopSignalled, stop_signals_noted
from smddp_compat.local_mode.early_stopping import MedianStoppingRule
from smddp_compat.local_mode.errors import ConfigurationError
from smddp_compat.local_mode.lifecycle import JobControl
from smddp_compat.local_mode.search_strategies import BayesianSearch, GridSearch, search_strategy

__all__ = ["TuningJob", "tuning_job_arn", "TrialRunner", "ParentTuningJob", "WARM_START_TYPES"]

_POLL_SECONDS = 1.0

#: Runs one training job: its name, its hyperparameters (strings, static ones, tuned ones and
#: ``_tuning_objective_metric``) and the control to run it with (:class:`~local_mode.lifecycle.JobControl`: the
#: tuning job stops it early, or on a stop signal, and hears its metrics through it) -> its DescribeTrainingJob
#: answer. An exception counts as a failed job.
TrialRunner = Callable[[str, Mapping[str, str], JobControl], Mapping[str, Any]]

#: CreateHyperParameterTuningJob's ``WarmStartConfig.WarmStartType`` values.
WARM_START_TYPES = ("IdenticalDataAndAlgorithm", "TransferLearning")


@dataclass(frozen=True)
class ParentTuningJob:
    """An earlier tuning job a warm start learns from: its name, its DescribeHyperParameterTuningJob answer and its
    trials (ListTrainingJobsForHyperParameterTuningJob's ``TrainingJobSummaries``)."""

    name: str
    description: Mapping[str, Any]
    training_jobs: Sequence[Mapping[str, Any]]


def tuning_job_arn(region: str, name: str) -> str:
    """A tuning job's ARN as SageMaker forms it (name in lower case)."""
    return f"arn:aws:sagemaker:{region}:{contract.LOCAL_ACCOUNT}:hyper-parameter-tuning-job/{name.lower()}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


class TuningJob:
    """A tuning job run here: :meth:`run` its trials, then :meth:`describe` and :meth:`training_job_summaries`
    answer as SageMaker's DescribeHyperParameterTuningJob and ListTrainingJobsForHyperParameterTuningJob do.

    Args:
        request: The CreateHyperParameterTuningJob request (``HyperParameterTuningJobName``,
            ``HyperParameterTuningJobConfig``, ``TrainingJobDefinition``).
        region: The region its ARNs name.
        processes_per_trial: How many processes one trial starts (caps the trials run at once by this machine's
            cores).

    Raises:
        ConfigurationError: A request local tuning cannot run (its strategy, ranges, objective or limits).
    """

    def __init__(self, request: Mapping[str, Any], *, region: str, processes_per_trial: int = 1,
                 parents: Sequence[ParentTuningJob] = ()) -> None:
        self.request = copy.deepcopy(dict(request))
        self.name = str(self.request["HyperParameterTuningJobName"])
        self.region = region
        config = self.request["HyperParameterTuningJobConfig"]
        objective = config.get("HyperParameterTuningJobObjective") or {}
        self.objective_name = objective.get("MetricName")
        self.maximize = objective.get("Type", "Maximize") == "Maximize"
        definition = self.request.get("TrainingJobDefinition") or {}
        metrics = [d.get("Name") for d in definition.get("AlgorithmSpecification", {}).get("MetricDefinitions") or []]
        if not self.objective_name or self.objective_name not in metrics:
            raise ConfigurationError("objective_metric_name", self.objective_name,
                                     f"has no metric definition ({', '.join(map(str, metrics)) or 'none given'})",
                                     "pass metric_definitions=[{'Name': <objective>, 'Regex': ...}] to the tuner")
        if self.request.get("Autotune"):
            raise ConfigurationError("autotune", self.request["Autotune"], "is not run by local tuning",
                                     "tune without autotune here (SageMaker runs it)")
        self.strategy = search_strategy(config, definition.get("StaticHyperParameters") or {})
        self.warm_start = self.request.get("WarmStartConfig") or None
        self.parents = list(parents)
        self.learned = self._learn_from_parents() if self.warm_start else 0
        limits = config.get("ResourceLimits") or {}
        self.max_jobs = limits.get("MaxNumberOfTrainingJobs")
        if isinstance(self.strategy, GridSearch):
            self.max_jobs = min(self.max_jobs or self.strategy.count, self.strategy.count)
        requested = limits.get("MaxParallelTrainingJobs", 1)
        for field, value in (("max_jobs", self.max_jobs), ("max_parallel_jobs", requested)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(field, value, "must be a whole number >= 1", f"pass e.g. {field}=4")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.parallel = max(1, min(requested, cores // max(1, processes_per_trial)))
        self.capped_note = (f"max_parallel_jobs={requested}: this machine runs {self.parallel} trial(s) at once "
                            f"({cores} core(s), {processes_per_trial} process(es) a trial)"
                            if self.parallel < requested else None)
        early = config.get("TrainingJobEarlyStoppingType", "Off")
        if early not in ("Off", "Auto"):
            raise ConfigurationError("early_stopping_type", early, "is not an early stopping type",
                                     "use 'Off' or 'Auto'")
        self.early_stopping = MedianStoppingRule(self.maximize) if early == "Auto" else None
        self.max_runtime = limits.get("MaxRuntimeInSeconds")
        self.created = _now()
        self.ended: datetime | None = None
        self.status = "InProgress"
        self.failure_reason: str | None = None
        self._trials: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        #: Per trial: its objective's value at each epoch so far; why it was stopped early; its control.
        self._epochs: dict[str, list[float]] = {}
        self._stopped_early: dict[str, str] = {}
        self._controls: dict[str, JobControl] = {}
        self._numbers: dict[str, int] = {}
        self._outcomes: dict[str, Mapping[str, Any] | BaseException] = {}
        self._durations: list[float] = []

    def _learn_from_parents(self) -> int:
        """Checks a warm start as SageMaker does (1 to 5 parents, each ended, each with this objective) and tells the
        strategy every parent trial that gave the objective; returns how many it took."""
        config = self.warm_start
        names = [p.get("HyperParameterTuningJobName") for p in config.get("ParentHyperParameterTuningJobs") or []]
        if not 1 <= len(names) <= 5:
            raise ConfigurationError("warm_start_config", names, "needs 1 to 5 parent tuning jobs",
                                     "name at most 5 earlier tuning jobs")
        if config.get("WarmStartType") not in WARM_START_TYPES:
            raise ConfigurationError("warm_start_config", config.get("WarmStartType"), "is not a warm start type",
                                     f"use one of {', '.join(WARM_START_TYPES)}")
        if isinstance(self.strategy, GridSearch):
            raise ConfigurationError("warm_start_config", names, "is not run by local tuning with strategy 'Grid'",
                                     "use strategy='Bayesian' (or tune without warm start)")
        if sorted(p.name for p in self.parents) != sorted(names):
            raise ConfigurationError("warm_start_config", names, "names tuning jobs that were not found",
                                     "name tuning jobs run here, into the same output folder")
        objective = {"MetricName": self.objective_name, "Type": "Maximize" if self.maximize else "Minimize"}
        learned = 0
        for parent in self.parents:
            status = parent.description.get("HyperParameterTuningJobStatus")
            if status not in ("Completed", "Stopped", "Failed"):
                raise ConfigurationError(f"warm_start_config[{parent.name!r}]", status, "has not ended",
                                         "warm-start from tuning jobs that have ended")
            theirs = (parent.description.get("HyperParameterTuningJobConfig") or {}).get(
                "HyperParameterTuningJobObjective") or {}
            if {key: theirs.get(key) for key in objective} != objective:
                raise ConfigurationError(f"warm_start_config[{parent.name!r}]", theirs, "tuned another objective "
                                         f"than {objective}", "warm-start from tuning jobs of the same objective")
            for trial in parent.training_jobs:
                metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric")
                if metric is not None:
                    learned += self.strategy.learn(trial.get("TunedHyperParameters") or {}, float(metric["Value"]))
        return learned

    def overall_best(self) -> dict[str, Any] | None:
        """An IDENTICAL_DATA_AND_ALGORITHM warm start's ``OverallBestTrainingJob``: the best of this job's trials and
        its parents' best ones (None for other jobs, or when none gave the objective)."""
        if not self.warm_start or self.warm_start.get("WarmStartType") != WARM_START_TYPES[0]:
            return None
        sign = 1 if self.maximize else -1
        candidates = [c for c in [self.best(), *(p.description.get("BestTrainingJob") for p in self.parents)]
                      if c and c.get("FinalHyperParameterTuningJobObjectiveMetric")]
        return max(candidates, key=lambda c: sign * float(c["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]),
                   default=None)

    # -- running ------------------------------------------------------------------------------------------------

    def _trial_name(self, index: int, values: Mapping[str, str]) -> str:
        digest = hashlib.sha1(json.dumps(dict(values), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name[:50]}-{index:03d}-{digest}"

    def _summary(self, name: str, values: Mapping[str, str]) -> dict[str, Any]:
        return {"TrainingJobName": name, "TrainingJobArn": contract.training_job_arn(self.region, name),
                "TuningJobName": self.name, "CreationTime": _now(), "TrainingJobStatus": "InProgress",
                "TunedHyperParameters": dict(values), "ObjectiveStatus": "Pending"}

    def _finish(self, summary: dict[str, Any], described: Mapping[str, Any] | BaseException) -> None:
        if isinstance(described, BaseException):
            described = {"TrainingJobStatus": "Failed", "FailureReason": f"{type(described).__name__}: {described}"}
        for key in ("TrainingStartTime", "TrainingEndTime", "FailureReason"):
            if described.get(key) is not None:
                summary[key] = described[key]
        summary["TrainingJobStatus"] = described.get("TrainingJobStatus", "Failed")
        summary.setdefault("TrainingEndTime", _now())
        final = {m["MetricName"]: m["Value"] for m in described.get("FinalMetricDataList") or []}
        ended_well = summary["TrainingJobStatus"] == "Completed" or (
            summary["TrainingJobStatus"] == "Stopped" and summary["TrainingJobName"] in self._stopped_early)
        if ended_well and self.objective_name in final:
            summary["ObjectiveStatus"] = "Succeeded"
            summary["FinalHyperParameterTuningJobObjectiveMetric"] = {
                "Type": "Maximize" if self.maximize else "Minimize", "MetricName": self.objective_name,
                "Value": float(final[self.objective_name])}
        else:
            summary["ObjectiveStatus"] = "Failed"

    def best(self) -> dict[str, Any] | None:
        """The summary of the trial with the best objective so far (the first one on a tie), or None."""
        scored = [t for t in self._trials if t["ObjectiveStatus"] == "Succeeded"]
        if not scored:
            return None
        sign = 1 if self.maximize else -1
        return max(scored, key=lambda t: (sign * t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"],
                                          -self._trials.index(t)))

    def _progress(self, summary: Mapping[str, Any], out: IO[str]) -> None:
        values = " ".join(f"{k}={v}" for k, v in summary["TunedHyperParameters"].items())
        index = self._trials.index(summary) + 1
        metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        result = (f"{self.objective_name}={metric['Value']:g}" if metric else
                  f"{summary['TrainingJobStatus']}, no {self.objective_name}"
                  + (f" ({' | '.join(summary['FailureReason'][:160].splitlines())})" if summary.get("FailureReason") else ""))
        early = self._stopped_early.get(summary["TrainingJobName"])
        if early is not None:
            result += f" (stopped early: {early})"
        best = self.best()
        best_text = (f"best {best['FinalHyperParameterTuningJobObjectiveMetric']['Value']:g} "
                     f"({best['TrainingJobName']})" if best else "no best yet")
        out.write(f"[tuning {self.name}] trial {index}/{self.max_jobs} {summary['TrainingJobName']}: {values} -> "
                  f"{result}; {best_text}{self._time_left()}\n")
        out.flush()

    def _time_left(self) -> str:
        """``; ~N min left`` from the trials' mean time so far and the trials still to run, ``parallel`` at once
        (empty when nothing is left or no trial ended yet)."""
        with self._lock:
            left = (self.max_jobs or 0) - len(self._durations)
            durations = list(self._durations)
        if left <= 0 or not durations:
            return ""
        seconds = statistics.fmean(durations) * math.ceil(left / self.parallel)
        return f"; ~{seconds / 60:.1f} min left" if seconds >= 60 else f"; ~{seconds:.0f} s left"

    def _heard(self, trial: str, number: int, control: JobControl, metric: str, value: float) -> None:
        """A value of one of a running trial's metrics: each value of the objective is an epoch, which the strategy
        (Hyperband), ``MaxResource`` or the early-stopping rule may stop the trial at."""
        if metric != self.objective_name or not math.isfinite(value):
            return
        with self._lock:
            epochs = self._epochs.setdefault(trial, [])
            epochs.append(value)
            mine = list(epochs)
            ended = [list(self._epochs.get(t["TrainingJobName"], ())) for t in self._trials
                     if t["TrainingJobStatus"] != "InProgress"]
        why = self.strategy.intermediate(number, len(mine), value)
        if why is None and self.early_stopping is not None and self.early_stopping.should_stop(mine, ended):
            why = f"epoch {len(mine)}: {value:g} is worse than the median of the earlier trials' running averages"
        if why is not None and trial not in self._stopped_early:
            with self._lock:
                self._stopped_early[trial] = why
            control.stop()

    def _start(self, pool: ThreadPoolExecutor, run_trial: TrialRunner, static: Mapping[str, str], number: int,
               values: Mapping[str, str]) -> tuple[Future[Any], dict[str, Any]]:
        """Starts trial ``number`` in ``pool``: its summary recorded, its control made (stopped early through it)."""
        summary = self._summary(self._trial_name(number, values), values)
        name = summary["TrainingJobName"]
        control = JobControl()
        control.on_metric = lambda metric, value: self._heard(name, number, control, metric, value)
        with self._lock:
            self._trials.append(summary)
            self._controls[name] = control
            self._numbers[name] = number
        hyperparameters = {**static, **values, contract.TUNING_OBJECTIVE_METRIC: self.objective_name}
        return pool.submit(self._timed, run_trial, name, hyperparameters, control), summary

    def _timed(self, run_trial: TrialRunner, name: str, hyperparameters: Mapping[str, str],
               control: JobControl) -> None:
        """Runs one trial in a worker thread; its DescribeTrainingJob (or what it raised) is kept for :meth:`_ended`."""
        started = time.monotonic()
        outcome: Mapping[str, Any] | BaseException
        try:
            outcome = run_trial(name, hyperparameters, control)
        except BaseException as exc:  # noqa: BLE001 - a failed trial (even SystemExit), counted as SageMaker counts it
            outcome = exc
        with self._lock:
            self._durations.append(time.monotonic() - started)
            self._outcomes[name] = outcome

    def _interrupted(self, running: Mapping[Future[Any], dict[str, Any]], signum: int, out: IO[str]) -> None:
        """A stop signal: every running trial is asked to stop and recorded once it stopped (each within its grace
        period); one that had not started yet is dropped."""
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.status, self.failure_reason = "Stopped", f"interrupted ({name}): the running trials were stopped"
        out.write(f"[tuning {self.name}] interrupted ({name}): stopping {len(running)} running trial(s); the ended "
                  "ones are kept\n")
        out.flush()
        for future, summary in running.items():
            if future.cancel():
                with self._lock:
                    self._trials.remove(summary)
            else:
                self._controls[summary["TrainingJobName"]].stop()
        for future in wait([future for future in running if not future.cancelled()]).done:
            self._ended(running[future], out)

    def _ended(self, summary: dict[str, Any], out: IO[str]) -> None:
        """Records an ended trial, tells the strategy, and prints its line."""
        with self._lock:
            self._finish(summary, self._outcomes[summary["TrainingJobName"]])
            del self._outcomes[summary["TrainingJobName"]]
        metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        self.strategy.observe(self._numbers[summary["TrainingJobName"]], metric["Value"] if metric else None,
                              stopped_early=summary["TrainingJobName"] in self._stopped_early)
        self._progress(summary, out)

    def run(self, run_trial: TrialRunner, stream: IO[str] | None = None) -> None:
        """Runs the trials: up to ``max_jobs``, ``parallel`` at once, each given its values by the strategy and
        told to it when it ends; a line per ended trial on ``stream`` (None: standard output). A trial that fails
        or raises is counted and the search goes on. The job ends ``Completed`` (``Failed`` when no trial gave an
        objective). A stop signal (Ctrl-C, SIGTERM, a closed terminal's SIGHUP, SIGQUIT: heard between two steps of
        the loop when this runs in the main thread, so that no trial is half recorded) stops the running trials
        (each ends ``Stopped``, its artifacts stored), keeps the ended ones and ends the job ``Stopped``; then
        KeyboardInterrupt is raised for Ctrl-C, :class:`~smddp_compat.launcher.StopSignalled` for the others."""
        out = stream if stream is not None else sys.stdout
        static = dict(self.request.get("TrainingJobDefinition", {}).get("StaticHyperParameters") or {})
        if self.capped_note:
            out.write(f"[tuning {self.name}] {self.capped_note}\n")
        if self.warm_start:
            parents = ", ".join(p.name for p in self.parents)
            learned = (f"the search learned {self.learned} trial(s) of {parents}" if isinstance(
                self.strategy, BayesianSearch) else f"Random search draws each trial on its own: {parents} inform "
                "the overall best only")
            out.write(f"[tuning {self.name}] warm start ({self.warm_start['WarmStartType']}): {learned}\n")
        deadline = self.created.timestamp() + self.max_runtime if self.max_runtime else None
        running: dict[Future[Any], dict[str, Any]] = {}
        exhausted = False
        # The stop signals are noted only while the loop runs; they are back to what they were (a Ctrl-C raises)
        # while the pool waits for its threads on the way out.
        with ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix=f"tuning-{self.name}") as pool, \
                stop_signals_noted() as signals:
            try:
                while (running or not exhausted) and not signals:
                    while not exhausted and len(running) < self.parallel and len(self._trials) < self.max_jobs:
                        if deadline is not None and _now().timestamp() >= deadline:
                            exhausted = True
                            break
                        number = len(self._trials) + 1
                        values = self.strategy.suggest(number)
                        if values is None:
                            exhausted = True
                            break
                        future, summary = self._start(pool, run_trial, static, number, values)
                        running[future] = summary
                    exhausted = exhausted or len(self._trials) >= self.max_jobs
                    if not running:
                        break
                    done, _ = wait(list(running), timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        self._ended(running.pop(future), out)
                if signals:
                    self._interrupted(running, signals[0], out)
                    raise KeyboardInterrupt if signals[0] == signal.SIGINT else StopSignalled(signals[0])
            finally:
                self.ended = _now()
        if self.status == "InProgress":
            self.status = "Completed" if self.best() else "Failed"
            if self.status == "Failed":
                self.failure_reason = (f"no training job gave the objective metric {self.objective_name!r} "
                                       f"({len(self._trials)} ran): see their FailureReason and logs")

    # -- the end's table and chart ----------------------------------------------------------------------------------

    def table(self, folder: str) -> str:
        """The trials as a table, oldest first, the best one marked ``*``, then the best trial's model (in ``folder``,
        the tuning job's), the parents' better one (a warm start) and the job's end."""
        trials = self.training_job_summaries()[::-1]
        best = self.best()
        names = sorted({name for trial in trials for name in trial["TunedHyperParameters"]})
        rows = [["", "trial", *names, "status", self.objective_name or "objective"]]
        for trial in trials:
            metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric")
            rows.append(["*" if best is not None and trial["TrainingJobName"] == best["TrainingJobName"] else "",
                         trial["TrainingJobName"], *(str(trial["TunedHyperParameters"].get(n, "")) for n in names),
                         trial["TrainingJobStatus"], f"{metric['Value']:g}" if metric else "-"])
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        if best is not None:
            value = best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
            lines.append(f"best trial {best['TrainingJobName']}: {self.objective_name}={value:g}; its model: "
                         f"{os.path.join(folder, best['TrainingJobName'], 'output', 'model.tar.gz')}")
        overall = self.overall_best()
        if overall is not None and overall["TrainingJobName"] != (best or {}).get("TrainingJobName"):
            value = overall["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
            lines.append(f"best of the parents' (better): {overall['TrainingJobName']} of "
                         f"{overall.get('TuningJobName')}: {self.objective_name}={value:g}")
        lines.append(f"tuning job {self.name}: {self.status}" + (f": {self.failure_reason}" if self.failure_reason
                                                                   else ""))
        return "\n".join(lines) + "\n"

    def write_chart(self, path: str) -> bool:
        """Writes a PNG of the objective of each trial (in start order; a hollow mark for a trial stopped early) and
        the best so far; returns False, writing nothing, when no trial gave the objective."""
        trials = self.training_job_summaries()[::-1]
        points = [(i, t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], t["TrainingJobName"] in
                   self._stopped_early) for i, t in enumerate(trials, 1)
                  if t.get("FinalHyperParameterTuningJobObjectiveMetric")]
        if not points:
            return False
        import matplotlib  # a plotting library is a heavy import: only when a chart is drawn
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        figure = Figure(figsize=(7, 4))
        axes = figure.subplots()
        pick = max if self.maximize else min
        best, bests = None, []
        for _, value, _ in points:
            best = value if best is None else pick(best, value)
            bests.append(best)
        full = [(i, v) for i, v, early in points if not early]
        early = [(i, v) for i, v, stopped in points if stopped]
        if full:
            axes.scatter(*zip(*full), label="trial")
        if early:
            axes.scatter(*zip(*early), facecolors="none", edgecolors="tab:blue", label="trial stopped early")
        axes.step([i for i, _, _ in points], bests, where="post", color="tab:orange", label="best so far")
        axes.set_xlabel("trial")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(f"{self.objective_name} ({'maximize' if self.maximize else 'minimize'})")
        strategy = self.request["HyperParameterTuningJobConfig"].get("Strategy", "Bayesian")
        axes.set_title(f"tuning job {self.name} ({strategy})")
        axes.legend()
        figure.tight_layout()
        figure.savefig(path)
        return True

    # -- answers ------------------------------------------------------------------------------------------------

    def stopped_early(self) -> dict[str, str]:
        """The trials stopped early (by the early-stopping rule or Hyperband), each with why."""
        with self._lock:
            return dict(self._stopped_early)

    def training_job_summaries(self) -> list[dict[str, Any]]:
        """ListTrainingJobsForHyperParameterTuningJob's ``TrainingJobSummaries``, newest first (SageMaker's
        default order, by creation time)."""
        with self._lock:
            return copy.deepcopy(self._trials[::-1])

    def describe(self) -> dict[str, Any]:
        """DescribeHyperParameterTuningJob's answer."""
        with self._lock:
            trials = copy.deepcopy(self._trials)
            best = copy.deepcopy(self.best())
        status = [t["TrainingJobStatus"] for t in trials]
        objective = [t["ObjectiveStatus"] for t in trials]
        answer: dict[str, Any] = {
            "HyperParameterTuningJobName": self.name,
            "HyperParameterTuningJobArn": tuning_job_arn(self.region, self.name),
            "HyperParameterTuningJobConfig": copy.deepcopy(self.request["HyperParameterTuningJobConfig"]),
            "HyperParameterTuningJobStatus": self.status,
            "CreationTime": self.created,
            "LastModifiedTime": self.ended or _now(),
            "TrainingJobStatusCounters": {
                "Completed": status.count("Completed"), "InProgress": status.count("InProgress"),
                "RetryableError": 0, "NonRetryableError": status.count("Failed"), "Stopped": status.count("Stopped"),
            },
            "ObjectiveStatusCounters": {key: objective.count(key) for key in ("Succeeded", "Pending", "Failed")},
            "ConsumedResources": {"RuntimeInSeconds": int(((self.ended or _now()) - self.created).total_seconds())},
        }
        for key in ("TrainingJobDefinition", "TrainingJobDefinitions", "WarmStartConfig", "Autotune"):
            if key in self.request:
                answer[key] = copy.deepcopy(self.request[key])
        if self.ended is not None:
            answer["HyperParameterTuningEndTime"] = self.ended
        if best is not None:
            answer["BestTrainingJob"] = best
        overall = self.overall_best()
        if overall is not None:
            answer["OverallBestTrainingJob"] = copy.deepcopy(overall)
        if self.failure_reason:
            answer["FailureReason"] = self.failure_reason
        return answer
