"""What a job leaves in its folders is data, never a path to follow (issue 19, items 2, 5 and 6).

Real files on disk: a symbolic link planted as the failure file pointing at a file outside the job's tree that holds
a secret, a FIFO as the failure file, a job's model folder swapped for a link, link loops in a source folder, and
tarballs with links and ``..`` members extracted as on Python 3.11.0-3.11.3 (no ``extractall(filter=)``). Each test
asserts the secret never shows, the call returns within a bound, and the message says what was refused.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from smddp_compat import contract
from smddp_compat.job_files import (
    UnsafeJobFileError,
    extract_tarball,
    iter_regular_files,
    read_job_file,
)
from tests.reliability.conftest import quiet_env, smddp

SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/SECRET-19"


def _within(seconds: float, call: Callable[[], Any], unblock: Callable[[], None] = lambda: None) -> Any:
    """``call()``'s result, failing the test if it takes longer than ``seconds`` (``unblock`` then frees it)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        unblock()
        thread.join(5)
        pytest.fail(f"the call did not return within {seconds} s")
    if "error" in box:
        raise box["error"]
    box["elapsed"] = time.monotonic() - start
    return box["value"]


def _unblock_fifo(path: Path) -> Callable[[], None]:
    def unblock() -> None:  # a writer that opens and closes lets a blocked reader see end-of-file
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    return unblock


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    """A file outside every job tree holding a secret, as ~/.aws/credentials would."""
    home = tmp_path / "home" / ".aws"
    home.mkdir(parents=True)
    path = home / "credentials"
    path.write_text(f"[default]\n{SECRET}\n")
    return path


@pytest.fixture
def host_tree(tmp_path: Path) -> Path:
    """A host's /opt/ml as local mode builds it (only the folders these tests use)."""
    root = tmp_path / "job" / "algo-1"
    for folder in ("model", "output/data", "checkpoints"):
        (root / folder).mkdir(parents=True)
    return root


# -- the failure file -------------------------------------------------------------------------------------------------


def test_a_failure_file_linked_to_a_secret_is_not_read(host_tree: Path, secret_file: Path) -> None:
    failure = contract.failure_file(host_tree / "output")
    failure.symlink_to(secret_file)
    reason = _within(5, lambda: contract.read_failure_reason(failure))
    assert reason is not None and SECRET not in reason and "credentials" not in reason.replace(str(failure), "")
    assert "symbolic link" in reason and "not read" in reason


def test_a_fifo_as_the_failure_file_never_blocks(host_tree: Path) -> None:
    failure = contract.failure_file(host_tree / "output")
    os.mkfifo(failure)
    reason = _within(5, lambda: contract.read_failure_reason(failure), unblock=_unblock_fifo(failure))
    assert reason is not None and "FIFO" in reason and "not read" in reason


def test_a_regular_failure_file_is_read_and_cut_at_the_limit(host_tree: Path) -> None:
    contract.write_failure_file(host_tree / "output", "x" * 3_000_000)
    reason = contract.read_failure_reason(contract.failure_file(host_tree / "output"))
    assert reason is not None and len(reason) == contract.FAILURE_REASON_LIMIT and reason.endswith("...")


