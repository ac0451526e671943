"""``smddprun`` as one rank of an mpirun job (how SageMaker's training toolkit starts SMDDP jobs)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat import job_startup, smdistributed_shim
from smddp_compat.errors import UsageError
from smddp_compat.launcher import HorovodRendezvous, HostSlots
from smddp_compat.launcher._cli import build_parser
from smddp_compat.launcher._per_rank import launched_by_mpi, mpi_job_directory, rank_environment
from smddp_compat.cluster import GLOO_RANK_VARIABLES

REPO = Path(__file__).resolve().parents[2]

# What Open MPI 4.1 gives rank 1 of 2 (the variables the wrapper reads), plus a caller's own variables.
MPIRUN_ENV = {
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_MCA_ess_base_jobid": "2076573697",
    "PATH": "/usr/bin:/bin",
    "PYTHONPATH": "/code",
    "SMDATAPARALLEL_USE_SINGLENODE": "1",
    "NCCL_SOCKET_IFNAME": "eth0",
}
# Horovod's rank variables as MPI numbered that rank (the Gloo launcher's ones are replaced).
RANK_1_OF_2 = {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
               "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
               "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}  # and large allocations on huge pages


def parse(*argv: str):
    return build_parser().parse_args([*argv, "python", "-m", "mpi4py", "train.py"])


def test_rank_environment_is_exact(tmp_path):
    session = tmp_path / "pid.42"
    session.mkdir()
    environ = {**MPIRUN_ENV, "OMPI_MCA_orte_jobfam_session_dir": str(session)}
    env = rank_environment(environ, parse())
    stall_dir = str(session / "smddp-stall-2076573697")
    rules = str(session / "smddp-allreduce-rules-2076573697.conf")
    assert env == {
        **environ,
        "PYTHONPATH": os.pathsep.join([job_startup.startup_path(), smdistributed_shim.path(), "/code"]),
        "HOROVOD_CONTROLLER": "mpi",
        "HOROVOD_CPU_OPERATIONS": "mpi",
        **RANK_1_OF_2,
        "MPI4PY_RC_THREAD_LEVEL": "multiple",
        "SMDDP_STALL_DIR": stall_dir,
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",  # Open MPI's allreduce algorithms by message size
        "OMPI_MCA_coll_tuned_dynamic_rules_filename": rules,
    }
    assert os.path.isdir(stall_dir) and os.path.isfile(rules)


def test_gloo_launch_variables_do_not_leak_into_an_mpi_rank():
    # A job started inside another smddprun / local-mode rank inherits that rank's Gloo variables.
    with HorovodRendezvous([HostSlots("localhost", 3)]) as rendezvous:
        gloo = rendezvous.rank_envs()[2]
    # The host name stays: it names the host in stall reports on either controller.
    assert set(gloo) - {"NCCL_SOCKET_IFNAME", "HOROVOD_HOSTNAME"} <= set(GLOO_RANK_VARIABLES)
    env = rank_environment({**MPIRUN_ENV, **gloo, "NCCL_SOCKET_IFNAME": "eth0"}, parse("--no-shim"))
    assert env == {
        **MPIRUN_ENV,
        "HOROVOD_HOSTNAME": "localhost",
        "HOROVOD_CONTROLLER": "mpi",
        "HOROVOD_CPU_OPERATIONS": "mpi",
        **RANK_1_OF_2,
        "MPI4PY_RC_THREAD_LEVEL": "multiple",
        "PYTHONPATH": os.pathsep.join([job_startup.startup_path(), "/code"]),  # the kit's start-up, even --no-shim
    }


def test_stall_options_reach_horovod_and_the_watchdog():
    env = rank_environment(
        {**MPIRUN_ENV, "SMDDP_STALL_DIR": "/shared/stall"},
        parse("--no-shim", "--stall-check-seconds", "5", "--stall-shutdown-seconds", "20"),
    )
    expected = {
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "5",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "25",
        "SMDDP_STALL_DIR": "/shared/stall",
        "SMDDP_STALL_WARNING_SECONDS": "5",
        "SMDDP_STALL_TIMEOUT_SECONDS": "20",
    }
    assert {k: env[k] for k in expected} == expected


@pytest.mark.parametrize(
    "option, message",
    [
        (["-H", "localhost:2"], "-H localhost:2 applies when smddprun starts the ranks"),
        (["--timeout", "5"], "--timeout 5.0 applies"),
        (["--log-dir", "/x"], "mpirun --output-filename"),
        (["--gloo"], "ranks under mpirun use Horovod's MPI controller"),
    ],
)
def test_launch_options_are_refused_under_mpirun(option, message):
    with pytest.raises(UsageError, match=message):
        rank_environment(MPIRUN_ENV, parse(*option))


def test_the_users_malloc_tunables_are_kept():
    env = rank_environment({**MPIRUN_ENV, "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, parse("--no-shim"))
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"


def test_a_thread_level_horovod_cannot_use_is_refused():
    with pytest.raises(UsageError, match="MPI4PY_RC_THREAD_LEVEL='serialized'.*MPI_THREAD_MULTIPLE"):
        rank_environment({**MPIRUN_ENV, "MPI4PY_RC_THREAD_LEVEL": "serialized"}, parse())


def test_engine_choice():
    from smddp_compat.launcher._engine import choose_engine

    assert choose_engine(2, cores=2, load=0.2, environ={}).engine == "mpi"
    assert choose_engine(3, cores=2, load=0.0, environ={}).engine == "gloo"
    busy = choose_engine(2, cores=4, load=2.6, environ={})
    assert busy.engine == "gloo" and busy.why.startswith("2 rank(s) > 1 idle core(s) (4 cores, load 2.6)")
    assert choose_engine(2, "gloo", cores=2, load=0, environ={}).why == "forced by --gloo"
    assert choose_engine(3, cores=2, environ={"SMDDP_ENGINE": "MPI"}).describe().startswith(
        "engine mpi (Horovod over MPI (shared memory)): forced by SMDDP_ENGINE=MPI")
    with pytest.raises(UsageError, match="SMDDP_ENGINE='tcp' names no engine"):
        choose_engine(2, environ={"SMDDP_ENGINE": "tcp"})


def test_mpi_detection():
    assert launched_by_mpi(MPIRUN_ENV) and launched_by_mpi({"PMI_RANK": "0"})
    assert not launched_by_mpi({"HOROVOD_RANK": "0"})
    assert mpi_job_directory(MPIRUN_ENV) is None  # no session directory given


def _smddprun_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "HOROVOD_"))}
    env.update({"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", **extra})
    return env


@pytest.mark.processes
def test_without_np_outside_mpirun_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "smddp_compat.launcher", "python", "x.py"],
                          capture_output=True, text=True, timeout=60, env=_smddprun_env())
    assert proc.returncode == 2
    assert "smddprun needs -np N" in proc.stderr


@pytest.mark.processes
def test_the_wrapper_becomes_the_command_with_its_exit_code():
    # exec: the command runs in the wrapper's own process, and its exit code is the wrapper's.
    code = "import os, sys; print(os.getpid(), os.environ['HOROVOD_CONTROLLER']); sys.exit(7)"
    proc = subprocess.Popen([sys.executable, "-m", "smddp_compat.launcher", sys.executable, "-c", code],
                            stdout=subprocess.PIPE, text=True, env=_smddprun_env(OMPI_COMM_WORLD_RANK="0"))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert out.split() == [str(proc.pid), "mpi"]


ALLREDUCE_SCRIPT = """
import numpy as np
import smdistributed.dataparallel.tensorflow as sdp
import horovod.tensorflow as hvd
from mpi4py import MPI

