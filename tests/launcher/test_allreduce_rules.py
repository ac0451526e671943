"""The MPI engine's allreduce algorithms (Open MPI's coll_tuned rules): given to every rank, unless the user chose
collective settings of their own; and a job with them reduces correctly at every size."""

import io
import os
import sys
import textwrap
from pathlib import Path

import pytest

from smddp_compat.launcher import ProcessSpec
from smddp_compat.launcher._cli import build_parser
from smddp_compat.launcher._mpi_group import mpirun_unavailable_reason, run_mpi_group
from smddp_compat.launcher._per_rank import ALLREDUCE_RULES, allreduce_rules_environment, rank_environment

REPO = Path(__file__).resolve().parents[2]
RULES_VARIABLE = "OMPI_MCA_coll_tuned_dynamic_rules_filename"


def mpirun_rank(session: Path | None, **extra: str) -> dict[str, str]:
    environ = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
               "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_ess_base_jobid": "77", "PATH": "/usr/bin:/bin", **extra}
    if session is not None:
        environ["OMPI_MCA_orte_jobfam_session_dir"] = str(session)
    return environ


def test_every_rank_gets_the_rules_file_in_the_jobs_session_directory(tmp_path):
    env = allreduce_rules_environment(mpirun_rank(tmp_path))
    path = tmp_path / "smddp-allreduce-rules-77.conf"
    assert env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", RULES_VARIABLE: str(path)}
    assert path.read_text() == ALLREDUCE_RULES
    # Open MPI 4.1's format: 1 collective, allreduce (id 2), 2 communicator sizes; from 2 ranks 2 message sizes:
    # below 4 MB Open MPI's own choice (0), from 4 MB the segmented ring (5) in 1 MB segments; from 4 ranks 1 message
    # size: Open MPI's own choice
    assert [int(word) for word in ALLREDUCE_RULES.split()] == [1, 2, 2, 2, 2, 0, 0, 0, 0, 4 << 20, 5, 0, 1 << 20,
                                                                4, 1, 0, 0, 0, 0]
    assert allreduce_rules_environment(mpirun_rank(tmp_path)) == env  # a second rank writes the same file
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # and leaves no temporary file behind


@pytest.mark.parametrize("setting", ["OMPI_MCA_coll_tuned_use_dynamic_rules", "OMPI_MCA_coll_tuned_allreduce_algorithm",
                                     RULES_VARIABLE])
def test_the_users_collective_settings_win(tmp_path, setting):
    # what the user exported, or what `mpirun --mca coll_tuned_... V` hands each rank
    environ = mpirun_rank(tmp_path, **{setting: "3"})
    assert allreduce_rules_environment(environ) == {}
    env = rank_environment(environ, build_parser().parse_args(["--no-shim", "python", "train.py"]))
    assert env[setting] == "3" and not [name for name in env if name.startswith("OMPI_MCA_coll_tuned_")
                                        and name != setting]
    assert not list(tmp_path.glob("smddp-allreduce-rules-*"))


def test_no_rules_without_an_open_mpi_session_directory(tmp_path):
    assert allreduce_rules_environment(mpirun_rank(None)) == {}  # e.g. a PMI launcher: the variables would not apply
    assert allreduce_rules_environment(mpirun_rank(tmp_path / "gone")) == {}


@pytest.mark.processes
@pytest.mark.skipif(mpirun_unavailable_reason() is not None, reason=str(mpirun_unavailable_reason()))
@pytest.mark.parametrize("own_setting", [False, True])
def test_a_job_reduces_correctly_with_the_rules_and_without_them(tmp_path, own_setting):
    pytest.importorskip("mpi4py")
    code = textwrap.dedent("""
        import os
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        for nbytes in (1 << 10, 3 << 20, 8 << 20, (8 << 20) + 4):  # below, at and past the 4 MB rule, uneven
            source = np.arange(nbytes // 4, dtype=np.float32) + comm.rank
            target = np.empty_like(source)
            comm.Allreduce(source, target, op=MPI.SUM)
            expected = 2 * np.arange(nbytes // 4, dtype=np.float32) + 1
            assert np.array_equal(target, expected), nbytes
            comm.Allreduce(MPI.IN_PLACE, source, op=MPI.SUM)
            assert np.array_equal(source, expected), nbytes
        print("rules", os.environ.get("OMPI_MCA_coll_tuned_dynamic_rules_filename", "none"))
    """)
    extra = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "0"} if own_setting else {}
    environ = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **extra}
    specs = [ProcessSpec(argv=[sys.executable, "-c", code], env=environ, label=str(rank)) for rank in range(2)]
    out = io.StringIO()
    result = run_mpi_group(specs, stream=out, timeout=120)
    assert result.ok, out.getvalue()
    lines = [line for line in out.getvalue().splitlines() if " rules " in line]
    assert len(lines) == 2, out.getvalue()
    if own_setting:
        assert all(line.endswith(" rules none") for line in lines), lines
    else:
        assert all(line.endswith(".conf") and "smddp-allreduce-rules-" in line for line in lines), lines
