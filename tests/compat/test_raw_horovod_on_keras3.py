"""Where raw Horovod breaks on Keras 3 and the kit does not (README: "Both work with Keras 3, where raw Horovod
breaks"): the same two calls, on 2 real ranks, through ``horovod.tensorflow`` and through ``smddp_compat.tensorflow``.

If a Horovod release fixes Keras 3 (upstream issue 4290), the first test fails, and the README's claim with it.
"""

from __future__ import annotations

import numpy as np
import pytest

PROGRAM = "keras3_horovod_api.py"


@pytest.mark.e2e
def test_raw_horovod_fails_on_keras_3(run_ranks) -> None:
    job = run_ranks(PROGRAM, 2, "horovod")
    assert job.returncode == 0, job.output[-3000:]
    assert sorted(job.results) == [0, 1], job.output[-3000:]
    for result in job.results.values():
        assert result["api"] == "horovod.tensorflow" and result["keras"].startswith("3.")
        assert result["broadcast"]["ok"] is False
        assert "object has no attribute 'assign'" in result["broadcast"]["error"], result["broadcast"]
        assert result["gradient"]["ok"] is False
        assert "object has no attribute 'ref'" in result["gradient"]["error"], result["gradient"]


@pytest.mark.e2e
def test_the_kit_runs_the_same_calls_on_keras_3(run_ranks) -> None:
    job = run_ranks(PROGRAM, 2, "smddp_compat")
    assert job.returncode == 0, job.output[-3000:]
    results = [job.results[rank] for rank in (0, 1)]
    for result in results:
        assert result["api"] == "smddp_compat.tensorflow" and result["keras"].startswith("3.")
        assert result["size"] == 2
        assert result["broadcast"]["ok"] and result["gradient"]["ok"], result
    # broadcast: rank 0's weights everywhere; gradient of sum(x @ W + b) over W is sum over the batch of x, i.e.
    # 4 * (rank + 1) in every entry, averaged over ranks 1 and 2: 6.
    assert results[0]["broadcast"]["kernel"] == results[1]["broadcast"]["kernel"]
    for result in results:
        np.testing.assert_allclose(result["gradient"]["kernel"], np.full((3, 2), 6.0), rtol=1e-6)
