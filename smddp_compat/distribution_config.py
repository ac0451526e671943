"""One model of a job's distribution: the strategy, the processes per host, and the DTensor set-up.

Every entry builds the same :class:`DistributionConfig`: ``JobSpec``, ``smddp local`` and ``smddp submit`` from the
flat form (a kind such as ``dtensor``, a mesh, devices per process, processes per host) with
:meth:`DistributionConfig.from_flat`; ``smddp_compat.estimators.TensorFlow(distribution=...)`` and the SDK v3
plug-ins from the SDK's dictionary (``{"dtensor": {"enabled": True, "mesh": {...}}}``) with
:meth:`DistributionConfig.from_sdk_dict`. Building checks every value on its own; :meth:`DistributionConfig.resolve`
checks it against the cluster (one host's :class:`HostCapacity`, the number of hosts) and fills in the defaults. So
a setting is accepted or refused with the same problem and fix at every entry, in the entry's own field names
(:class:`FieldNames`). Standard library only: this module ships inside the uploaded code and the images.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from smddp_compat.cluster import HostCapacity
from smddp_compat.errors import ConfigurationError
from smddp_compat.strategies import (
    ALL_SETTINGS, STRATEGIES, Strategy, dtensor, sdk_keys, strategy_for_sdk_key, strategy_named, Mesh, count_setting,
    parse_mesh, users_of)

__all__ = [
    "KINDS", "DEFAULT_DTENSOR_PORT", "DEFAULT_DTENSOR_JOB_NAME", "Mesh", "FieldNames", "HostCapacity",
    "DistributionConfig", "parse_mesh", "count_setting", "mesh_option_text",
]

#: Each strategy's name (as the CLIs and ``JobSpec`` spell it) -> its key in the SDK's ``distribution`` dictionary.
KINDS: dict[str, str | None] = {name: strategy.sdk_key for name, strategy in STRATEGIES.items()}
DEFAULT_DTENSOR_PORT = dtensor.DEFAULT_PORT
DEFAULT_DTENSOR_JOB_NAME = dtensor.DEFAULT_JOB_NAME

@dataclass(frozen=True)
class FieldNames:
    """How an entry spells each setting in its error messages (``JobSpec``'s names by default).

    Attributes:
        kind: The strategy (``distribution``, ``--distribution``).
        instance_count: The number of hosts.
        processes_per_host: Processes per host.
        custom_mpi_options: mpirun options.
        mesh: The DTensor mesh (``dtensor_mesh``, ``--mesh``, ``distribution['dtensor']['mesh']``).
        devices_per_process: Devices per DTensor client.
        device_type: ``GPU`` or ``CPU``.
        port: The DTensor clients' first port.
        job_name: DTENSOR_JOB_NAME.
    """

    kind: str = "distribution"
    instance_count: str = "instance_count"
    processes_per_host: str = "processes_per_host"
    custom_mpi_options: str = "custom_mpi_options"
    mesh: str = "dtensor_mesh"
    devices_per_process: str = "devices_per_process"
    device_type: str = "device_type"
    port: str = "port"
    job_name: str = "job_name"

    @classmethod
    def under(cls, prefix: str, *, kind: str = "distribution") -> FieldNames:
        """``<prefix>['<setting>']`` for every setting inside the dictionary named `prefix`, e.g.
        ``under("distribution['dtensor']")``; `kind` names the strategy."""
        return cls(kind=kind, **{name: f"{prefix}[{name!r}]" for name in ALL_SETTINGS})


def mesh_option_text(words: list[str] | None, option: str = "--mesh") -> str | None:
    """The ``--mesh`` option of every CLI (``DIM=SIZE,...``) as one text; the older space-separated form
    (``--mesh batch=4 model=2``) is still read, with a note on standard error naming `option`.

    Returns ``batch=4,model=2``, or None when `words` (argparse ``nargs="+"``) is None.
    """
    if not words:
        return None
    if len(words) > 1:
        joined = ",".join(word.strip(",") for word in words)
        print(f"note: {option} {' '.join(words)}: write it as {option} {joined} (DIM=SIZE pairs joined by commas; "
              "the space-separated form is still read)", file=sys.stderr)
        return joined
    return words[0]


@dataclass(frozen=True)
class DistributionConfig:
    """A job's distribution, checked value by value when it is built.

    Settings left None take the strategy's default in :meth:`resolve`. What each strategy accepts, defaults and
    checks is its :class:`~smddp_compat.strategies.Strategy`'s (:attr:`strategy`).

    Attributes:
        kind: The strategy's name: one of :data:`smddp_compat.strategies.NAMES`.
        processes_per_host: Processes each host runs (None: the strategy's default).
        custom_mpi_options: mpirun options (``smddp``, ``mpi``), kept literally.
        mesh: ``dtensor``: the global mesh, or None (the script builds its own). Given as anything
            :func:`parse_mesh` reads; stored as a :data:`Mesh`.
        devices_per_process: ``dtensor``: GPUs or virtual CPUs each client drives (None: derived).
        device_type: ``dtensor``: ``GPU`` or ``CPU`` (None: GPU on GPU hosts).
        port: ``dtensor``: first port of the clients on every host (client ``i`` of a host listens on ``port + i``).
        job_name: ``dtensor``: DTENSOR_JOB_NAME.
        names: How the entry spells each setting in errors.
    """

    kind: str = "none"
    processes_per_host: int | None = None
    custom_mpi_options: str = ""
    mesh: Mesh | None = None
    devices_per_process: int | None = None
    device_type: str | None = None
    port: int = DEFAULT_DTENSOR_PORT
    job_name: str = DEFAULT_DTENSOR_JOB_NAME
    names: FieldNames = field(default=FieldNames(), compare=False, repr=False)

    def __post_init__(self) -> None:
        """Checks every value on its own (the cluster is checked by :meth:`resolve`) through the strategy."""
        names = self.names
        strategy = strategy_named(self.kind, names.kind)
        object.__setattr__(self, "kind", strategy.name)
        count_setting(names.processes_per_host, self.processes_per_host)
        if self.custom_mpi_options is None:  # the SDK's dictionaries may hold None for "no options"
            object.__setattr__(self, "custom_mpi_options", "")
        if not isinstance(self.custom_mpi_options, str):
            raise ConfigurationError(
                names.custom_mpi_options, self.custom_mpi_options, "must be a string",
                "give the options as one string, e.g. '-x NCCL_DEBUG=INFO'",
            )
        for setting, value in self.given_settings().items():
            if setting not in strategy.settings:
                users = users_of(setting)
                raise ConfigurationError(
                    getattr(names, setting), value,
                    f"is only used with distribution {' or '.join(repr(u) for u in users)}, not {self.kind!r}",
                    "drop the option, or use " + (f"distribution {users[0]!r}" if len(users) == 1 else
                                                  "one of those distributions"),
                )
        for setting, value in strategy.check(self).items():
            object.__setattr__(self, setting, value)

    @property
    def strategy(self) -> Strategy:
        """The strategy that owns this config's settings and behaviour."""
        return STRATEGIES[self.kind]

    def given_settings(self) -> dict[str, Any]:
        """The settings other than ``processes_per_host`` that differ from their defaults."""
        defaults = {f.name: f.default for f in fields(self)}
        return {name: getattr(self, name) for name in ALL_SETTINGS[1:] if getattr(self, name) != defaults[name]}

    # Parsers ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_flat(
        cls,
        kind: object,
        *,
        processes_per_host: int | None = None,
        mesh: object = None,
        devices_per_process: int | None = None,
        custom_mpi_options: str | None = None,
        names: FieldNames = FieldNames(),
    ) -> DistributionConfig:
        """The flat form of ``JobSpec`` and the CLIs: a strategy's name (any case) and its settings.

        The settings are the class's attributes; ``mesh`` may be a mapping, (name, size) pairs or
        ``batch=4,model=2``. The config is not yet resolved against a cluster.

        Raises:
            ConfigurationError: An unknown strategy, a bad value, or a setting the strategy does not use.
        """
        return cls(
            strategy_named(kind, names.kind).name, processes_per_host, custom_mpi_options or "",
            mesh, devices_per_process, names=names,  # type: ignore[arg-type]
        )

    @classmethod
    def from_sdk_dict(cls, distribution: object, *, name: str = "distribution") -> DistributionConfig:
        """The SDK's ``distribution`` dictionary (one strategy, as ``sagemaker.tensorflow.TensorFlow`` takes it).

        `distribution` is e.g. ``{"mpi": {"enabled": True, "processes_per_host": 2}}``; None, empty or a strategy
        not enabled give ``none``. Messages spell the settings under `name`, the dictionary's name.

        Raises:
            ConfigurationError: Not a dictionary, an unknown or second strategy, instance groups, an unknown key, or
                a bad value.
        """
        if not distribution:
            return cls()
        if not isinstance(distribution, Mapping):
            raise ConfigurationError(
                name, distribution, "expected a dictionary",
                "pass e.g. {'smdistributed': {'dataparallel': {'enabled': True}}}",
            )
        keys = [key for key in distribution if key != "instance_groups"]
        unknown = [key for key in keys if strategy_for_sdk_key(key) is None]
        if unknown:
            raise ConfigurationError(
                name, dict(distribution), f"unknown strategy {unknown[0]!r}",
                f"use one of {sdk_keys()} (e.g. {{'smdistributed': {{'dataparallel': {{'enabled': True}}}}}})",
            )
        if "instance_groups" in distribution:
            raise ConfigurationError(
                f"{name}['instance_groups']", distribution["instance_groups"],
                "heterogeneous clusters are not supported by smddp-compat's estimators",
                "use instance_type and instance_count (one instance group)",
            )
        if len(keys) > 1:
            raise ConfigurationError(
                name, dict(distribution), f"more than one strategy given ({keys})", "keep exactly one strategy"
            )
        key = keys[0]
        strategy = strategy_for_sdk_key(key)
        assert strategy is not None
        config, path = strategy.settings_from_sdk(distribution[key], f"{name}[{key!r}]")
        if not isinstance(config, Mapping):
            raise ConfigurationError(
                path, config, "expected a dictionary", f"write it as {{'enabled': True, ...}} under {path}"
            )
        enabled = config.get("enabled", False)
        if not isinstance(enabled, bool):
            raise ConfigurationError(
                f"{path}['enabled']", enabled, "must be True or False", "use a bool, e.g. 'enabled': True"
            )
        if not enabled:
            return cls()
        unknown_keys = sorted(set(config) - strategy.sdk_keys)
        if unknown_keys:
            raise ConfigurationError(
                path, dict(config), f"unknown key(s) {unknown_keys}", f"use only {sorted(strategy.sdk_keys)}"
            )
        settings = {k: v for k, v in config.items() if k != "enabled"}
        return cls(strategy.name, names=FieldNames.under(path, kind=name), **settings)

    def to_sdk_dict(self) -> dict[str, Any] | None:
        """The SDK-style dictionary that :meth:`from_sdk_dict` reads back as this config (None for ``none``).

        Raises:
            ConfigurationError: A setting SageMaker's own strategy cannot run (``mwms`` with more than one process
                per host).
        """
        return self.strategy.to_sdk_dict(self)

    # The validator ----------------------------------------------------------------------------------------------

    def resolve(self, capacity: HostCapacity, instance_count: int) -> DistributionConfig:
        """Checks the config against a cluster and fills in every default.

        ``processes_per_host`` defaults to the strategy's (:meth:`Strategy.default_processes_per_host`) and may not
        exceed the host's slots; the strategy then fills in its own (``dtensor``: the device type, devices per
        client, the mesh's fit).

        Raises:
            ConfigurationError: More processes per host than fit, or a setting of the strategy's that does not fit
                the cluster.
        """
        names = self.names
        strategy = self.strategy
        given = self.processes_per_host
        per_host = strategy.default_processes_per_host(capacity) if given is None else given
        if capacity.slots is not None and per_host > capacity.slots:
            raise ConfigurationError(
                names.processes_per_host, per_host,
                f"{capacity.name} has only {capacity.describe_slots()}, so at most {capacity.slots} processes per "
                "host fit",
                f"use processes_per_host <= {capacity.slots}" + (f", or {capacity.larger}" if capacity.larger else ""),
            )
        return strategy.resolve(replace(self, processes_per_host=per_host), capacity, instance_count)