def _failing_job(tmp_path: Path, plant: str) -> subprocess.CompletedProcess[str]:
    """``smddp local`` of a script that plants ``plant`` (Python code run with ``failure`` set) then exits 3."""
    script = tmp_path / "plant.py"
    script.write_text(
        "import os, sys\n"
        "failure = os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure')\n"
        f"{plant}\n"
        "print('planted', flush=True)\n"
        "sys.exit(3)\n"
    )
    argv = smddp("local", str(script), "--output", str(tmp_path / "out"), "--max-run", "60", "--job-name", "plant")
    return subprocess.run(argv, env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.processes
def test_smddp_local_ends_a_job_whose_failure_file_is_a_fifo(tmp_path: Path) -> None:
    start = time.monotonic()
    try:
        proc = _failing_job(tmp_path, "os.mkfifo(failure)")
    except subprocess.TimeoutExpired:
        pytest.fail("smddp local did not end within 60 s: it blocked opening the job's FIFO")
    elapsed = time.monotonic() - start
    print(f"job with a FIFO failure file ended in {elapsed:.1f} s")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "FIFO" in proc.stdout and "not read" in proc.stdout
    assert elapsed < 30


@pytest.mark.processes
def test_smddp_local_never_reports_a_linked_secret_as_the_failure_reason(tmp_path: Path, secret_file: Path) -> None:
    proc = _failing_job(tmp_path, f"os.symlink({str(secret_file)!r}, failure)")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "symbolic link" in proc.stdout


# -- the safe reader and the walk ------------------------------------------------------------------------------------


def test_the_reader_refuses_links_fifos_sockets_and_paths_outside_the_tree(
    tmp_path: Path, host_tree: Path, secret_file: Path
) -> None:
    data = host_tree / "output" / "data"
    (data / "ok.txt").write_text("fine")
    assert read_job_file(data / "ok.txt", host_tree) == b"fine"
    assert read_job_file(data / "ok.txt", host_tree, limit=2) == b"fi"
    (data / "link").symlink_to(secret_file)
    os.mkfifo(data / "fifo")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(data / "sock"))
        for name, words in (("link", "a symbolic link"), ("fifo", "a FIFO"), ("sock", "a socket")):
            with pytest.raises(UnsafeJobFileError, match=words) as caught:
                _within(5, lambda path=data / name: read_job_file(path, host_tree), _unblock_fifo(data / "fifo"))
            assert SECRET not in str(caught.value) and "Fix:" in str(caught.value)
    # A folder of the tree swapped for a link: refused on the way down, whatever the file's name.
    (host_tree / "output" / "data").rename(host_tree / "output" / "data-real")
    (host_tree / "output" / "data").symlink_to(secret_file.parent, target_is_directory=True)
    with pytest.raises(UnsafeJobFileError, match="link or not a folder"):
        read_job_file(host_tree / "output" / "data" / "credentials", host_tree)
    with pytest.raises(UnsafeJobFileError, match="outside the job's tree"):
        read_job_file(secret_file, host_tree)
    with pytest.raises(FileNotFoundError):
        read_job_file(host_tree / "model" / "missing", host_tree)


def test_the_walk_yields_regular_files_only_and_never_follows_links(host_tree: Path, secret_file: Path) -> None:
    checkpoints = host_tree / "checkpoints"
    (checkpoints / "step-1").mkdir()
    (checkpoints / "step-1" / "weights").write_bytes(b"w")
    (checkpoints / "index").write_text("1")
    (checkpoints / "loop").symlink_to(".", target_is_directory=True)
    (checkpoints / "aws").symlink_to(secret_file.parent, target_is_directory=True)
    (checkpoints / "creds").symlink_to(secret_file)
    os.mkfifo(checkpoints / "fifo")
    found = _within(5, lambda: list(iter_regular_files(checkpoints)))
    assert [relative for relative, _ in found] == ["index", "step-1/weights"]
    assert all(stat.S_ISREG(info.st_mode) for _, info in found)


# -- the artifacts ----------------------------------------------------------------------------------------------------


