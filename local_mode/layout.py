"""Each host's ``/opt/ml`` tree, built under the job's working folder.

On SageMaker every container gets ``/opt/ml`` with the job's configuration files and empty output folders. Here
host ``algo-N`` gets ``<job root>/algo-N/`` with the same layout (the names are :mod:`smddp_compat.contract`'s)::

    input/config/hyperparameters.json   values JSON-encoded, as the SDK writes them
    input/config/resourceconfig.json    current_host, hosts, instance group
    input/config/inputdataconfig.json   one entry per channel
    input/config/checkpointconfig.json  LocalPath and S3Uri, when the job has a CheckpointConfig
    input/config/tensorboardoutputconfig.json  LocalPath, when the job keeps TensorBoard summaries
    input/data/<channel>/               the channel's files
    code/                               the source directory (the script's working directory)
    model/  output/data/  output/intermediate/  output/failure (written by the script on error)  checkpoints/
    output/tensorboard/                 TensorBoard summaries (created by the script that writes them)
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smddp_compat import contract

__all__ = [
    "INSTANCE_GROUP",
    "CHECKPOINT_CONFIG_FILE",
    "HostLayout",
    "resource_config",
    "input_data_config",
    "create_host_tree",
]

INSTANCE_GROUP = "homogeneousCluster"
"""The instance group name SageMaker uses for a job that does not declare groups."""

CHECKPOINT_CONFIG_FILE = f"{contract.INPUT_CONFIG_DIR}/checkpointconfig.json"
"""The job's ``CheckpointConfig`` (``LocalPath``, ``S3Uri``), where SageMaker puts it: AWS's SageMaker Debugger
(``smdebug.core.config_constants``: ``DEFAULT_CHECKPOINT_CONFIG_FILE = "/opt/ml/input/config/checkpointconfig.json"``,
``CHECKPOINT_DIR_KEY = "LocalPath"``) reads the checkpoint folder from it in the training container."""


@dataclass(frozen=True)
class HostLayout:
    """The paths of one host's ``/opt/ml`` tree rooted at ``root``."""

    host: str
    root: Path

    @property
    def input_dir(self) -> Path:
        """``input/``."""
        return self.root / contract.INPUT_DIR

    @property
    def input_config_dir(self) -> Path:
        """``input/config/``."""
        return self.root / contract.INPUT_CONFIG_DIR

    @property
    def input_data_dir(self) -> Path:
        """``input/data/``."""
        return self.root / contract.INPUT_DATA_DIR

    def channel_dir(self, channel: str) -> Path:
        """``input/data/<channel>``."""
        return self.input_data_dir / channel

    @property
    def hyperparameters_file(self) -> Path:
        """``input/config/hyperparameters.json``."""
        return self.root / contract.HYPERPARAMETERS_FILE

    @property
    def resource_config_file(self) -> Path:
        """``input/config/resourceconfig.json``."""
        return self.root / contract.RESOURCE_CONFIG_FILE

    @property
    def input_data_config_file(self) -> Path:
        """``input/config/inputdataconfig.json``."""
        return self.root / contract.INPUT_DATA_CONFIG_FILE

    @property
    def checkpoint_config_file(self) -> Path:
        """``input/config/checkpointconfig.json``."""
        return self.root / CHECKPOINT_CONFIG_FILE

    @property
    def code_dir(self) -> Path:
        """``code/``."""
        return self.root / contract.CODE_DIR

    @property
    def model_dir(self) -> Path:
        """``model/``."""
        return self.root / contract.MODEL_DIR

    @property
    def output_dir(self) -> Path:
        """``output/``."""
        return self.root / contract.OUTPUT_DIR

    @property
    def output_data_dir(self) -> Path:
        """``output/data/``."""
        return self.root / contract.OUTPUT_DATA_DIR

    @property
    def output_intermediate_dir(self) -> Path:
        """``output/intermediate/``."""
        return self.root / contract.OUTPUT_INTERMEDIATE_DIR

    @property
    def failure_file(self) -> Path:
        """``output/failure``: the script writes its failure reason here."""
        return contract.failure_file(self.output_dir)

    @property
    def checkpoints_dir(self) -> Path:
        """``checkpoints/``."""
        return self.root / contract.CHECKPOINTS_DIR

    @property
    def tensorboard_dir(self) -> Path:
        """``output/tensorboard/``: ``TensorBoardOutputConfig.LocalPath``'s default, moved into this tree."""
        return self.root / contract.TENSORBOARD_DIR

    @property
    def tensorboard_config_file(self) -> Path:
        """``input/config/tensorboardoutputconfig.json``: where the container reads ``LocalPath``."""
        return self.root / contract.TENSORBOARD_CONFIG_FILE

    def hyperparameters_here(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """``hyperparameters`` as this host's script gets them: a value naming a path of the container's tree
        (``/opt/ml`` or below, e.g. the SDK's ``model_dir`` ``/opt/ml/model``) names the same path in this tree;
        every other value is kept."""
        return {name: self._here(value) for name, value in hyperparameters.items()}

    def _here(self, value: Any) -> Any:
        if not isinstance(value, str) or not value.startswith(contract.OPT_ML):
            return value
        path = posixpath.normpath(value)
        if path != contract.OPT_ML and not path.startswith(contract.OPT_ML + "/"):
            return value
        return str(self.root / posixpath.relpath(path, contract.OPT_ML))


def resource_config(
    hosts: Sequence[str], current_host: str, instance_type: str, network_interface: str
) -> dict[str, Any]:
    """The content of ``resourceconfig.json`` for ``current_host`` of ``hosts`` (all, in order), with the keys
    SageMaker writes; the process backend reports ``instance_type`` ``local`` and ``network_interface`` ``lo``."""
    return {
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_group_name": INSTANCE_GROUP,
        "hosts": list(hosts),
        "instance_groups": [
            {"instance_group_name": INSTANCE_GROUP, "instance_type": instance_type, "hosts": list(hosts)}
        ],
        "network_interface_name": network_interface,
    }


def input_data_config(channels: Sequence[str]) -> dict[str, dict[str, str]]:
    """The content of ``inputdataconfig.json``: File mode, fully replicated, for each channel."""
    return {
        name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
        for name in channels
    }


def _write_json(path: Path, content: object) -> None:
    path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def create_host_tree(
    root: Path,
    host: str,
    *,
    encoded_hyperparameters: Mapping[str, str],
    resource: Mapping[str, Any],
    data_config: Mapping[str, Any],
    checkpoint_path: str | None = None,
    checkpoint_config: Mapping[str, str] | None = None,
    tensorboard_config: Mapping[str, str] | None = None,
) -> HostLayout:
    """Creates ``root`` as one host's ``/opt/ml`` tree and writes its configuration files: ``hyperparameters.json``
    (``encoded_hyperparameters``: name -> JSON text of the value), ``resourceconfig.json`` (``resource``),
    ``inputdataconfig.json`` (``data_config``) and the optional ones below.

    Args:
        checkpoint_path: A shared folder to link as ``checkpoints`` (created if missing); None for an empty folder.
        checkpoint_config: ``checkpointconfig.json`` content (``LocalPath``, ``S3Uri``); None writes no file, as
            for a job without ``CheckpointConfig``.
        tensorboard_config: ``tensorboardoutputconfig.json`` content (``LocalPath``); None writes no file, as for a
            job without ``TensorBoardOutputConfig``.

    Raises:
        FileExistsError: ``root`` already exists.
    """
    layout = HostLayout(host=host, root=Path(root))
    layout.root.mkdir(parents=True, exist_ok=False)
    for folder in (
        layout.input_config_dir,
        layout.input_data_dir,
        layout.code_dir,
        layout.model_dir,
        layout.output_data_dir,
        layout.output_intermediate_dir,
    ):
        folder.mkdir(parents=True, exist_ok=True)
    if checkpoint_path is None:
        layout.checkpoints_dir.mkdir()
    else:
        os.makedirs(checkpoint_path, exist_ok=True)
        layout.checkpoints_dir.symlink_to(checkpoint_path, target_is_directory=True)
    _write_json(layout.hyperparameters_file, dict(encoded_hyperparameters))
    _write_json(layout.resource_config_file, dict(resource))
    _write_json(layout.input_data_config_file, dict(data_config))
    if checkpoint_config is not None:
        _write_json(layout.checkpoint_config_file, dict(checkpoint_config))
    if tensorboard_config is not None:
        _write_json(layout.tensorboard_config_file, dict(tensorboard_config))
    return layout