sdp.init()
rank, size = sdp.rank(), sdp.size()
assert (rank, size) == (MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()), (rank, size)
assert (sdp.local_rank(), sdp.local_size()) == (rank, size)
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
assert hvd.mpi_enabled() and not hvd.gloo_enabled()
total = sdp.allreduce(np.full(1000, rank + 1.0, dtype=np.float32), average=False).numpy()
assert np.all(total == size * (size + 1) / 2), total
mean = sdp.allreduce(np.full(4, float(rank), dtype=np.float32)).numpy()
assert np.allclose(mean, (size - 1) / 2), mean
with open(f"result-{rank}.txt", "w") as out:  # ranks' prints may interleave on mpirun's output
    out.write(f"rank {rank} of {size} ok, alias {'_shim_root' in sdp.__file__}")
"""


@pytest.mark.processes
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed (Debian's openmpi-bin)")
def test_mpirun_runs_smddprun_per_rank_as_sagemaker_does(tmp_path):
    """3 ranks (more than the cores: mpirun oversubscribed, an odd world): each rank's identity is MPI's, Horovod
    runs on MPI with MPI_THREAD_MULTIPLE, the alias is on the path. The 2-rank launch, as docs/migrating-from-smddp.md
    shows it with the README's train.py, is that block's test (tests/test_docs.py)."""
    pytest.importorskip("mpi4py")
    ranks = 3
    script = tmp_path / "script.py"
    script.write_text(ALLREDUCE_SCRIPT)
    bin_dir = Path(sys.executable).parent
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
            "--mca", "btl", "self,vader", "-x", "SMDATAPARALLEL_USE_SINGLENODE=1", "-x", "PATH",
            str(bin_dir / "smddprun"), sys.executable, "-m", "mpi4py", str(script)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env=_smddprun_env(OMPI_MCA_mpi_yield_when_idle="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [(tmp_path / f"result-{r}.txt").read_text() for r in range(ranks)]
    assert lines == [f"rank {r} of {ranks} ok, alias True" for r in range(ranks)]


def test_cross_rank_is_the_host_under_slot_mapping() -> None:
    from smddp_compat.cluster import horovod_mpi_environment

    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    identity = horovod_mpi_environment(ompi)
    assert (identity["HOROVOD_CROSS_RANK"], identity["HOROVOD_CROSS_SIZE"]) == ("1", "2")
    uneven = horovod_mpi_environment({**ompi, "OMPI_COMM_WORLD_SIZE": "3"})
    assert "HOROVOD_CROSS_RANK" not in uneven  # hosts with different rank counts: left to Horovod
