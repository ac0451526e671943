"""Where a training script reads and writes, as the SageMaker training container tells it (``SM_*`` variables, with
folders under ``./sm_local`` for a plain run): `TrainingEnv`. No TensorFlow here; see
docs/training-scripts.md#what-a-run-reads-and-writes.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from smddp_compat import contract
from smddp_compat.cluster import Cluster
from smddp_compat.entry_points.common.errors import ClusterConfigError, EntryPointError

__all__ = ["TrainingEnv", "resolve_tensorboard_dir", "add_output_dir_arguments", "local_root"]

_OPT_ML = Path(contract.OPT_ML)


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def local_root(environ: Mapping[str, str]) -> Path:
    """The folder a plain ``python script.py`` run (no ``SM_*`` variables) writes under: ``$SMDDP_LOCAL_ROOT``,
    else ``./sm_local``."""
    return Path(environ.get("SMDDP_LOCAL_ROOT") or Path.cwd() / "sm_local")


def resolve_tensorboard_dir(
    environ: Mapping[str, str], output_dir: str | os.PathLike[str], explicit: str | os.PathLike[str] | None = None
) -> Path:
    """Where TensorBoard summaries go: `explicit` (``--tensorboard-dir``) when given and not empty, else the job's
    ``TensorBoardOutputConfig.LocalPath`` (the file ``$TENSORBOARD_CONFIG_FILE_PATH`` names, or
    ``/opt/ml/input/config/tensorboardoutputconfig.json``), else ``<output_dir>/tensorboard``; the reasons:
    docs/training-scripts.md#tensorboard-summaries.

    Raises:
        EntryPointError: The configuration file exists but is not a JSON object with a string ``LocalPath``.
    """
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    config_file = Path(environ.get(contract.TENSORBOARD_CONFIG_FILE_PATH) or _OPT_ML / contract.TENSORBOARD_CONFIG_FILE)
    if config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EntryPointError(f"cannot read the TensorBoard configuration {str(config_file)!r}: {exc}; it should "
                                  'be {"LocalPath": "<folder>"} (or pass --tensorboard-dir DIR).') from exc
        local_path = config.get("LocalPath", contract.DEFAULT_TENSORBOARD_DIR) if isinstance(config, dict) else None
        if not isinstance(local_path, str) or not local_path:
            raise EntryPointError(f"the TensorBoard configuration {str(config_file)!r} holds {config!r}, not "
                                  '{"LocalPath": "<folder>"}; fix the file or pass --tensorboard-dir DIR.')
        return Path(local_path)
    return Path(output_dir) / Path(contract.TENSORBOARD_DIR).relative_to(contract.OUTPUT_DIR)


def add_output_dir_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``--checkpoint-dir`` and ``--tensorboard-dir`` hyperparameters (read by `TrainingEnv.from_environ`
    and `resolve_tensorboard_dir`) to a script's parser."""
    parser.add_argument("--checkpoint-dir", default=None,
                        help="default: /opt/ml/checkpoints if writable, else <output dir>/checkpoints")
    parser.add_argument("--tensorboard-dir", default=None,
                        help="TensorBoard summaries (rank 0 / the chief); default: the job's "
                             "TensorBoardOutputConfig.LocalPath, else <output dir>/tensorboard "
                             f"({contract.DEFAULT_TENSORBOARD_DIR} on SageMaker)")


