"""Each collective of smddp_compat.tensorflow on 2 and 3 real ranks, checked against rank and size."""

import pytest

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("num_proc", [2, 3])
def test_collectives_match_rank_and_size(run_ranks, num_proc):
    job = run_ranks("collectives.py", num_proc)
    assert job.returncode == 0, job.output
    assert sorted(job.results) == list(range(num_proc)), job.output
    n = num_proc
    ranks = range(1, n + 1)  # each rank contributes rank + 1
    for rank, res in job.results.items():
        assert res["size"] == n and res["local_size"] == n and res["local_rank"] == rank
        assert res["cross_rank"] == 0 and res["cross_size"] == 1
        mean = sum(ranks) / n
        assert res["reduced"]["AVERAGE"] == pytest.approx([mean, 10 * mean, -mean])
        assert res["reduced"]["SUM"] == pytest.approx([sum(ranks), 10 * sum(ranks), -sum(ranks)])
        assert res["reduced"]["MIN"] == pytest.approx([1, 10, -n])
        assert res["reduced"]["MAX"] == pytest.approx([n, 10 * n, -1])
        assert res["default"] == res["reduced"]["AVERAGE"]
        assert res["horovod_sum"] == res["reduced"]["SUM"]
        # fp16 keeps 11 significant bits: relative error at most 2**-11 per value, a few roundings in all.
        assert 0 < res["fp16_error"] < 4 * 2**-11 and res["fp16_dtype"] == "float32"
        for root in range(n):
            assert res["broadcasts"][str(root)] == [float(root), 7.0]
        assert res["variable"] == [float(n - 1)] * 4
        assert res["oob"] == pytest.approx((n - 1) / 2)
        assert res["gathered"] == [r for r in range(n) for _ in range(r + 1)]
        assert res["grouped"] == [[float(sum(range(n)))], [2.0 * n]]
        g_sum, g_avg, g_overlap = res["graph"]
        assert g_sum == [float(sum(range(n)))] and g_avg == pytest.approx([2 * (n - 1) / 2])
        assert g_overlap == [float(rank)]
