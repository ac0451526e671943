"""With the kit's estimator imported, SDK v2 checks each distinct configuration only once
(estimators/_sdk_config_validation.py)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("sagemaker.config")  # SDK v2 only (SDK v3 has no sagemaker.config)

from sagemaker import utils as sdk_utils  # noqa: E402
from sagemaker.config import config as sdk_config  # noqa: E402

import smddp_compat.estimators._sdk_config_validation as validation  # noqa: E402
import smddp_compat.estimators._tensorflow_estimator  # noqa: E402,F401 - installs the memo

VALID = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}


class _Session:
    def __init__(self, config: dict[str, Any]) -> None:
        self.sagemaker_config = config


def test_a_configuration_is_checked_once_and_an_invalid_one_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = sdk_utils.validate_sagemaker_config
    assert isinstance(memo, validation._CheckedOnce) and sdk_config.validate_sagemaker_config is memo
    checked: list[Any] = []
    sdk_check = memo.check
    monkeypatch.setattr(memo, "check", lambda config: (checked.append(config), sdk_check(config))[1])
    monkeypatch.setattr(memo, "passed", set())
    session = _Session({**VALID, "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": False}}}})
    for _ in range(5):  # what the SDK does on every lookup of a default
        assert sdk_utils.get_sagemaker_config_value(session, "SageMaker.PythonSDK.Modules.TelemetryOptOut") is False
    assert len(checked) == 1
    invalid = _Session({"SchemaVersion": "1.0", "SageMaker": {"NoSuchSection": {}}})
    for _ in range(2):  # the SDK's own error, each time
        with pytest.raises(Exception, match="NoSuchSection"):
            sdk_utils.get_sagemaker_config_value(invalid, "SageMaker.NoSuchSection")
    assert len(checked) == 3
    validation.check_each_configuration_once()  # again: the same memo, not a memo of the memo
    assert sdk_utils.validate_sagemaker_config is memo and memo.check is not memo
