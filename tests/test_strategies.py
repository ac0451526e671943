"""The strategies are one class each, found through one registry, and decide the same way at every entry."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.distribution_config import DistributionConfig, HostCapacity
from smddp_compat.strategies import NAMES, STRATEGIES, Strategy, strategy_for_sdk_key, strategy_named

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("smddp_compat", "local_mode", "estimators", "entry_points", "bench")
# A kind or distribution compared with (or tested among) the strategies' names, or a Distribution.<MEMBER>.
BRANCH_SITE = re.compile(
    r"(kind|distribution)[A-Za-z_.]* *(==|!=|not in|in) *[(\[]?['\"](" + "|".join(NAMES) + r")['\"]"
    r"|Distribution\.(" + "|".join(name.upper() for name in NAMES) + r")\b"
)


def test_every_strategy_is_one_class_in_a_module_of_its_own() -> None:
    assert set(NAMES) == {"none", "smddp", "mpi", "mwms", "dtensor", "parameter_server"}
    modules = {type(s).__module__ for s in STRATEGIES.values()}
    assert len(modules) == len(NAMES)
    for name, strategy in STRATEGIES.items():
        assert isinstance(strategy, Strategy) and strategy.name == name
        assert strategy_named(name.upper()) is strategy
        if strategy.sdk_key:
            assert strategy_for_sdk_key(strategy.sdk_key) is strategy


def test_nothing_else_branches_on_the_strategy() -> None:
    """The measure of the refactor: at most 5 branch sites on the kind, in at most 2 files (today: none)."""
    sites = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BRANCH_SITE.search(line)
    ]
    files = {site.split(":", 1)[0] for site in sites}
    assert len(sites) <= 5 and len(files) <= 2, "\n".join(sites)


@pytest.mark.parametrize("name", NAMES)
def test_each_strategy_reads_back_its_own_sdk_dictionary(name: str) -> None:
    config = DistributionConfig.from_flat(name)
    assert DistributionConfig.from_sdk_dict(config.to_sdk_dict()) == config


def test_a_setting_of_another_strategy_names_the_strategies_that_use_it() -> None:
    with pytest.raises(Exception, match=r"custom_mpi_options.*only used with distribution 'smddp' or 'mpi'"):
        DistributionConfig.from_flat("parameter_server", custom_mpi_options="-x A=1")
    with pytest.raises(Exception, match=r"dtensor_mesh.*only used with distribution 'dtensor'"):
        DistributionConfig.from_flat("mwms", mesh="batch=2")


def test_two_hosts_of_two_processes_get_one_verdict_at_every_entry(tmp_path: Path) -> None:
    """2 hosts x (all the cores) processes: JobSpec (smddp local) and the estimator's local_process both accept it
    (the start warns that the processes share the cores); before, the estimator split the cores over the hosts and
    refused what smddp local ran."""
    from smddp_compat.estimators._distribution import host_capacity, plan_distribution
    from smddp_compat.estimators import instance_spec
    from smddp_compat.launcher import usable_cores
    from smddp_compat.local_mode import JobSpec

    cores = usable_cores() or 1
    if cores < 2:
        pytest.skip("needs 2 cores for the two rules to differ")
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    spec = JobSpec(entry_point=str(script), instance_count=2, processes_per_host=cores, distribution="mpi")
    plan = plan_distribution({"mpi": {"enabled": True, "processes_per_host": cores}},
                             spec=instance_spec("local_process"), instance_count=2)
    assert spec.processes_per_host == plan.processes_per_host == cores
    capacity = host_capacity(instance_spec("local_process"), 2)
    assert capacity == HostCapacity.this_machine(capacity.slots, 2)
    # A strategy that fills a host by default takes its share of the shared machine.
    smddp = plan_distribution({"smdistributed": {"dataparallel": {"enabled": True}}},
                              spec=instance_spec("local_process"), instance_count=2)
    assert smddp.processes_per_host == max(1, (capacity.slots or 1) // 2)


def test_the_mesh_is_written_one_way_in_both_clis_and_the_old_way_is_still_read() -> None:
    from smddp_compat.commands.submit_cli import build_parser as submit_parser
    from smddp_compat.commands.local_cli import build_parser as local_parser
    from smddp_compat.distribution_config import mesh_option_text

    local = local_parser().parse_args(["train.py", "--mesh", "batch=4,model=2"])
    submit = submit_parser().parse_args(["submit", "train.py", "--instance-type", "ml.c5.xlarge",
                                         "--mesh", "batch=4,model=2"])
    assert mesh_option_text(local.mesh) == mesh_option_text(submit.mesh) == "batch=4,model=2"
    old = local_parser().parse_args(["train.py", "--mesh", "batch=4", "model=2"])
    assert mesh_option_text(old.mesh) == "batch=4,model=2"


@pytest.mark.processes
def test_the_strategies_import_without_tensorflow_or_the_sdk() -> None:
    code = ("import sys, smddp_compat.strategies, smddp_compat.distribution_config; "
            "assert not {'tensorflow', 'sagemaker', 'horovod'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    for name in NAMES:
        importlib.import_module(type(STRATEGIES[name]).__module__)


@pytest.mark.parametrize(("name", "says"), [
    ("tpu", "needs Cloud TPUs"), ("mirrored", "keras_mwms.py --strategy mirrored"),
    ("central-storage", "keras_mwms.py --strategy central_storage"), ("estimator", "removed in TensorFlow 2.16"),
    ("horovod", "--distribution mpi"), ("nonsense", "use one of: none, smddp, mpi, mwms, dtensor, parameter_server"),
])
def test_a_strategy_that_is_not_a_distribution_says_why_and_what_to_use(name: str, says: str) -> None:
    with pytest.raises(Exception, match=re.escape(says)):
        strategy_named(name)
