"""The SDK v3 plug-ins' rows of the bad-input table (the others are in tests/reliability/test_bad_inputs.py). Runs in
.venv-sdk3 only (``.ci/run`` does): SDK v2 and v3 cannot share an environment.

Every row checks that the error names the bad value and the fix, that it is the named error class, and that nothing
started: no training job and no S3 object at moto's server (real HTTP), no child process.
"""

from __future__ import annotations

from collections.abc import Callable

import psutil
import pytest

pytest.importorskip("sagemaker.train", reason="SageMaker SDK v3 is not installed (use .venv-sdk3)")


def _smddp(**fields: object) -> Callable[[], object]:
    def build() -> object:
        from smddp_compat.estimators.sdk3 import SMDDPCompat

        return SMDDPCompat(**fields)

    return build


def _dtensor(**fields: object) -> Callable[[], object]:
    def build() -> object:
        from smddp_compat.estimators.sdk3 import DTensor

        return DTensor(**fields)

    return build


def _checked(build: Callable[[], object], instance_type: str, instance_count: int = 1) -> Callable[[], object]:
    def check() -> object:
        config = build()
        config.check(instance_type, instance_count)  # type: ignore[attr-defined]
        return config

    return check


# (case, call, error class, words naming the value, words naming the fix)
SDK3_CASES = [
    ("sdk3-smddp-processes-per-host-0", _smddp(processes_per_host=0), "ValidationError",
     ("processes_per_host=0",), ("use a positive integer",)),
    ("sdk3-smddp-processes-per-host-beyond-the-gpus", _checked(_smddp(processes_per_host=9), "ml.p4d.24xlarge"),
     "ConfigurationError", ("processes_per_host=9: ml.p4d.24xlarge has only 8 GPU",),
     ("use processes_per_host <= 8",)),
    ("sdk3-smddp-unknown-instance-type", _checked(_smddp(), "ml.zz9.huge"), "UnknownInstanceTypeError",
     ("instance_type='ml.zz9.huge'",), ("known_instance_types()",)),
    ("sdk3-dtensor-mesh-size-0", _dtensor(mesh={"batch": 0}), "ValidationError",
     ("mesh={'batch': 0}", "dimension 'batch' has size 0"), ("every size must be an integer >= 1",)),
    ("sdk3-dtensor-empty-mesh", _dtensor(mesh={}), "ValidationError",
     ("mesh has no dimension",), ("give at least one, e.g. {'batch': 4}",)),
    ("sdk3-dtensor-mesh-does-not-fill", _checked(_dtensor(mesh={"batch": 6}), "ml.p4d.24xlarge", 2),
     "ConfigurationError", ("{'batch': 6}",), ("make the product of the mesh sizes 16",)),
    ("sdk3-dtensor-unknown-device-type", _dtensor(device_type="TPU"), "ValidationError",
     ("device_type='TPU'",), ("'GPU' or 'CPU'",)),
    ("sdk3-dtensor-port-below-1024", _dtensor(port=80), "ValidationError",
     ("port=80", "must be an integer in 1024..65535"), ("use the default 9970 or a free port",)),
]


@pytest.mark.parametrize("case, call, kind, value, fix", SDK3_CASES, ids=[c[0] for c in SDK3_CASES])
def test_bad_sdk3_plug_in_config(aws, case: str, call: Callable[[], object], kind: str, value: tuple[str, ...],
                                 fix: tuple[str, ...]) -> None:
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value).__name__ == kind, repr(info.value)
    message = str(info.value)
    for words in value:
        assert words in message, f"the value ({words!r}) is not named in: {message}"
    for words in fix:
        assert words in message, f"the fix ({words!r}) is not named in: {message}"
    assert aws.training_jobs() == [] and aws.all_objects() == []
    assert {p.pid for p in psutil.Process().children(recursive=True)} - children_before == set()
