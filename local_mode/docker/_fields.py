"""Every CreateTrainingJob member and what the twin does with it: reproduced, warned about, or refused.

Nothing in a request is ignored silently. :data:`MEMBERS` holds one :class:`Member` for each member of
CreateTrainingJob's input in SageMaker's API model (botocore's ``sagemaker`` service definition, the shapes
:mod:`~smddp_compat.local_mode.api_model` checks a request against), by its path (``ResourceConfig.
VolumeSizeInGB``, ``InputDataConfig[].ShuffleConfig``). A structure the twin takes as a whole (``VpcConfig``,
``DebugHookConfig``) has one entry; the structures it reads member by member (``AlgorithmSpecification``,
``ResourceConfig``, a channel) have one entry per member. A test walks botocore's model and fails on a member this
table does not know, so a member SageMaker gains cannot pass unseen.

For a request, :func:`review` refuses the first member set to something the twin cannot reproduce (naming the
member, the value and the fix) and returns one warning per member set to something the twin does differently
(``<member>: <what differs>``), which the twin prints once at the start and lists in its answer. A member left out,
or set to what asks for nothing (false, 0, an empty string, list or map), is never warned about.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from smddp_compat import contract
from smddp_compat.local_mode.errors import ConfigurationError

__all__ = [
    "Handling",
    "Case",
    "Member",
    "MEMBERS",
    "DEBUG_HOOK_CONFIG_FILE",
    "PROFILER_CONFIG_FILE",
    "config_files",
    "review",
]

DEBUG_HOOK_CONFIG_FILE = "debughookconfig.json"
"""``DebugHookConfig`` as the container reads it, in ``/opt/ml/input/config/``: the hook of ``smdebug`` (AWS's
SageMaker Debugger library) reads ``/opt/ml/input/config/debughookconfig.json`` by default ("the default path that
SageMaker writes the hook configuration to", smdebug's API documentation; ``config_constants.py``)."""

PROFILER_CONFIG_FILE = "profilerconfig.json"
"""``ProfilerConfig`` as the container reads it, in ``/opt/ml/input/config/`` (smdebug's
``profiler_constants.CONFIG_PATH_DEFAULT``; its parser reads the request's members ``ProfilingParameters`` and
``DisableProfiler``)."""


class Handling(str, Enum):
    """What the twin does with a member that is set."""

    REPRODUCED = "reproduced"
    WARNED = "warned"
    REFUSED = "refused"


Condition = Callable[[Any, Mapping[str, Any]], bool]
"""A test of a member's value (and of the whole request, for members that depend on others)."""


@dataclass(frozen=True)
class Case:
    """A value of a member that the twin handles otherwise than the member's usual handling.

    Attributes:
        applies: Whether the value (in this request) is this case.
        handling: What the twin does then.
        note: Reproduced: how; warned: what differs; refused: the problem.
        fix: For a refusal: what to do instead.
    """

    applies: Condition
    handling: Handling
    note: str
    fix: str = ""


@dataclass(frozen=True)
class Member:
    """One CreateTrainingJob member (or a structure taken as a whole) and what the twin does with it.

    Attributes:
        path: The member's path: ``.`` between members, ``[]`` for a list's items (``InputDataConfig[].InputMode``).
        handling: What the twin does with the member when it is set.
        note: Reproduced: how; warned: what differs from SageMaker; refused: the problem.
        fix: For a refusal: what to do instead.
        cases: Values handled otherwise, the first that applies wins (``TrainingInputMode``: ``File`` reproduced,
            ``FastFile`` warned, ``Pipe`` refused).
    """

    path: str
    handling: Handling
    note: str
    fix: str = ""
    cases: tuple[Case, ...] = ()

    def judge(self, value: Any, params: Mapping[str, Any]) -> tuple[Handling, str, str]:
        """This member's handling, note and fix for ``value`` in the request ``params``."""
        for case in self.cases:
            if case.applies(value, params):
                return case.handling, case.note, case.fix
        return self.handling, self.note, self.fix


_R, _W, _X = Handling.REPRODUCED, Handling.WARNED, Handling.REFUSED


def _equals(*values: Any) -> Condition:
    return lambda value, _params: value in values


def _flag_off(name: str) -> Condition:
    """A structure whose one switch ``name`` is off (``{"EnableRemoteDebug": false}`` asks for nothing)."""
    return lambda value, _params: isinstance(value, Mapping) and not value.get(name)


def _flag_on(name: str) -> Condition:
    return lambda value, _params: isinstance(value, Mapping) and value.get(name) is True


def _without_entrypoint(_value: Any, params: Mapping[str, Any]) -> bool:
    return not (params.get("AlgorithmSpecification") or {}).get("ContainerEntrypoint")


def _hyperparameter_in_s3(name: str) -> Condition:
    """Network isolation with the hyperparameter ``name`` an ``s3://`` URI (JSON-encoded as the SDK sends it)."""

    def applies(value: Any, params: Mapping[str, Any]) -> bool:
        raw = (params.get("HyperParameters") or {}).get(name, "")
        try:
            decoded = json.loads(raw)
        except (TypeError, ValueError, RecursionError):
            decoded = raw
        return value is True and isinstance(decoded, str) and decoded.startswith("s3://")

    return applies


_FILE_MODES = (
    Case(_equals("File"), _R, "File mode: every object downloaded into /opt/ml/input/data/<channel> before the start"),
    Case(_equals("FastFile"), _W, "FastFile is served as File: every object is downloaded before the script starts "
         "(SageMaker streams each on its first read)"),
    Case(_equals("Pipe"), _X, "is not reproduced by the twin", "use 'File' (FastFile is served as File)"),
)

_NOT_ASKED = "asks for nothing"

#: Every member of CreateTrainingJob's input, in the order of SageMaker's API model.
MEMBERS: tuple[Member, ...] = (
    Member("TrainingJobName", _R, "the job's name; a replay runs under a name of its own (--job-name)"),
    Member("HyperParameters", _R, "written verbatim to /opt/ml/input/config/hyperparameters.json"),
    Member("AlgorithmSpecification.TrainingImage", _R, "the image, taken from this machine's Docker engine"),
    Member("AlgorithmSpecification.AlgorithmName", _X,
           "names an algorithm resource (AWS Marketplace or your account), which the twin cannot fetch",
           "give AlgorithmSpecification.TrainingImage instead (e.g. the tag `smddp image` prints)"),
    Member("AlgorithmSpecification.TrainingInputMode", _R, "File mode", cases=_FILE_MODES),
    Member("AlgorithmSpecification.MetricDefinitions", _R,
           "each regular expression run over the logs: FinalMetricDataList holds each metric's last value"),
    Member("AlgorithmSpecification.EnableSageMakerMetricsTimeSeries", _W, "no time series is published (no "
           "CloudWatch)"),
    Member("AlgorithmSpecification.ContainerEntrypoint", _R,
           "replaces the image's entry point (docker run --entrypoint, its other items as the first arguments)"),
    Member("AlgorithmSpecification.ContainerArguments", _R, "given after ContainerEntrypoint", cases=(
        Case(_without_entrypoint, _W,
             "given without ContainerEntrypoint: the twin runs `train` followed by these arguments (the image's "
             "entry point, if any, receives both); SageMaker's documentation does not say whether they follow "
             "`train` or replace it: give ContainerEntrypoint too to be sure of the command"),
    )),
    Member("AlgorithmSpecification.TrainingImageConfig", _W,
           "not used: the image is taken from this machine's Docker engine, not pulled through a VPC or with the "
           "registry credentials it names"),
    Member("RoleArn", _W,
           "not assumed: the containers get throwaway credentials that work only with the twin's own S3, which "
           "allows every call; the role's permissions are not checked (the twin itself reads and writes the "
           "request's S3 with your credentials)", cases=(
               Case(lambda _value, params: params.get("EnableNetworkIsolation") is True, _W,
                    "not assumed: the twin reads and writes the request's S3 with your credentials; the containers "
                    "get none (network isolation), as on SageMaker"),
           )),
    Member("InputDataConfig[].ChannelName", _R, "/opt/ml/input/data/<name>, SM_CHANNEL_<NAME>, inputdataconfig.json"),
    Member("InputDataConfig[].DataSource.S3DataSource.S3DataType", _R, "S3Prefix", cases=(
        Case(_equals("ManifestFile", "AugmentedManifestFile", "Converse"), _X, "is not reproduced by the twin",
             "use 'S3Prefix'"),
    )),
    Member("InputDataConfig[].DataSource.S3DataSource.S3Uri", _R,
           "downloaded as File mode lays it out; the script also finds it, read-only, in the twin's S3"),
    Member("InputDataConfig[].DataSource.S3DataSource.S3DataDistributionType", _R,
           "FullyReplicated: every host gets every object; ShardedByS3Key: the objects are split between hosts"),
    Member("InputDataConfig[].DataSource.S3DataSource.AttributeNames", _X,
           "is only used with an AugmentedManifestFile, which the twin does not reproduce", "leave it out"),
    Member("InputDataConfig[].DataSource.S3DataSource.InstanceGroupNames", _X,
           "heterogeneous clusters are not reproduced by the twin", "leave it out; use InstanceType and InstanceCount"),
    Member("InputDataConfig[].DataSource.S3DataSource.ModelAccessConfig", _W,
           "not checked: the twin downloads the channel whether or not the model's end-user license is accepted"),
    Member("InputDataConfig[].DataSource.S3DataSource.HubAccessConfig", _W,
           "not used: the channel is read from its S3Uri with your credentials"),
    Member("InputDataConfig[].DataSource.FileSystemDataSource", _X,
           "EFS and FSx for Lustre channels are not reproduced by the twin",
           "the twin serves S3 channels only; upload the data to S3 and use S3DataSource"),
    Member("InputDataConfig[].DataSource.DatasetSource", _X, "hub dataset channels are not reproduced by the twin",
           "the twin serves S3 channels only; upload the data to S3 and use S3DataSource"),
    Member("InputDataConfig[].ContentType", _R, "written to inputdataconfig.json"),
    Member("InputDataConfig[].CompressionType", _R, "None", cases=(
        Case(_equals("Gzip"), _X, "is only used by Pipe mode", "leave it out (File mode)"),
    )),
    Member("InputDataConfig[].RecordWrapperType", _R, "None: the objects as they are", cases=(
        Case(_equals("RecordIO"), _X, "wrapping each object in a RecordIO record is not reproduced by the twin",
             "leave it out (the objects are given as they are)"),
    )),
    Member("InputDataConfig[].InputMode", _R, "File mode", cases=_FILE_MODES),
    Member("InputDataConfig[].ShuffleConfig", _W,
           "not reproduced: ShardedByS3Key splits the objects in the order of their keys, unshuffled"),
    Member("OutputDataConfig.KmsKeyId", _W, "not used: the artifacts are stored without this key's encryption"),
    Member("OutputDataConfig.S3OutputPath", _R,
           "the artifacts go to <output>/<job>/output/ (a replay's --output, default ./smddp_local_output)"),
    Member("OutputDataConfig.CompressionType", _R, "GZIP: model.tar.gz; NONE: the model's files"),
    Member("ResourceConfig.InstanceType", _W,
           "its vCPUs, memory and network are not reproduced: every host shares this machine's cores and memory "
           "(a GPU type runs on the CPU, with stand-in GPUs)"),
    Member("ResourceConfig.InstanceCount", _R, "one container per host, algo-1 .. algo-N"),
    Member("ResourceConfig.VolumeSizeInGB", _W, "not reproduced: the hosts write to this machine's disk, with no "
           "size limit of their own"),
    Member("ResourceConfig.VolumeKmsKeyId", _W, "not used: the hosts' storage is not encrypted with this key"),
    Member("ResourceConfig.KeepAlivePeriodInSeconds", _W, "no warm pool: every job starts fresh containers"),
    Member("ResourceConfig.InstanceGroups", _X, "heterogeneous clusters are not reproduced by the twin",
           "use InstanceType and InstanceCount"),
    Member("ResourceConfig.TrainingPlanArn", _W, "not used: the job runs at once, on this machine"),
    Member("ResourceConfig.InstancePlacementConfig", _W, "not used: every host runs on this machine"),
    Member("ResourceConfig.InstancePreferences", _W, "not used: the twin runs InstanceType x InstanceCount"),
    Member("ResourceConfig.SelectedInstanceType", _W, "not used: the twin runs InstanceType"),
    Member("ResourceConfig.SelectedInstanceCount", _W, "not used: the twin runs InstanceCount"),
    Member("VpcConfig", _W,
           "not reproduced: the hosts run on an internal network of the job's own (no route out), not in these "
           "subnets and security groups"),
    Member("StoppingCondition.MaxRuntimeInSeconds", _R, "SIGTERM, SIGKILL after 120 s: Stopped / MaxRuntimeExceeded"),
    Member("StoppingCondition.MaxWaitTimeInSeconds", _R, "a spot job's bound on its waits and runs together"),
    Member("StoppingCondition.MaxPendingTimeInSeconds", _W, "not reproduced: the job starts at once (no capacity "
           "to wait for)"),
    Member("Tags", _W, "not applied: a replay creates no SageMaker resource to tag"),
    Member("EnableNetworkIsolation", _R,
           "no S3 service, no credentials and no route out in the containers; the hosts reach one another", cases=(
               Case(_hyperparameter_in_s3(contract.SUBMIT_DIRECTORY), _W,
                    "the containers cannot download the s3:// sagemaker_submit_directory (no S3, no credentials), "
                    "so the job fails as it would on SageMaker; the SageMaker SDK hands the source over as a 'code' "
                    "channel under network isolation (sagemaker_submit_directory "
                    "/opt/ml/input/data/code/sourcedir.tar.gz)"),
               Case(_hyperparameter_in_s3("model_dir"), _W,
                    "AWS's TensorFlow container asks S3 for the s3:// model_dir bucket's region at the start, which "
                    "fails without credentials, here as on SageMaker (aws/sagemaker-python-sdk#2702): create the "
                    "TensorFlow estimator with model_dir=False"),
           )),
    Member("EnableInterContainerTrafficEncryption", _W,
           "not reproduced: the hosts' traffic is not encrypted (and not slowed down as encryption slows it)"),
    Member("EnableManagedSpotTraining", _R, "spot training, with MaxWaitTimeInSeconds"),
    Member("CheckpointConfig", _R, "read at the start, synced while the job runs (see the twin's documentation)"),
    Member("DebugHookConfig", _W,
           f"written to /opt/ml/input/config/{DEBUG_HOOK_CONFIG_FILE} as SageMaker writes it, but what the hook "
           "saves under LocalPath (default /opt/ml/output/tensors) is not uploaded to S3OutputPath"),
    Member("DebugRuleConfigurations", _W,
           "not evaluated: SageMaker runs each rule in a processing job of its own, which the twin does not start"),
    Member("TensorBoardOutputConfig", _R, "LocalPath synced to S3OutputPath while the job runs"),
    Member("ExperimentConfig", _W, "not recorded: no experiment, trial or run is created or updated"),
    Member("ProfilerConfig", _W,
           f"written to /opt/ml/input/config/{PROFILER_CONFIG_FILE} as SageMaker writes it, but what the profiler "
           "saves (default /opt/ml/output/profiler) is not uploaded to S3OutputPath", cases=(
               Case(_flag_on("DisableProfiler"), _R,
                    f"the profiler is off; written to /opt/ml/input/config/{PROFILER_CONFIG_FILE}"),
           )),
    Member("ProfilerRuleConfigurations", _W,
           "not evaluated: SageMaker runs each rule in a processing job of its own, which the twin does not start"),
    Member("Environment", _R,
           "given to every container as it is (SageMaker's limits checked: at most 100 entries, names matching "
           "[a-zA-Z_][a-zA-Z0-9_]*, names and values of at most 512 characters)"),
    Member("RetryStrategy", _W,
           "not reproduced: SageMaker retries a job only after its own internal errors; the twin never retries"),
    Member("RemoteDebugConfig", _W, "not reproduced: no remote debugging session (SSM) can reach the containers",
           cases=(Case(_flag_off("EnableRemoteDebug"), _R, _NOT_ASKED),)),
    Member("InfraCheckConfig", _W, "not reproduced: no infrastructure health check runs before the job",
           cases=(Case(_flag_off("EnableInfraCheck"), _R, _NOT_ASKED),)),
    Member("SessionChainingConfig", _W, "not reproduced: the containers get no role session, so no session tags",
           cases=(Case(_flag_off("EnableSessionTagChaining"), _R, _NOT_ASKED),)),
    Member("ServerlessJobConfig", _X, "serverless model customization jobs run SageMaker's own recipes, which the "
           "twin does not have", "run this job on SageMaker; the twin replays jobs of a training image"),
    Member("MlflowConfig", _W, "not connected: SageMaker's managed MLflow (MlflowResourceArn) is not reached from "
           "here, so nothing is logged to it; replay with --mlflow URI to track the job in a tracking server of yours "
           "under the request's experiment and run name"),
    Member("ModelPackageConfig", _W, "not registered: no model package is created from the job's model"),
)

_BY_PATH = {member.path: member for member in MEMBERS}


def _asks_for_nothing(value: Any) -> bool:
    return value is None or value is False or value == 0 or value in ("", [], {})


def _set_members(value: Any, path: str, shown: str) -> Iterator[tuple[Member, str, Any]]:
    """The request's set members: (its table entry, its path with list indexes, its value); a structure without an
    entry of its own is entered, its members walked."""
    member = _BY_PATH.get(path)
    if member is not None:
        yield member, shown, value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _set_members(item, f"{path}.{name}" if path else str(name), f"{shown}.{name}" if shown else
                                    str(name))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _set_members(item, f"{path}[]", f"{shown}[{index}]")
    else:  # a member SageMaker's model has and this table does not (a newer botocore): said, never dropped
        yield Member(path, Handling.WARNED, "not known to the twin: whatever SageMaker does with it is not "
                     "reproduced"), shown, value


def review(params: Mapping[str, Any]) -> list[str]:
    """What the twin does with each member of a request (checked against SageMaker's API model already).

    Args:
        params: The CreateTrainingJob parameters.

    Returns:
        One warning per member the twin reproduces differently: ``<member> = <value>: <what differs>`` (the value
        shown when it is a number, a string or a boolean).

    Raises:
        ConfigurationError: The first member set to something the twin cannot reproduce, with the fix.
    """
    warnings: list[str] = []
    for member, shown, value in _set_members(params, "", ""):
        if _asks_for_nothing(value):
            continue
        handling, note, fix = member.judge(value, params)
        if handling is Handling.REFUSED:
            raise ConfigurationError(shown, value, note, fix)
        if handling is Handling.WARNED:
            scalar = isinstance(value, (str, int, float, bool))
            warnings.append(f"{shown} = {value!r}: {note}" if scalar else f"{shown}: {note}")
    return warnings


def config_files(params: Mapping[str, Any]) -> dict[str, Any]:
    """The files SageMaker writes in ``/opt/ml/input/config/`` for the Debugger and the profiler: file name -> its
    JSON content (the request's structure as it is), for the members the request sets."""
    files: dict[str, Any] = {}
    for member, name in (("DebugHookConfig", DEBUG_HOOK_CONFIG_FILE), ("ProfilerConfig", PROFILER_CONFIG_FILE)):
        if params.get(member):
            files[name] = params[member]
    return files
