"""Artifacts as SageMaker packs them ("How Amazon SageMaker Processes Training Output"): every host's model folder and
output data merged into one archive each, a name two hosts wrote reported as a clash, the artifacts stored whatever
the job's end, and ``CompressionType: NONE`` as the model's files uncompressed."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from smddp_compat.local_mode.artifacts import store_artifacts


def _host(root: Path, host: str, model: dict[str, str], data: dict[str, str]) -> Path:
    tree = root / host
    for folder, files in ((tree / "model", model), (tree / "output" / "data", data)):
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
    return tree


def _store(tmp_path: Path, hosts: dict[str, Path], compression: str = "GZIP"):
    return store_artifacts(
        tmp_path / "out" / "job",
        model_dirs={host: tree / "model" for host, tree in hosts.items()},
        output_data_dirs={host: tree / "output" / "data" for host, tree in hosts.items()},
        log_files={}, scratch_dir=tmp_path, compression=compression,
    )


def _files(tarball: str) -> dict[str, str]:
    with tarfile.open(tarball) as archive:
        return {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_every_hosts_model_and_output_are_merged_into_one_archive(tmp_path: Path) -> None:
    """A script where each host saves its own part of the model ships every part, as SageMaker ships it."""
    hosts = {
        "algo-1": _host(tmp_path / "hosts", "algo-1", {"part-0.npy": "w0", "shared/a.txt": "a"}, {"m-0.json": "0"}),
        "algo-2": _host(tmp_path / "hosts", "algo-2", {"part-1.npy": "w1", "shared/b.txt": "b"}, {"m-1.json": "1"}),
    }
    paths = _store(tmp_path, hosts)
    assert _files(paths.model) == {"part-0.npy": "w0", "part-1.npy": "w1", "shared/a.txt": "a", "shared/b.txt": "b"}
    assert _files(paths.output) == {"m-0.json": "0", "m-1.json": "1"}  # no algo-N/ folders: SageMaker's layout
    assert paths.clashes == ()


def test_a_name_two_hosts_wrote_is_reported_and_the_first_hosts_kept(tmp_path: Path) -> None:
    hosts = {
        "algo-1": _host(tmp_path / "hosts", "algo-1", {"weights.npy": "chief"}, {}),
        "algo-2": _host(tmp_path / "hosts", "algo-2", {"weights.npy": "worker"}, {}),
    }
    paths = _store(tmp_path, hosts)
    assert _files(paths.model) == {"weights.npy": "chief"}
    assert paths.clashes == ("model.tar.gz: weights.npy written by algo-1 and algo-2; algo-1's kept",)


def test_an_uncompressed_model_is_stored_as_its_files(tmp_path: Path) -> None:
    hosts = {
        "algo-1": _host(tmp_path / "hosts", "algo-1", {"1/saved_model.pb": "pb"}, {"o.txt": "o"}),
        "algo-2": _host(tmp_path / "hosts", "algo-2", {"extra.txt": "x"}, {}),
    }
    paths = _store(tmp_path, hosts, compression="NONE")
    model = Path(paths.model)
    assert model == tmp_path / "out" / "job" / "output" / "model"
    assert {p.relative_to(model).as_posix(): p.read_text() for p in model.rglob("*") if p.is_file()} == {
        "1/saved_model.pb": "pb", "extra.txt": "x"}
    assert not (model.parent / "model.tar.gz").exists() and _files(paths.output) == {"o.txt": "o"}


def test_an_unknown_compression_type_is_refused(tmp_path: Path) -> None:
    from smddp_compat.local_mode.errors import ArtifactError

    with pytest.raises(ArtifactError, match="GZIP, NONE"):
        _store(tmp_path, {"algo-1": _host(tmp_path / "hosts", "algo-1", {}, {})}, compression="ZIP")


@pytest.mark.processes
def test_the_process_backend_stores_a_failed_jobs_model_and_reports_clashes(tmp_path: Path) -> None:
    from smddp_compat.local_mode import JobSpec, run

    script = tmp_path / "train.py"
    script.write_text("import os, sys, time\n"
                      "open(os.path.join(os.environ['SM_MODEL_DIR'], 'weights.npy'), 'w').write(os.environ['SM_CURRENT_HOST'])\n"
                      "if os.environ['SM_CURRENT_HOST'] == 'algo-2':\n"
                      "    time.sleep(1)  # algo-1 has saved and ended by now\n"
                      "    sys.exit(3)\n")
    import io

    stream = io.StringIO()
    result = run(JobSpec(entry_point=str(script), instance_count=2, output_path=str(tmp_path / "out"),
                         job_name="clash"), stream=stream)
    assert result.status == "Failed"
    assert result.artifacts.model and _files(result.artifacts.model) == {"weights.npy": "algo-1"}
    assert "name clash between hosts" in stream.getvalue() and "weights.npy written by algo-1 and algo-2" in \
        stream.getvalue()
