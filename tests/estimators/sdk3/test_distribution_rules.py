"""The SDK v3 plug-ins answer as SDK v2's ``distribution=`` does (one rule, two faces: the last test), and ``DTensor``
the meshes of ``tests/test_distribution_rules.py`` as every other entry does (run in .venv-sdk3): ``{"batch": 8}`` on
2 CPU hosts is accepted with 4 devices per client; ``bätch``, a dimension given twice and a mesh the clients cannot
split are refused with the same problem and fix."""

from __future__ import annotations

import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")

from pydantic import ValidationError  # noqa: E402

from smddp_compat.estimators.errors import ConfigurationError  # noqa: E402
from tests.test_distribution_rules import ACCEPTED_DEVICES_PER_CLIENT, HOSTS, IDS, RULES, Rule  # noqa: E402


def _refusal(error: BaseException) -> BaseException:
    """The model's error: as raised by ``check()``, or the one pydantic wrapped at construction."""
    if isinstance(error, ValidationError):
        return error.errors()[0]["ctx"]["error"]
    return error


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_dtensor_plug_in(rule: Rule) -> None:
    from smddp_compat.estimators._distribution import plan_distribution
    from smddp_compat.estimators import instance_spec
    from smddp_compat.estimators.sdk3 import DTensor

    if rule.problem is None:
        config = DTensor(mesh=rule.mesh)
        config.check("ml.c5.xlarge", HOSTS)
        assert config.mesh == rule.mesh
        # what check() accepted, with the defaults it filled in
        plan = plan_distribution({"dtensor": {"enabled": True, "mesh": config.mesh}},
                                 spec=instance_spec("ml.c5.xlarge"), instance_count=HOSTS)
        assert plan.kind == "dtensor" and plan.config.devices_per_process == ACCEPTED_DEVICES_PER_CLIENT
        return
    with pytest.raises((ValidationError, ConfigurationError)) as caught:
        DTensor(mesh=rule.mesh).check("ml.c5.xlarge", HOSTS)
    error = _refusal(caught.value)
    assert (error.problem, error.fix) == (rule.problem, rule.fix), str(caught.value)
    assert f"{rule.problem}. Fix: {rule.fix}" in str(caught.value)


def test_given_devices_per_process_must_match_the_mesh() -> None:
    from smddp_compat.estimators.sdk3 import DTensor
    from tests.test_distribution_rules import GIVEN_DEVICES_PROBLEM

    with pytest.raises(ConfigurationError) as caught:
        DTensor(mesh={"batch": 8}, devices_per_process=2).check("ml.c5.xlarge", HOSTS)
    assert (caught.value.problem, caught.value.fix) == GIVEN_DEVICES_PROBLEM


# (config, its bad fields, the SDK v2 distribution with the same values, the instance type, the v2 field's name)
TWO_FACES = [
    ("SMDDPCompat", {"processes_per_host": 9}, {"smdistributed": {"dataparallel": {"enabled": True,
                                                                                   "processes_per_host": 9}}},
     "ml.p4d.24xlarge", "distribution['smdistributed']['dataparallel']['processes_per_host']"),
    ("Horovod", {"processes_per_host": 9}, {"mpi": {"enabled": True, "processes_per_host": 9}}, "ml.p4d.24xlarge",
     "distribution['mpi']['processes_per_host']"),
    ("DTensor", {"port": 80}, {"dtensor": {"enabled": True, "port": 80}}, "ml.c5.xlarge",
     "distribution['dtensor']['port']"),
    ("DTensor", {"device_type": "TPU"}, {"dtensor": {"enabled": True, "device_type": "TPU"}}, "ml.c5.xlarge",
     "distribution['dtensor']['device_type']"),
]


@pytest.mark.parametrize("name, fields, v2_distribution, instance_type, v2_field", TWO_FACES,
                         ids=[f"{c[0]}-{next(iter(c[1]))}" for c in TWO_FACES])
def test_one_rule_two_faces(name: str, fields: dict, v2_distribution: dict, instance_type: str, v2_field: str) -> None:
    """A value SDK v2's ``distribution=`` refuses, each v3 config refuses with the same problem and fix, naming its own
    field (at construction, or in ``check()`` when the rule needs the cluster)."""
    from smddp_compat.estimators import instance_spec, plan_distribution
    from smddp_compat.estimators import sdk3

    with pytest.raises(ConfigurationError) as v2:
        plan_distribution(v2_distribution, spec=instance_spec(instance_type), instance_count=2)
    with pytest.raises((ValidationError, ConfigurationError)) as v3:
        getattr(sdk3, name)(**fields).check(instance_type, 2)
    v3_error = _refusal(v3.value)
    assert (v3_error.problem, v3_error.fix) == (v2.value.problem, v2.value.fix)
    assert (v2.value.field, v3_error.field) == (v2_field, next(iter(fields)))
