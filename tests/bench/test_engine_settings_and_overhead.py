"""The bench's side-by-side engine settings (bandwidth) and the compat-overhead method (overhead), on made-up
rank results: which jobs they ask for and what their rows say."""

from __future__ import annotations

import pytest

from smddp_compat.bench.config import BenchConfig
from smddp_compat.bench.engines import horovod_engines
from smddp_compat.bench.jobs import JobRun
from smddp_compat.bench.measurements import bandwidth, overhead
from smddp_compat.bench.results import Verdict

needs_mpi = pytest.mark.skipif("mpi" not in horovod_engines(), reason="mpirun is not installed")


def _run(job, ranks, round_index=0):
    return JobRun(job=job, round=round_index, ok=True, reason="", started=0.0, duration=1.0, ranks=ranks, log_path="")


def test_grouped_ratios_pair_neighbouring_steps_and_ignore_slices_that_hit_one_step():
    raw = [0.010 + 0.001 * (i % 7) for i in range(200)]  # the machine's slow and fast phases, shared by each pair
    compat = [value * 1.01 for value in raw]
    compat[5] = compat[77] = compat[150] = 0.5  # three steps that lost their core for a time slice
    ratio = overhead.grouped_ratios(compat, raw)
    assert ratio.count == overhead.GROUPS
    assert ratio.median == pytest.approx(1.01) and ratio.low == pytest.approx(1.01) and ratio.high == pytest.approx(1.01)
    assert overhead.grouped_ratios([1.0] * 3, [1.0] * 3).count == 3  # fewer pairs than groups: one pair a group


def test_collective_ops_count_a_grouped_allreduce_once():
    assert overhead.collective_ops({"HorovodGroupedAllreduce": 1, "MatMul": 4}) == 1
    assert overhead.collective_ops({"HorovodAllreduce": 8, "Identity": 30}) == 8


def _overhead_rank(cpu_ratio: float, wall_spread: float) -> dict:
    steps = 100
    base = [0.010 + 0.002 * (i % 5) for i in range(steps)]
    wall = [0.03 * (1 + wall_spread * ((-1) ** i)) for i in range(steps)]
    graph = {"horovod": {"HorovodAllreduce": 8, "MatMul": 10}, "smddp_compat": {"HorovodGroupedAllreduce": 1,
                                                                               "MatMul": 10}}
    model = {"step_seconds": {"horovod": wall, "smddp_compat": list(reversed(wall))},
             "cpu_seconds": {"horovod": base, "smddp_compat": [v * cpu_ratio for v in base]},
             "graph_ops": graph}
    return {"keras": "tf_keras.api._v2.keras", "models": {"cnn": model, "mlp": model}}


@pytest.mark.parametrize("cpu_ratio, verdict", [(0.97, Verdict.MET), (1.06, Verdict.NOT_MET)])
def test_overhead_rows_judge_cpu_time_and_show_wall_time_and_collectives_beside_it(tmp_path, cpu_ratio, verdict):
    config = BenchConfig(out_dir=tmp_path, measurements=("overhead",))
    result = overhead.summarise_runs(config, lambda job: [_run(job, [_overhead_rank(cpu_ratio, 0.3)] * 2)])
    judged = [row for row in result.rows if "CPU time" in row.comparison]
    assert len(judged) == 2 * len(horovod_engines())
    for row in judged:
        assert row.goal is not None and row.verdict is verdict, row
        assert row.ratio.median == pytest.approx(cpu_ratio)
        assert "graph: 1 vs 8 collective ops, 11 vs 18 ops" in row.detail
    walls = [row for row in result.rows if "wall time" in row.comparison]
    assert walls and all(row.goal is None for row in walls)
    assert "cnn" in result.raw[horovod_engines()[0]] and "mlp" in result.raw[horovod_engines()[0]]


@needs_mpi
def test_the_kit_settings_and_each_alternative_run_side_by_side_every_round(tmp_path):
    full = BenchConfig(out_dir=tmp_path, measurements=("bandwidth",))
    quick = BenchConfig(out_dir=tmp_path, measurements=("bandwidth",), quick=True)
    assert bandwidth.variant_names(full) == ["kit", *bandwidth.MPI_VARIANTS]
    assert bandwidth.variant_names(quick) == []
    jobs = [bandwidth.variant_job(full, name) for name in bandwidth.variant_names(full)]
    assert all(job.repeat and job.ranks == 2 and job.launcher.value == "smddprun-mpi" for job in jobs)
    assert {job.args_dict()["--variant"] for job in jobs} == {"kit", *bandwidth.MPI_VARIANTS}
    assert len({job.label for job in jobs}) == len(jobs)  # each its own log folder
    assert jobs[0].env == ()  # the kit's own settings: nothing added
    # a user's own coll_tuned setting replaces the kit's rules: Open MPI's own choice is what users had before
    assert dict(bandwidth.variant_job(full, "openmpi-choice").env) == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "0"}
    assert set(jobs) <= set(bandwidth.jobs(full))


