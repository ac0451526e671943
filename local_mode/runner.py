"""The process backend: a :class:`~local_mode.spec.JobSpec` run by this machine's processes (:func:`run`).

Its part of the job's lifecycle (:class:`~local_mode.lifecycle.JobLifecycle`, which claims, stores and answers):
fetch the channels and build each host's ``/opt/ml`` tree with its own copy of them and of the code; plan the
processes for the distribution (starting Horovod's rendezvous for smddp/mpi); run them as one supervised group
(``smddp_compat.launcher.run_process_group``: live ``[algo-N,index]`` output, per-host log files, all stopped within
seconds when one fails, ``max_run`` enforced, Ctrl-C stops everything); read the failed process's failure file; keep
the checkpoints and TensorBoard summaries; print a summary.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from smddp_compat import contract, job_startup
from smddp_compat.cluster import encode_host_addresses
from smddp_compat.contract import ARGUMENT_RULES, encode_hyperparameters, read_failure_reason
from smddp_compat.job_files import iter_regular_files
from smddp_compat.launcher import (
    ConsoleStream,
    ProcessSpec,
    describe_failure,
    job_network_choice,
    oversubscription_warning,
    run_mpi_group,
    run_process_group,
    stall_watchdog_env,
    tensorflow_log_filter,
    usable_cores,
)
from smddp_compat.local_mode.artifacts import job_destination
from smddp_compat.local_mode.channels import place_channel, stage_channels
from smddp_compat.local_mode.environment import (
    default_region,
    host_addresses,
    inherited_environment,
    platform_environment,
    process_environment,
    training_environment,
)
from smddp_compat.local_mode.errors import ChannelError, ConfigurationError
from smddp_compat.local_mode.folder_sync import FolderSync, S3Target, sync_target
from smddp_compat.local_mode.host_views import host_views
from smddp_compat.local_mode.layout import HostLayout, create_host_tree, input_data_config, resource_config
from smddp_compat.local_mode.lifecycle import JobControl, JobEnd, JobLifecycle
from smddp_compat.local_mode.metrics import MetricTap, check_metric_definitions
from smddp_compat.local_mode.outcome import COMPLETED, FAILED, STOPPED, JobResult
from smddp_compat.local_mode.s3 import S3Location, make_s3_client, parse_s3_uri
from smddp_compat.local_mode.spec import JobSpec
from smddp_compat.source_files import copy_source_tree, warn_left_out
from smddp_compat.strategies import LocalCluster, ProcessPlan

__all__ = ["run", "ProcessJob", "INSTANCE_TYPE", "NETWORK_INTERFACE"]

INSTANCE_TYPE = "local"
"""The instance type reported to the job (what the SageMaker SDK's local mode reports)."""

NETWORK_INTERFACE = "lo"
"""The interface the hosts talk over: each has its own loopback address."""

LOG_LEVEL = 20

_GRACE_SECONDS = 5.0

_TENSORBOARD = "tensorboard"
"""The folder of ``<output>/<job>/`` that keeps the job's TensorBoard summaries (as the twin's)."""


def _count_gpus() -> int:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return 0
    try:
        listing = subprocess.run(
            [nvidia_smi, "--list-gpus"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def _copy_code(spec: JobSpec, code_dir: Path, fenced: list[Path]) -> None:
    """Copies the job's code into a host's ``code`` folder, by the rule of the estimators' upload (links to files
    inside become files, links to folders are not followed, links out of the source and special files are left out
    with a warning, and so are the job's own folders in ``fenced``); a shell entry point is made executable, as the
    training toolkit does before it runs one."""
    if spec.source_dir is None:
        shutil.copy2(spec.entry_point, code_dir / Path(spec.entry_point).name)
    else:
        warn_left_out(copy_source_tree(spec.source_dir, code_dir, fenced=fenced), f"the code folder {code_dir}")
    script = code_dir / spec.entry_point_name
    if not spec.entry_point_name.endswith(".py") and script.is_file() and not script.is_symlink():
        script.chmod(script.stat().st_mode | 0o111)


def _argv(spec: JobSpec, layout: HostLayout, args: list[str]) -> list[str]:
    """The command of one process, as SageMaker's training toolkit builds it (``_entry_point_type.get`` and
    ``ProcessRunner._create_command`` of sagemaker-training), without its shell string.

    A ``.sh`` entry point (or one ending in neither ``.sh`` nor ``.py``) is a command: the toolkit makes it
    executable and runs ``./script args`` through ``/bin/sh -c``, so its shebang chooses the interpreter and ``sh``
    reads a script without one; here the script is run directly (made executable by :func:`_copy_code`) or, without
    a shebang, as ``/bin/sh script``. A ``.py`` entry point runs as ``python -m <entry point without .py>`` when the
    code folder holds a ``setup.py`` (the toolkit's "Python package"; it also ``pip install``s the folder, which
    local mode does not), else as ``python script``. The arguments are never parsed by a shell.
    """
    name = spec.entry_point_name
    script = layout.code_dir / name
    if name.endswith(".sh") or not name.endswith(".py"):
        with open(script, "rb") as handle:
            has_shebang = handle.read(2) == b"#!"
        return [str(script), *args] if has_shebang else ["/bin/sh", str(script), *args]
    if os.path.lexists(layout.code_dir / "setup.py"):
        return [spec.python, "-m", name.replace(".py", ""), *args]
    return [spec.python, str(script), *args]


class ProcessJob(JobLifecycle):
    """A :class:`~local_mode.spec.JobSpec` run by this machine's processes: the process backend's part of the
    lifecycle (:class:`~local_mode.lifecycle.JobLifecycle`)."""

    def __init__(self, spec: JobSpec, out: IO[str], grace: float, show_tf_logs: bool,
                 control: JobControl | None = None) -> None:
        assert spec.job_name is not None
        super().__init__(spec.job_name, job_destination(spec.output_path, spec.job_name),
                         metric_definitions=check_metric_definitions(spec.metric_definitions), control=control,
                         tracking=spec.mlflow)
        job_network_choice()  # a bad SMDDP_JOB_NETWORK is refused before anything is written
        self.spec = spec
        self.stream = MetricTap(out, self.metrics)
        self.grace = grace
        self.show_tf_logs = show_tf_logs
        self.region = default_region()
        self._checkpoints: Path | None = None  # the folder every host shares, unless checkpoint_s3_uri is set
        self._checkpoint_sync: FolderSync | None = None  # checkpoint_s3_uri: each host's folder synced with it
        self._kept: list[str] = []  # the summary's lines on the kept checkpoints and TensorBoard folder

    def _tracked_facts(self) -> tuple[Mapping[str, Any], dict[str, str]]:
        spec = self.spec
        return spec.hyperparameters, {"sagemaker.distribution": spec.distribution.value,
                                      "sagemaker.instance_count": str(spec.instance_count),
                                      "sagemaker.instance_type": INSTANCE_TYPE,
                                      "sagemaker.processes_per_host": str(spec.processes_per_host),
                                      "sagemaker.backend": "process"}

    def _make_root(self) -> Path:
        if self.spec.work_dir is None:
            return Path(tempfile.mkdtemp(prefix=f"smddp-local-{self.job_name}-"))
        self._keep_root = True  # the user's own work folder
        root = Path(self.spec.work_dir) / self.job_name
        if root.exists():
            raise ConfigurationError(
                "job_name", self.job_name, f"its work folder {root} already exists", "choose another job name"
            )
        root.mkdir(parents=True)
        return root

    def _log_files(self, root: Path, layouts: Mapping[str, HostLayout]) -> dict[str, Path]:
        log_dir = self.destination / "logs" if isinstance(self.destination, Path) else root / "logs"
        return {host: log_dir / f"{host}.log" for host in layouts}

    def _prepare(self, root: Path) -> dict[str, HostLayout]:
        if self.spec.checkpoint_s3_uri is None:
            self._checkpoints = _checkpoint_folder(self.spec, self.destination, root)
        # The job's own folders and the temporary folder (the job's lock is there) are never copied into its code,
        # should they lie inside the source folder.
        own = [root, *([self._checkpoints] if self._checkpoints else []), Path(tempfile.gettempdir()),
               *([self.destination] if isinstance(self.destination, Path) else [])]
        layouts, self._host_envs = _prepare_hosts(self.spec, root, self._checkpoints, self.region, own,
                                                  self.tracking_environment)
        if self.spec.checkpoint_s3_uri is not None:
            self._checkpoint_sync = _checkpoints_from_s3(self.spec.checkpoint_s3_uri, layouts, root, self._say)
        return layouts

    def _supervise(self, root: Path, layouts: dict[str, HostLayout]) -> JobEnd:
        spec, out = self.spec, self.stream
        assert out is not None
        log_files = self._log_files(root, layouts)
        out.write(
            f"[local_mode] job {spec.job_name}: {spec.instance_count} host(s) x {spec.processes_per_host} "
            f"process(es), distribution {spec.distribution.value}; logs in {next(iter(log_files.values())).parent}\n"
        )
        crowded = oversubscription_warning(spec.instance_count * spec.processes_per_host, usable_cores())
        if crowded:
            out.write(f"[local_mode] warning: {crowded}\n")
        out.flush()
        config = spec.distribution_config
        job = LocalCluster(tuple(spec.hosts), spec.processes_per_host, host_addresses(spec.instance_count), config)
        roots = {host: layout.root for host, layout in layouts.items()}
        with config.strategy.local_launch(job) as launch, host_views(roots, root / "views", self._say) as views:
            if launch.note:
                self._say(launch.note)
            # One folder for the whole job where smddp_compat's stall watchdog of each rank publishes its state,
            # so a stall report names the ranks that are missing (SMDDP_STALL_TIMEOUT_SECONDS via --env enables it).
            stall_dir = root / "stall"
            stall_dir.mkdir(exist_ok=True)
            specs = [
                dataclasses.replace(s, console_hides=tensorflow_log_filter(s.env, show=self.show_tf_logs))
                for s in (_process_spec(spec, plan, layouts[plan.host], self._host_envs[plan.host], log_files,
                                        stall_dir) for plan in launch.plans)
            ]
            # Each host's processes in its own view of /opt/ml (none: this machine's, said above).
            specs = [dataclasses.replace(s, enter=views[s.host].entering(s.argv, s.env, s.cwd)) if s.host in views
                     else s for s in specs]
            failure_files = {s.label: layouts[s.host].failure_file for s in specs}
            group_runner: Any = run_process_group
            if launch.mpi:
                group_runner = functools.partial(run_mpi_group, console_hides=specs[0].console_hides)
            self._training()
            group = group_runner(
                specs, timeout=spec.max_run, grace=self.grace, stream=out,
                failure_reason=lambda failed: read_failure_reason(failure_files[failed.label]),
                remove_if_killed=[] if self._keep_root else [str(root)],  # this process killed outright
                own_network=launch.own_network, stop=self.control.stop_requested,
            )
        reason = _with_script_error(group, failure_files) or None
        if group.ok:
            status, secondary = COMPLETED, None
        elif group.timed_out:
            status, secondary = STOPPED, "MaxRuntimeExceeded"
            reason = f"MaxRuntimeExceeded: {reason} (max_run={spec.max_run:g} s)"
        else:
            status, secondary = (STOPPED if group.interrupted is not None else FAILED), None
        details = {
            "duration": group.duration,
            "failed_label": group.failed.spec.label if group.failed is not None else None,
            "processes": tuple(group.results),
        }
        return JobEnd(status, secondary, group.exit_code, reason, details)

    def _extras(self, end: JobEnd) -> dict[str, Any]:
        return {"request_params": self.spec.request_params(INSTANCE_TYPE),
                "arn": contract.training_job_arn(self.region, self.job_name)}

    def _after_end(self, layouts: dict[str, HostLayout], end: JobEnd) -> None:
        """Keeps the checkpoints (an upload that failed keeps the work tree) and the first host's TensorBoard
        folder, for the summary."""
        assert self.stream is not None
        if self._checkpoint_sync is not None:
            kept, safe = _stored_checkpoints(self._checkpoint_sync, layouts)
        else:
            assert self._checkpoints is not None
            kept, safe = _kept_checkpoints(self.spec, self.destination, self._checkpoints, self.stream)
        self._keep_root = self._keep_root or not safe
        summaries = _kept_tensorboard(next(iter(layouts.values())), self.destination, self.stream)
        self._kept = [line for line in (kept, summaries) if line]

    def run(self) -> JobResult:
        """Runs the job (:meth:`JobLifecycle.run`) and prints its summary."""
        self._kept = []
        result = super().run()
        assert self.stream is not None
        self.stream.write("\n".join([result.summary(), *self._kept]) + "\n")
        self.stream.flush()
        return result


def run(
    spec: JobSpec, *, stream: IO[str] | None = None, grace: float = _GRACE_SECONDS, show_tf_logs: bool = False,
    control: JobControl | None = None,
) -> JobResult:
    """Runs a training job on this machine as SageMaker would run it on H hosts of P processes.

    Args:
        spec: The job (validated when it was built).
        stream: Where the processes' prefixed output and the summary go (``sys.stdout`` by default).
        grace: Seconds between SIGTERM and SIGKILL when the processes are stopped.
        show_tf_logs: Also show TensorFlow's C++ log lines in ``stream`` (by default they go to the per-host log
            files only, unless the job's environment sets ``TF_CPP_MIN_LOG_LEVEL``).
        control: The job's handle for a caller in another thread (a tuning job): a stop that ends the job
            ``Stopped`` as StopTrainingJob does, and a listener of its metrics.

    Returns:
        The job's result; it does not raise when the job fails (see :meth:`JobResult.raise_for_status`).

    Raises:
        ConfigurationError: The job's name is already taken at the output path (nothing was started).
        ChannelError: A channel could not be fetched (nothing was started).
        smddp_compat.errors.LaunchError: A process could not be started (the others were stopped).
    """
    out: IO[str] = ConsoleStream(stream if stream is not None else sys.stdout)  # type: ignore[assignment]
    return ProcessJob(spec, out, grace, show_tf_logs, control).run()


# What sagemaker-training's output watcher looks for to start the ErrorMessage of a failed script (process.watch,
# _PYTHON_ERRORS_ and _MPI_ERRORS_): Python's exceptions, TensorFlow's errors it lists, and mpirun's own.
_ERROR_NAMES = tuple(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, Exception) and not issubclass(value, Warning)
) + ("ResourceExhaustedError", "OutOfRangeError", "InvalidArgumentError", "mpirun.real", "ORTE")
_ERROR_TAIL_LINES = 40  # how far back from the end of the log a failed script's error is looked for
_ERROR_FALLBACK_LINES = 10  # the last lines taken when none of them names an error


def _script_error_message(log_path: Path) -> str:
    """The ErrorMessage the training toolkit would give for a script that failed: the end of its output from the
    first line that names an error (sagemaker-training's rule: every line from there on, each once), or its last
    lines when none does."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 64 * 1024))
            tail = handle.read().decode("utf-8", "replace").splitlines()[-_ERROR_TAIL_LINES:]
    except OSError:
        return ""
    lines = [line.strip(" :") for line in tail if line.strip(" :")]
    first = next((i for i, line in enumerate(lines) if any(name in line for name in _ERROR_NAMES)), None)
    chosen = lines[first:] if first is not None else lines[-_ERROR_FALLBACK_LINES:]
    return "\n".join(dict.fromkeys(chosen))


def _with_script_error(group: Any, failure_files: Mapping[str, Path]) -> str:
    """The group's failure reason; when the failed process wrote no failure file, with what sagemaker-training
    writes to it for a script that fails (``ExecuteUserScriptError``: exit code, the end of the script's output,
    its command: errors.py's ``_CalledProcessError``), so that a script that never ran (a SyntaxError, an import
    that fails) is still explained."""
    failed = group.failed
    if failed is None or failed.returncode is None or failed.spec.label not in failure_files:
        return group.reason
    if read_failure_reason(failure_files[failed.spec.label]) is not None or failed.spec.log_path is None:
        return group.reason
    message = _script_error_message(Path(failed.spec.log_path))
    script_error = (
        f'ExecuteUserScriptError:\nExitCode {failed.returncode}\nErrorMessage "{message}"\n'
        f'Command "{" ".join(failed.spec.argv)}"'
    )
    plain = describe_failure(failed.spec, failed.returncode, None)
    return group.reason.replace(plain, describe_failure(failed.spec, failed.returncode, script_error), 1)


def _checkpoint_folder(spec: JobSpec, destination: Path | S3Location, root: Path) -> Path:
    """The folder every host shares as its ``checkpoints``: ``checkpoint_path`` when given, else one kept with the
    job's output, ``<output>/<job>/checkpoints`` (for an ``s3://`` output, a folder of the job's work tree, uploaded
    there at the end), so that checkpoints are never thrown away and a second run can resume from them."""
    if spec.checkpoint_path is not None:
        return Path(spec.checkpoint_path)
    if isinstance(destination, Path):
        return destination / contract.CHECKPOINTS_DIR
    return root / contract.CHECKPOINTS_DIR


def _kept_checkpoints(
    spec: JobSpec, destination: Path | S3Location, folder: Path, out: IO[str]
) -> tuple[str | None, bool]:
    """The summary's line on where the job's checkpoints are (None when it wrote none), and whether they are safe
    (False: their upload to an ``s3://`` output failed, so the work tree holding them must be kept)."""
    if not any(True for _ in iter_regular_files(folder)):
        if spec.checkpoint_path is None:
            with contextlib.suppress(OSError):
                folder.rmdir()  # nothing written: no empty folder left beside the job's results
        return None, True
    if spec.checkpoint_path is not None or isinstance(destination, Path):
        return f"  checkpoints: {folder} (to resume from them: --checkpoint-dir {folder})", True
    target = destination.child(contract.CHECKPOINTS_DIR)
    sync = FolderSync(S3Target(target, make_s3_client()), what="checkpoints", mirror_deletions=False,
                      say=lambda message: out.write(f"[local_mode] {message}\n"))
    if sync.sync([folder]):
        return f"  checkpoints: {target.uri}", True
    return f"  checkpoints: not all uploaded to {target.uri}; kept in {folder}", False


def _checkpoints_from_s3(
    uri: str, layouts: Mapping[str, HostLayout], root: Path, say: Callable[[str], None]
) -> FolderSync:
    """``checkpoint_s3_uri`` at the start, as SageMaker fills ``CheckpointConfig.LocalPath``: every host's own
    checkpoints folder gets the objects under the prefix (none: every host starts empty). Returns the sync that
    stores them back at the end.

    Raises:
        ConfigurationError: The prefix could not be read (no such bucket, no access, no endpoint).
    """
    sync = FolderSync(S3Target(parse_s3_uri(uri, "checkpoint_s3_uri"), make_s3_client()), what="checkpoints",
                      mirror_deletions=True, say=say)
    try:
        count = sync.fill([layout.checkpoints_dir for layout in layouts.values()], root / "checkpoints-from-s3")
    except ChannelError as exc:
        raise ConfigurationError("checkpoint_s3_uri", uri, f"could not be read ({exc})",
                                 "create the bucket, or check that this machine's AWS settings reach it") from exc
    if count:
        say(f"checkpoints: resuming from {uri} ({count} file(s) in every host's checkpoint folder)")
    return sync


def _stored_checkpoints(sync: FolderSync, layouts: Mapping[str, HostLayout]) -> tuple[str | None, bool]:
    """``checkpoint_s3_uri`` at the end (a stop and a failure too): each host's folder stored in the prefix, what it
    deleted deleted there. Returns the summary's line and whether every copy happened (False keeps the work tree)."""
    if sync.sync([layout.checkpoints_dir for layout in layouts.values()]):
        return f"  checkpoints: {sync.target.uri}", True
    return f"  checkpoints: not all stored in {sync.target.uri}; the hosts' folders are kept in the work tree", False


def _kept_tensorboard(layout: HostLayout, destination: Path | S3Location, out: IO[str]) -> str | None:
    """Keeps the first host's TensorBoard folder (rank 0 / the chief runs there) as ``<output>/<job>/tensorboard/``,
    whatever the job's end (the curves explain a failure too), and returns the summary's line about it (None when
    the job wrote none). As the twin syncs ``TensorBoardOutputConfig.LocalPath``: one way, regular files only, a copy
    that fails is said and the job's result stands. A folder the job replaced with a link is not followed."""
    folder = layout.tensorboard_dir
    if folder.is_symlink() or not any(True for _ in iter_regular_files(folder)):
        return None
    where = destination.child(_TENSORBOARD) if isinstance(destination, S3Location) else destination / _TENSORBOARD
    target = sync_target(where, make_s3_client() if isinstance(where, S3Location) else None)
    sync = FolderSync(target, what="tensorboard", mirror_deletions=False,
                      say=lambda message: out.write(f"[local_mode] {message}\n"))
    complete = "" if sync.sync([folder]) else " (not every file could be copied: see above)"
    view = f"; view: tensorboard --logdir {target.uri}" if isinstance(where, Path) else ""
    return f"  tensorboard: {target.uri}{complete}{view}"


def _prepare_hosts(
    spec: JobSpec, root: Path, checkpoints: Path | None, region: str, own_folders: list[Path],
    tracking: Mapping[str, str],
) -> tuple[dict[str, HostLayout], dict[str, dict[str, Mapping[str, str]]]]:
    """Fetches the channels, builds every host's tree (``checkpoints`` shared by all, or each host's own for a
    ``checkpoint_s3_uri`` (None), each channel the host's own copy) and the host's layers of its processes'
    environment (:func:`~local_mode.environment.process_environment`; ``tracking``, the job's MLflow run, with the
    job's own environment, as SageMaker puts it in the container's)."""
    assert spec.job_name is not None
    staged = stage_channels(spec.channels, root / "channels")
    hosts = spec.hosts
    addresses = host_addresses(len(hosts))
    data_config = input_data_config(list(spec.channels))
    num_cpus = os.cpu_count() or 1
    num_gpus = _count_gpus()
    base = inherited_environment(os.environ)
    layouts: dict[str, HostLayout] = {}
    envs: dict[str, dict[str, Mapping[str, str]]] = {}
    for host in hosts:
        host_root = root / host
        framework: dict[str, Any] = {
            contract.PROGRAM: spec.entry_point_name,
            contract.SUBMIT_DIRECTORY: str(host_root / contract.CODE_DIR),
            contract.CONTAINER_LOG_LEVEL: LOG_LEVEL,
            contract.JOB_NAME: spec.job_name,
            contract.REGION: region,
            **spec.distribution_config.strategy.framework_parameters(spec.distribution_config, INSTANCE_TYPE),
            # What the toolkit consumes itself (a tuning trial's objective metric): in hyperparameters.json, never in
            # the script's arguments or SM_HPS, as sagemaker-training keeps them.
            **contract.split_toolkit_parameters(spec.hyperparameters)[1],
        }
        resource = resource_config(hosts, host, INSTANCE_TYPE, NETWORK_INTERFACE)
        hyperparameters = HostLayout(host, host_root).hyperparameters_here(
            contract.split_toolkit_parameters(spec.hyperparameters)[0])
        layout = create_host_tree(
            host_root,
            host,
            encoded_hyperparameters=encode_hyperparameters({**hyperparameters, **framework}),
            resource=resource,
            data_config=data_config,
            checkpoint_path=None if checkpoints is None else str(checkpoints),
            # As SageMaker writes it for a job with CheckpointConfig (LocalPath: this host's folder).
            checkpoint_config=None if spec.checkpoint_s3_uri is None else {
                "LocalPath": str(host_root / contract.CHECKPOINTS_DIR), "S3Uri": spec.checkpoint_s3_uri},
            # As SageMaker writes it for a job with TensorBoardOutputConfig: where the scripts put their summaries.
            tensorboard_config={"LocalPath": str(host_root / contract.TENSORBOARD_DIR)},
        )
        _copy_code(spec, layout.code_dir, own_folders)
        layouts[host] = layout
        # The toolkit's variables as the host's script sees them: an MPI job's ranks see the leader's (its paths
        # the host's own), as the toolkit's mpirun exports them.
        toolkit_resource = (resource_config(hosts, hosts[0], INSTANCE_TYPE, NETWORK_INTERFACE)
                            if spec.distribution_config.strategy.ranks_see_the_leaders_environment else resource)
        envs[host] = {
            "inherited": base,
            "job": {**spec.environment, **tracking},
            "training": training_environment(
                layout, resource=toolkit_resource, data_config=data_config, hyperparameters=hyperparameters,
                framework_parameters=framework, num_cpus=num_cpus, num_gpus=num_gpus, job_name=spec.job_name,
            ),
            "platform": platform_environment(layout, job_name=spec.job_name, region=region),
            "hosts": encode_host_addresses(addresses),
        }
    for name, folder in staged.items():
        place_channel(folder, [layouts[host].channel_dir(name) for host in hosts])
    return layouts, envs


def _process_spec(
    spec: JobSpec,
    plan: ProcessPlan,
    layout: HostLayout,
    host_layers: Mapping[str, Mapping[str, str]],
    log_files: Mapping[str, Path],
    stall_dir: Path,
) -> ProcessSpec:
    env = process_environment(
        **host_layers, distribution=plan.env, stall_watchdog=stall_watchdog_env(None, None, str(stall_dir)),
        python_path=[*plan.python_path, str(layout.code_dir), job_startup.startup_path()],
    )
    script_hyperparameters = contract.split_toolkit_parameters(spec.hyperparameters)[0]
    arguments = ARGUMENT_RULES[spec.argument_rule](layout.hyperparameters_here(script_hyperparameters))
    argv = [spec.python, "-m", plan.module] if plan.module else _argv(spec, layout, arguments)
    return ProcessSpec(
        argv=argv,
        env=env,
        label=plan.label,
        cwd=str(layout.code_dir),
        log_path=str(log_files[plan.host]),
        host=plan.host,
        serves=plan.serves,
    )