@dataclass(frozen=True)
class TrainingEnv:
    """Where a training script reads and writes, and which cluster it is part of.

    Attributes:
        model_dir: The final model goes here (rank 0 / chief only).
        output_data_dir: Extra outputs (plots, metrics, digests).
        output_dir: Holds the ``failure`` file.
        checkpoint_dir: Checkpoints are written to and resumed from here.
        channels: Data channels, lower-case name -> directory.
        hosts: Host names of the cluster, in SageMaker's order (algo-1, algo-2, ...).
        host_addresses: Host name -> network address (from ``SMDDP_HOST_ADDRESSES``; a name maps to itself when
            absent, which is right on SageMaker where the names resolve).
        tensorboard_dir: TensorBoard summaries go here (rank 0 / the chief); ``None``: none are written.
    """

    model_dir: Path
    output_data_dir: Path
    output_dir: Path
    checkpoint_dir: Path
    channels: dict[str, Path] = field(default_factory=dict)
    hosts: tuple[str, ...] = ("algo-1",)
    current_host: str = "algo-1"
    host_addresses: dict[str, str] = field(default_factory=dict)
    num_gpus: int = 0
    num_cpus: int = 1
    tensorboard_dir: Path | None = None

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        tensorboard_dir: str | os.PathLike[str] | None = None,
    ) -> TrainingEnv:
        """Reads the SageMaker variables of `environ` (default ``os.environ``), with local fallbacks for the absent
        ones. ``checkpoint_dir=None`` (no ``--checkpoint-dir``) means the job's tree's ``checkpoints`` when the
        job names its tree (``SAGEMAKER_BASE_DIR``, local mode's hosts), else ``/opt/ml/checkpoints`` when it exists
        and is writable (SageMaker's), else ``<output_dir>/checkpoints``; ``tensorboard_dir=None``: see `resolve_tensorboard_dir`.

        Raises:
            smddp_compat.cluster.ClusterConfigError: ``SM_HOSTS`` / ``SMDDP_HOST_ADDRESSES`` are malformed, or the
                current host is not one of the hosts (read by :class:`smddp_compat.cluster.Cluster`, as by every
                launcher).
            ClusterConfigError: ``SM_NUM_GPUS`` / ``SM_NUM_CPUS`` are not integers.
            EntryPointError: The job's TensorBoard configuration file is malformed.
        """
        env = os.environ if environ is None else environ
        local = local_root(env)

        def directory(variable: str, on_sagemaker: Path, local_default: Path) -> Path:
            if env.get(variable):
                return Path(env[variable])
            return on_sagemaker if _writable_dir(on_sagemaker) else local_default

        model_dir = directory(contract.SM_MODEL_DIR, _OPT_ML / contract.MODEL_DIR, local / contract.MODEL_DIR)
        output_dir = directory(contract.SM_OUTPUT_DIR, _OPT_ML / contract.OUTPUT_DIR, local / contract.OUTPUT_DIR)
        output_data_dir = (
            Path(env[contract.SM_OUTPUT_DATA_DIR]) if env.get(contract.SM_OUTPUT_DATA_DIR) else output_dir / "data"
        )
        if checkpoint_dir is not None and str(checkpoint_dir) != "":
            checkpoints = Path(checkpoint_dir)
        elif env.get(contract.SAGEMAKER_BASE_DIR):
            # The job's own tree first (local mode's hosts: its checkpoints/ is the job's checkpoint folder), never
            # this machine's /opt/ml/checkpoints because it happens to exist.
            checkpoints = Path(env[contract.SAGEMAKER_BASE_DIR]) / contract.CHECKPOINTS_DIR
        elif _writable_dir(Path(contract.DEFAULT_CHECKPOINT_DIR)):
            checkpoints = Path(contract.DEFAULT_CHECKPOINT_DIR)
        else:
            checkpoints = output_dir / contract.CHECKPOINTS_DIR

        channels: dict[str, Path] = {}
        for key, value in env.items():
            if key.startswith(contract.SM_CHANNEL_PREFIX) and value:
                channels[key[len(contract.SM_CHANNEL_PREFIX):].lower()] = Path(value)

        cluster = Cluster.from_environ(env)

        def count(variable: str, default: int) -> int:
            raw = env.get(variable)
            try:
                return int(raw) if raw not in (None, "") else default
            except ValueError:
                raise ClusterConfigError(f"{variable}={raw!r} is not an integer.") from None

        return cls(
            model_dir=model_dir,
            output_data_dir=output_data_dir,
            output_dir=output_dir,
            checkpoint_dir=checkpoints,
            channels=channels,
            hosts=cluster.hosts,
            current_host=cluster.current_host,
            host_addresses=dict(cluster.addresses),
            num_gpus=count(contract.SM_NUM_GPUS, 0),
            num_cpus=count(contract.SM_NUM_CPUS, os.cpu_count() or 1),
            tensorboard_dir=resolve_tensorboard_dir(env, output_dir, tensorboard_dir),
        )

    @property
    def host_index(self) -> int:
        """Position of the current host in `hosts` (0 for the first, the "chief" host)."""
        return self.hosts.index(self.current_host)

    @property
    def is_multi_host(self) -> bool:
        """Whether the job spans more than one host."""
        return len(self.hosts) > 1

    @property
    def cluster(self) -> Cluster:
        """The hosts, this host and their addresses, as every launcher of the kit reads them."""
        return Cluster(self.hosts, self.current_host, self.host_addresses)

    def address_of(self, host: str) -> str:
        """Network address of `host`: its ``SMDDP_HOST_ADDRESSES`` entry, else the name itself."""
        return self.cluster.address_of(host)

    def channel(self, name: str) -> str | None:
        """Directory of data channel `name` (``SM_CHANNEL_<NAME>``), or ``None`` when the job has no such channel."""
        path = self.channels.get(name.lower())
        return None if path is None else str(path)

    def prepare_dirs(self, *, checkpoints: bool = True) -> None:
        """Creates the model, output, output-data, TensorBoard and (optionally) checkpoint directories, on the
        process that writes them (rank 0 / the chief).

        Raises:
            EntryPointError: A directory cannot be created or is not writable.
        """
        targets = [("model", self.model_dir), ("output", self.output_dir), ("output data", self.output_data_dir)]
        if checkpoints:
            targets.append(("checkpoint", self.checkpoint_dir))
        if self.tensorboard_dir is not None:
            targets.append(("TensorBoard", self.tensorboard_dir))
        for what, path in targets:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise EntryPointError(f"cannot create the {what} directory {str(path)!r}: {exc.strerror}.") from exc
            if not os.access(path, os.W_OK | os.X_OK):
                hint = {"checkpoint": " (pass --checkpoint-dir DIR)",
                        "TensorBoard": " (pass --tensorboard-dir DIR)"}.get(what, "")
                raise EntryPointError(f"the {what} directory {str(path)!r} is not writable{hint}.")