def _members(tarball: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(tarball) as archive:
        return {member.name: member for member in archive.getmembers()}


def _contents(tarball: Path) -> bytes:
    with tarfile.open(tarball) as archive:
        handles = [archive.extractfile(member) for member in archive.getmembers() if member.isfile()]
        return b"".join(handle.read() for handle in handles if handle is not None)


def test_model_tarball_holds_no_secret_no_fifo_and_no_link_out_of_the_tree(
    tmp_path: Path, host_tree: Path, secret_file: Path
) -> None:
    from smddp_compat.local_mode.artifacts import pack_tarball

    model = host_tree / "model"
    (model / "1").mkdir()
    (model / "1" / "saved_model.pb").write_bytes(b"pb")
    (model / "latest").symlink_to("1", target_is_directory=True)  # inside: kept as a link
    (model / "loop").symlink_to("..", target_is_directory=True)  # the host tree: outside the model folder
    (model / "creds").symlink_to(secret_file)
    os.mkfifo(model / "fifo")
    tarball = _within(10, lambda: pack_tarball({"": model}, tmp_path / "model.tar.gz"), _unblock_fifo(model / "fifo"))
    members = _members(tarball)
    assert sorted(members) == ["1", "1/saved_model.pb", "latest"]
    assert members["latest"].issym() and members["latest"].linkname == "1"
    assert SECRET.encode() not in _contents(tarball)


def test_a_model_folder_swapped_for_a_link_is_not_packed(tmp_path: Path, host_tree: Path, secret_file: Path) -> None:
    from smddp_compat.local_mode.artifacts import store_artifacts

    (host_tree / "model").rmdir()
    (host_tree / "model").symlink_to(secret_file.parent, target_is_directory=True)
    (host_tree / "output").rename(tmp_path / "elsewhere")  # output/ itself a link to a folder holding data/credentials
    (tmp_path / "elsewhere" / "data" / "credentials").write_text(SECRET)
    (host_tree / "output").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    paths = store_artifacts(
        tmp_path / "dest",
        model_dirs={"algo-1": host_tree / "model"},
        output_data_dirs={"algo-1": host_tree / "output" / "data"},
        log_files={},
        scratch_dir=tmp_path,
    )
    assert paths.model is not None and paths.output is not None
    for tarball in (paths.model, paths.output):
        assert _members(Path(tarball)) == {} and SECRET.encode() not in Path(tarball).read_bytes()
    assert any("model" in note and "link" in note for note in paths.skipped), paths.skipped


# -- the source bundle ------------------------------------------------------------------------------------------------


@pytest.fixture
def looped_source(tmp_path: Path, secret_file: Path) -> Path:
    """A source folder with two link loops, a link out of it to a secret, a link to a folder outside and a FIFO."""
    source = tmp_path / "project" / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "train.py").write_text("print('train')\n")
    (source / "pkg" / "mod.py").write_text("X = 1\n")
    (source / "pkg" / "loop").symlink_to("..", target_is_directory=True)  # back to src: a loop inside the folder
    (source / "pkg" / "self").symlink_to(".", target_is_directory=True)  # a second loop: 2 ** 40 paths if followed
    (source / "up").symlink_to("..", target_is_directory=True)  # the folder above src
    (source / "creds").symlink_to(secret_file)
    (source / "alias.py").symlink_to("train.py")  # a link to a file inside: copied as that file
    (source / "env-link").symlink_to(".env")
    (source / ".env").write_text(SECRET)  # excluded, and so is a link to it
    os.mkfifo(source / "fifo")
    return source


def _tree(folder: Path) -> list[str]:
    return sorted(relative for relative, _ in iter_regular_files(folder))


def _assert_copied_once(copy: Path) -> None:
    assert _tree(copy) == ["alias.py", "pkg/mod.py", "train.py"]
    assert not any(path.is_symlink() for path in copy.rglob("*"))
    assert (copy / "alias.py").read_text() == "print('train')\n"
    for path in copy.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text()


def test_the_estimators_bundle_copies_each_file_once_through_link_loops(tmp_path: Path, looped_source: Path) -> None:
    from smddp_compat.estimators._source_bundle import DEFAULT_SOURCE_EXCLUDES, copy_filtered

    staged = tmp_path / "staged"
    skipped = _within(20, lambda: copy_filtered(str(looped_source), str(staged), DEFAULT_SOURCE_EXCLUDES),
                      _unblock_fifo(looped_source / "fifo"))
    _assert_copied_once(staged)
    for name in ("pkg/loop", "pkg/self", "up", "creds", "env-link", "fifo", ".env"):
        assert str(looped_source / name) in skipped


