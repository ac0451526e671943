"""The SDK v3 plug-in ``DTensor`` answers the meshes of ``tests/test_distribution_rules.py`` as every other entry does
(run in .venv-sdk3): ``{"batch": 8}`` on 2 CPU hosts is accepted with 4 devices per client; ``bätch``, a dimension
given twice and a mesh the clients cannot split are refused with the same problem and fix."""

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