@needs_mpi
def test_variant_rows_show_each_fraction_of_the_copy_and_the_1kb_time_against_the_kits(tmp_path):
    config = BenchConfig(out_dir=tmp_path, measurements=("bandwidth",))
    large, small = str(64 << 20), str(1 << 10)

    def ranks(seconds_large: float, seconds_small: float) -> list[dict]:
        part = {large: {"allreduce": [seconds_large] * 6, "copy": [0.001] * 6},
                small: {"allreduce": [seconds_small] * 6, "copy": [0.0001] * 6}}
        return [{"bandwidth": part}] * 2

    def runs(job):
        variant = job.args_dict().get("--variant")
        if variant == "kit":
            return [_run(job, ranks(0.002, 0.001), r) for r in (0, 1)]
        if variant == "openmpi-choice":
            return [_run(job, ranks(0.004, 0.002), r) for r in (0, 1)]
        return []  # the engine sweep jobs: not run here

    result = bandwidth.summarise_runs(config, runs)
    rows = {row.comparison: row for row in result.rows
            if "Horovod/MPI, " in row.comparison and row.comparison.endswith(", 2 ranks") and "copy" in row.comparison}
    kit = next(row for label, row in rows.items() if "kit settings" in label)
    before = next(row for label, row in rows.items() if "Open MPI's own" in label)
    assert kit.ratio.median == pytest.approx(0.5) and before.ratio.median == pytest.approx(0.25)
    assert "2.00x the kit's" in before.detail and "1 KB: 2.00 ms" in before.detail
    assert len(rows) == 2 + 5  # the kit's, Open MPI's own choice, and the variants that did not run (n/a)
    assert [row.ratio for label, row in rows.items() if "segmented ring, 4 MB" in label] == [None]
    assert result.raw["variants"]["openmpi-choice"]["small_over_kit"]["median"] == pytest.approx(2.0)


def test_the_variants_quick_leaves_out_still_make_their_rows_in_a_full_run(tmp_path):
    """--quick runs overhead on Gloo only, scaling without the short Horovod cycle and the profile without the
    no-huge-pages job (each the same program with one setting changed); a full run's rows of those jobs are made from
    their runs."""
    from smddp_compat.bench.measurements import profile, scaling

    full = BenchConfig(out_dir=tmp_path, measurements=("overhead", "scaling", "profile"))
    quick = BenchConfig(out_dir=tmp_path, measurements=("overhead", "scaling", "profile"), quick=True)
    assert overhead.engines(quick) == ["gloo"] and overhead.engines(full) == horovod_engines()
    assert [job.launcher.value for job in overhead.jobs(quick)] == ["smddprun-gloo"]
    assert scaling.SHORT_CYCLE not in scaling._jobs(quick)

    layouts = scaling._jobs(full)
    speed = {"1 rank": 100.0, "2 ranks": 180.0, "2 hosts x 1 (smddp local)": 170.0, scaling.SHORT_CYCLE: 171.0}
    runs = {job.key: [_run(job, [{"rank": 0, "samples_per_second": speed[name]}])] for name, job in layouts.items()}
    rows = {row.comparison: row for row in scaling.summarise_runs(full, lambda job: runs.get(job.key, [])).rows}
    assert rows[f"samples/s {scaling.SHORT_CYCLE} / 2 ranks"].ratio.median == pytest.approx(0.95)

    if "mpi" not in horovod_engines():
        return
    assert len(profile.jobs(full)) == 3 and len(profile.jobs(quick)) == 2
    parts = {"horovod": [0.010] * 3, "copy": [0.004] * 3, "add": [0.002] * 3, "output_alloc": [0.001] * 3}
    slower = {**parts, "horovod": [0.0125] * 3}
    kit, before, alone = profile.jobs(full)
    runs = {kit.key: [_run(kit, [{"bytes": 1 << 20, "seconds": parts}] * 2)],
            before.key: [_run(before, [{"bytes": 1 << 20, "seconds": slower}] * 2)],
            alone.key: [_run(alone, [{"seconds": {"mpi": [0.008] * 3, "copy": [0.004] * 3}}] * 2)]}
    rows = {row.comparison: row for row in profile.summarise_runs(full, lambda job: runs.get(job.key, [])).rows}
    huge = next(row for label, row in rows.items() if "with huge pages (kit) / without" in label)
    assert huge.ratio.median == pytest.approx(0.8)