def test_local_modes_code_copy_copies_each_file_once_and_no_link_out(tmp_path: Path, looped_source: Path) -> None:
    from smddp_compat.local_mode import JobSpec
    from smddp_compat.local_mode.runner import _copy_code

    code = tmp_path / "code"
    code.mkdir()
    spec = JobSpec(entry_point="train.py", source_dir=str(looped_source), output_path=str(tmp_path / "out"))
    _within(20, lambda: _copy_code(spec, code, []), _unblock_fifo(looped_source / "fifo"))
    _assert_copied_once(code)
    assert not (code / "creds").exists() and not (code / "up").exists()


def test_a_copy_into_its_own_source_never_copies_itself(tmp_path: Path) -> None:
    """``cp -r src src/work`` refuses; the kit's copy leaves its destination (and the job's fenced folders) out."""
    from smddp_compat.source_files import copy_source_tree

    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "train.py").write_text("print(1)\n")
    (source / "pkg" / "m.py").write_text("X = 1\n")
    (source / "out" / "old-job").mkdir(parents=True)
    (source / "out" / "old-job" / "model.tar.gz").write_bytes(b"x" * 1000)
    destination = source / "work" / "job" / "algo-1" / "code"
    left_out = _within(20, lambda: copy_source_tree(source, destination, fenced=[source / "out"]))
    copied = sorted(p.relative_to(destination).as_posix() for p in destination.rglob("*") if p.is_file())
    assert copied == ["pkg/m.py", "train.py"]
    assert {Path(item.path).name for item in left_out} == {"code", "out"}
    assert all("a folder of the job itself" in item.reason for item in left_out)


@pytest.mark.processes
@pytest.mark.parametrize("where", ["work-dir", "tmpdir", "output"])
def test_smddp_local_with_its_trees_inside_the_source_folder_copies_the_code_once(tmp_path: Path, where: str) -> None:
    """The job's work folder, its temporary tree or its output inside ``--source-dir`` (``--source-dir .`` with the
    default output, or TMPDIR inside the source) used to be copied into the code folder, recursively (765 levels,
    then ``File name too long``)."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(
        "import os, pathlib\n"
        "code = pathlib.Path(os.environ['SM_MODULE_DIR'] if os.environ.get('SM_MODULE_DIR', '').startswith('/') "
        "else '.')\n"
        "files = sorted(str(p) for p in pathlib.Path('.').rglob('*') if p.is_file())\n"
        "print('code files:', files)\n"
        "assert files == ['train.py'], files\n"
    )
    env = quiet_env()
    options = ["--output", str(tmp_path / "out")]
    if where == "work-dir":
        options += ["--work-dir", str(source / "work")]
    elif where == "tmpdir":
        (source / "tmp").mkdir()
        env["TMPDIR"] = str(source / "tmp")
    else:
        options = ["--output", str(source / "out")]
    done = subprocess.run(smddp("local", "train.py", "--source-dir", str(source), "--job-name", f"inside-{where}",
                                "--instance-count", "2", "--max-run", "120", *options),
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "code files: ['train.py']" in done.stdout
    assert "Traceback" not in done.stderr


# -- channel names ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_channel_names_are_refused_by_jobspec(tmp_path: Path, name: str) -> None:
    from smddp_compat.local_mode import ConfigurationError, JobSpec

    (tmp_path / "train.py").write_text("")
    with pytest.raises(ConfigurationError) as caught:
        JobSpec(entry_point=str(tmp_path / "train.py"), channels={name: str(tmp_path)})
    assert caught.value.field == "channels" and caught.value.value == name
    assert "input/data" in str(caught.value)


@pytest.mark.processes
def test_dot_channel_names_are_refused_by_smddp_local(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    proc = subprocess.run(
        smddp("local", str(tmp_path / "train.py"), "--channel", f"..={tmp_path}", "--output", str(tmp_path / "out")),
        env=quiet_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "channels='..'" in proc.stderr and "must not run" not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", [".", "..", "a/b", ""])
def test_the_estimators_refuse_channel_names_that_are_not_one_folder(name: str) -> None:
    from smddp_compat.estimators._validation import check_channel_names
    from smddp_compat.estimators.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        check_channel_names({name: "s3://bucket/data"})
    assert caught.value.field == "inputs" and caught.value.value == name
    assert check_channel_names({"train": "s3://b/p", "test.v2": "s3://b/q"}) is None
    assert check_channel_names("s3://bucket/data") is None  # one URI: the "training" channel


# -- tarballs on Python 3.11.0-3.11.3 ---------------------------------------------------------------------------------


def _tarball(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            payload = data.get(member.name)
            if payload is not None:
                member.size = len(payload)
            archive.addfile(member, io.BytesIO(payload) if payload is not None else None)
    return path


def _file(name: str, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info


@pytest.fixture
def python_3_11_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """tarfile as Python 3.11.0-3.11.3 has it: no data_filter, and extractall() refuses filter=."""
    monkeypatch.delattr(tarfile, "data_filter")
    original = tarfile.TarFile.extractall

    def extractall(self: tarfile.TarFile, path: str = ".", members: Any = None, *, numeric_owner: bool = False,
                   **unexpected: Any) -> None:
        if unexpected:
            raise TypeError(f"extractall() got an unexpected keyword argument {next(iter(unexpected))!r}")
        original(self, path, members, numeric_owner=numeric_owner, filter="fully_trusted")

    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)


def test_extraction_works_without_extractall_filter(tmp_path: Path, python_3_11_2: None) -> None:
    folder = tarfile.TarInfo("1")
    folder.type = tarfile.DIRTYPE
    archive = _tarball(tmp_path / "model.tar.gz", [folder, _file("1/saved_model.pb", 0o4777), _file("1/v")],
                       {"1/saved_model.pb": b"pb", "1/v": b"v"})
    destination = tmp_path / "model"
    destination.mkdir()
    assert sorted(extract_tarball(archive, destination)) == ["1/saved_model.pb", "1/v"]
    assert (destination / "1" / "saved_model.pb").read_bytes() == b"pb"
    assert stat.S_IMODE((destination / "1" / "saved_model.pb").stat().st_mode) == 0o755  # no setuid, no o+w


@pytest.fixture(params=["data-filter", "python-3.11.2"])
def either_extraction(request: pytest.FixtureRequest) -> None:
    """Both ways the kit extracts: ``extractall(filter="data")``, and its own writer where that is missing."""
    if request.param == "python-3.11.2":
        request.getfixturevalue("python_3_11_2")


def _folder(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


@pytest.mark.parametrize("members", [["a", "a/b"], ["a/b", "a"], ["a/b/c", "a/b"]], ids=["file-then-below",
                                                                                        "below-then-file", "deeper"])
def test_a_name_that_is_a_file_and_a_folder_is_refused_before_anything_is_written(
    tmp_path: Path, members: list[str], either_extraction: None,
) -> None:
    archive = _tarball(tmp_path / "model.tar.gz", [_file(name) for name in members], {name: b"x" for name in members})
    destination = tmp_path / "model"
    destination.mkdir()
    with pytest.raises(UnsafeJobFileError, match="is both a file and a folder"):
        extract_tarball(archive, destination)
    assert list(destination.iterdir()) == []


def test_a_member_dot_is_the_destination_itself(tmp_path: Path, either_extraction: None) -> None:
    archive = _tarball(tmp_path / "model.tar.gz", [_folder("."), _folder("./1"), _file("./1/v")], {"./1/v": b"v"})
    destination = tmp_path / "model"
    destination.mkdir()
    assert extract_tarball(archive, destination) == ["1/v"]
    assert (destination / "1" / "v").read_bytes() == b"v"


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


@pytest.mark.parametrize("limit", ["free-space", "cap"])
def test_a_tar_bomb_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          limit: str) -> None:
    """A 64 KB archive that declares 64 MiB of zeros (a thousandfold, as a bomb's; the limits scaled down with it: a
    2 GiB bomb cost 14 s of gzip a case): refused against the disk's free space and the kit's cap."""
    from smddp_compat import job_files

    archive = tmp_path / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        member = _file("model/big")
        member.size = 64 << 20
        tar.addfile(member, io.BufferedReader(_Zeros(member.size)))
    assert archive.stat().st_size < 128 << 10
    if limit == "free-space":
        monkeypatch.setattr(job_files, "_free_bytes", lambda _folder: 32 << 20)
    else:
        monkeypatch.setattr(job_files, "MAX_EXTRACTED_BYTES", 32 << 20)
    destination = tmp_path / "model"
    destination.mkdir()
    with pytest.raises(UnsafeJobFileError, match="67108864 bytes once extracted") as refused:
        extract_tarball(archive, destination)
    assert ("free at" if limit == "free-space" else "the most the kit extracts") in str(refused.value)
    assert list(destination.iterdir()) == []


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize("bad, words", [
    (_file("../escaped.txt"), "outside the destination"),
    (_file("/abs.txt"), "outside the destination"),
    (_file("a/../../escaped.txt"), "outside the destination"),
    (_link("creds", "/home/user/.aws/credentials"), "symbolic link"),
    (_link("hard", "/etc/passwd", tarfile.LNKTYPE), "hard link"),
    (_link("fifo", "", tarfile.FIFOTYPE), "device or FIFO"),
])
@pytest.mark.parametrize("old_python", [True, False], ids=["python-3.11.2", "this-python"])
def test_extraction_refuses_links_special_files_and_escapes(
    tmp_path: Path, request: pytest.FixtureRequest, bad: tarfile.TarInfo, words: str, old_python: bool
) -> None:
    if old_python:
        request.getfixturevalue("python_3_11_2")
    data = {"ok.txt": b"ok", bad.name: b"x"} if bad.isfile() else {"ok.txt": b"ok"}
    archive = _tarball(tmp_path / "evil.tar.gz", [_file("ok.txt"), bad], data)
    destination = tmp_path / "out" / "model"
    destination.mkdir(parents=True)
    with pytest.raises(UnsafeJobFileError, match=words):
        extract_tarball(archive, destination)
    assert list(destination.iterdir()) == []  # nothing written: every member is checked first
    assert not (tmp_path / "out" / "escaped.txt").exists()


def test_fetch_model_extracts_on_python_3_11_2(tmp_path: Path, python_3_11_2: None) -> None:
    from smddp_compat.estimators._jobs import fetch_model

    archive = _tarball(tmp_path / "model.tar.gz", [_file("1/saved_model.pb")], {"1/saved_model.pb": b"pb"})

    class SageMaker:
        def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # boto3's argument name
            return {"TrainingJobStatus": "Completed",
                    "ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/job/output/model.tar.gz"}}

    class S3:
        def download_file(self, bucket: str, key: str, target: str) -> None:
            Path(target).write_bytes(archive.read_bytes())

    names = fetch_model(SageMaker(), S3(), "job", str(tmp_path / "model"))
    assert names == ["1/saved_model.pb"] and (tmp_path / "model" / "1" / "saved_model.pb").read_bytes() == b"pb"


def test_fetch_model_names_the_job_and_the_member_it_refused(tmp_path: Path) -> None:
    from smddp_compat.estimators._jobs import fetch_model
    from smddp_compat.estimators.errors import JobError

    archive = _tarball(tmp_path / "model.tar.gz", [_file("ok"), _link("creds", "/root/.aws/credentials")], {"ok": b""})

    class SageMaker:
        def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # boto3's argument name
            return {"TrainingJobStatus": "Completed", "ModelArtifacts": {"S3ModelArtifacts": "s3://b/k/model.tar.gz"}}

    class S3:
        def download_file(self, bucket: str, key: str, target: str) -> None:
            Path(target).write_bytes(archive.read_bytes())

    with pytest.raises(JobError) as caught:
        fetch_model(SageMaker(), S3(), "evil-job", str(tmp_path / "model"))
    assert caught.value.job_name == "evil-job" and "'creds'" in str(caught.value)
    assert "symbolic link" in str(caught.value) and not (tmp_path / "model").exists()


if sys.platform != "linux":  # O_NOFOLLOW per component and FIFOs as used here are Linux behaviour
    pytestmark = pytest.mark.skip(reason="Linux only")
