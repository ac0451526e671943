"""The docker backend's pieces, without a Docker daemon: compose file, command translation, image context and
digest, the errors when Docker is missing or down."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from local_mode.docker import DockerUnavailableError, find_engine, hosts_of
from local_mode.docker._compose import AGENT_PATH, KIT_MOUNT, ContainerHost, compose_content, external_mounts
from local_mode.docker._exec import EXEC_CLIENT, PathMap, exec_spec, job_environment
from local_mode.docker._image import assemble_context, context_digest, host_horovod_wheel, kit_root
from local_mode.docker._rootfs import BaseImageRecipe, _apt_sources
from local_mode.errors import ConfigurationError
from smddp_compat.launcher import ProcessSpec

ROOT = Path(__file__).resolve().parents[2]


def _hosts(tmp_path: Path, count: int = 2) -> list[ContainerHost]:
    hosts = []
    for n in range(count):
        tree = tmp_path / "job" / f"algo-{n + 1}"
        (tree / "input" / "data").mkdir(parents=True)
        hosts.append(ContainerHost(f"algo-{n + 1}", f"127.0.0.{n + 2}", tree))
    return hosts


def test_compose_file_uses_host_networking_and_loopback_names_only(tmp_path: Path) -> None:
    hosts = _hosts(tmp_path)
    content = compose_content(
        hosts, project="smddp-x-1", image="img:1", kit_root=ROOT, grace=5, user=None, environment={}
    )
    assert set(content["services"]) == {"algo-1", "algo-2"}
    assert "networks" not in content
    for host in hosts:
        service = content["services"][host.name]
        assert service["network_mode"] == "host"
        assert service["container_name"] == f"smddp-x-1-{host.name}"
        assert "algo-1:127.0.0.2" in service["extra_hosts"] and "algo-2:127.0.0.3" in service["extra_hosts"]
        for entry in service["extra_hosts"]:  # every name resolves to a loopback address, never a bridge's
            assert entry.rsplit(":", 1)[1].startswith("127."), entry
        assert f"{host.tree.resolve()}:/opt/ml" in service["volumes"]
        assert f"{ROOT}:{KIT_MOUNT}:ro" in service["volumes"]
        assert service["command"] == ["python3", f"{KIT_MOUNT}/local_mode/docker/_agent.py", "idle", "5"]
        assert service["labels"] == {"org.smddp-compat.job": "smddp-x-1"}


def test_links_out_of_the_tree_are_mounted_at_the_same_path(tmp_path: Path) -> None:
    tree = _hosts(tmp_path, 1)[0].tree
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    shared = tmp_path / "ckpt"
    shared.mkdir()
    (tree / "input" / "data" / "train").symlink_to(data)
    (tree / "checkpoints").symlink_to(shared)
    (tree / "inside").mkdir()
    (tree / "input" / "data" / "alias").symlink_to(tree / "inside")  # inside the tree: already mounted
    mounts = {(m.source, m.target) for m in external_mounts(tree)}
    assert mounts == {(str(data), str(data)), (str(shared), str(shared))}


def test_processes_are_translated_into_docker_exec_without_values_on_the_command_line(tmp_path: Path) -> None:
    host = _hosts(tmp_path, 1)[0]
    parent = {"PATH": "/usr/bin:/bin", "HOME": "/root", "VIRTUAL_ENV": "/work/.venv", "LANG": "C.UTF-8",
              "TF_CPP_MIN_LOG_LEVEL": "2", "UNRELATED": "same"}  # fmt: skip
    env = {
        **parent,
        "PATH": "/work/.venv/bin:/usr/bin",
        "SM_MODEL_DIR": f"{host.tree}/model",
        "SM_TRAINING_ENV": json.dumps({"model_dir": f"{host.tree}/model", "module_dir": f"{host.tree}/code"}),
        "PYTHONPATH": f"{ROOT}/smddp_compat/smdistributed_shim:{host.tree}/code",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
        "LD_PRELOAD": "/lib/x.so",
    }
    spec = ProcessSpec(
        argv=[sys.executable, f"{host.tree}/code/train.py", "--model_dir", f"{host.tree}/model"],
        env=env,
        label="algo-1,0",
        cwd=f"{host.tree}/code",
        log_path=str(tmp_path / "algo-1.log"),
        host="algo-1",
    )
    paths = PathMap.for_host(host.tree, ROOT, "/opt/ml", KIT_MOUNT)
    converted = exec_spec(spec, docker="/usr/bin/docker", container="c-algo-1", paths=paths, parent=parent, grace=5)
    argv = converted.argv
    # The wrapper, then the docker exec client, then the in-container wrapper, then the process.
    assert argv[:10] == [sys.executable, "-I", EXEC_CLIENT, "/usr/bin/docker", "c-algo-1", "algo-1,0", "5", AGENT_PATH,
                         "--", "/usr/bin/docker"]  # fmt: skip
    assert argv[10:13] == ["exec", "--workdir", "/opt/ml/code"]
    inside = argv[argv.index("c-algo-1", 10) + 1 :]
    assert inside == ["python3", AGENT_PATH, "run", "algo-1,0", "--",
                      "python", "/opt/ml/code/train.py", "--model_dir", "/opt/ml/model"]  # fmt: skip
    assert not any("s3cr3t" in arg for arg in argv), "a secret value reached the command line"
    assert "AWS_SECRET_ACCESS_KEY" in argv and converted.env["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"
    assert "LD_PRELOAD=/lib/x.so" in argv and "LD_PRELOAD" not in converted.env  # never applied to the client
    assert converted.env["SM_MODEL_DIR"] == "/opt/ml/model"
    assert json.loads(converted.env["SM_TRAINING_ENV"]) == {"model_dir": "/opt/ml/model", "module_dir": "/opt/ml/code"}
    assert converted.env["PYTHONPATH"] == f"{KIT_MOUNT}/smddp_compat/smdistributed_shim:/opt/ml/code"
    assert converted.env["PATH"] == parent["PATH"]  # the client's own PATH; the host's never goes in
    for name in ("PATH", "HOME", "VIRTUAL_ENV", "UNRELATED"):
        assert name not in argv
    assert "TF_CPP_MIN_LOG_LEVEL" in argv  # inherited, but of a family a training job reads
    assert (converted.label, converted.log_path, converted.host) == (spec.label, spec.log_path, spec.host)


def test_prefixes_are_rewritten_only_as_whole_path_components(tmp_path: Path) -> None:
    paths = PathMap.for_host(Path("/tmp/j/algo-1"), Path("/src/kit"), "/opt/ml", KIT_MOUNT)
    assert paths.rewrite("/tmp/j/algo-1/model") == "/opt/ml/model"
    assert paths.rewrite("/tmp/j/algo-10/model") == "/tmp/j/algo-10/model"
    assert paths.rewrite("/src/kit:/tmp/j/algo-1") == f"{KIT_MOUNT}:/opt/ml"
    assert paths.argument("/usr/bin/python3.11") == "python"
    assert job_environment({"HOME": "/x", "NEW": "1", "OLD": "1"}, {"OLD": "1"}) == {"NEW": "1"}


def test_hosts_are_read_from_the_prepared_processes(tmp_path: Path) -> None:
    addresses = json.dumps({"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"})
    specs = [
        ProcessSpec(["python"], {"SAGEMAKER_BASE_DIR": f"/j/algo-{n // 2 + 1}", "SMDDP_HOST_ADDRESSES": addresses},
                    f"algo-{n // 2 + 1},{n}", host=f"algo-{n // 2 + 1}")
        for n in range(4)
    ]  # fmt: skip
    assert hosts_of(specs) == [
        ContainerHost("algo-1", "127.0.0.2", Path("/j/algo-1")),
        ContainerHost("algo-2", "127.0.0.3", Path("/j/algo-2")),
    ]
    with pytest.raises(ConfigurationError, match="SAGEMAKER_BASE_DIR"):
        hosts_of([ProcessSpec(["python"], {}, "algo-1,0", host="algo-1")])


def test_image_digest_changes_with_the_kit_and_only_with_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    assemble_context(kit_root(), first, wheel=None)
    assemble_context(kit_root(), second, wheel=None)
    assert (first / "stack" / "setup.sh").is_file() and (first / "kit" / "local_mode" / "docker" / "_agent.py").is_file()
    assert not list((first / "stack").glob("*_mode")), "code must not be in the stack layer's context"
    assert not list(first.rglob("__pycache__"))
    base = "smddp-compat-base:bookworm-0"
    assert context_digest(first, base) == context_digest(second, base)
    assert context_digest(first, base) != context_digest(first, "smddp-compat-base:bookworm-1")
    (second / "kit" / "local_mode" / "docker" / "_agent.py").write_text("# changed\n")
    assert context_digest(first, base) != context_digest(second, base)


def test_base_recipe_digest_covers_the_ca_certificates(tmp_path: Path) -> None:
    cert = tmp_path / "corp.crt"
    cert.write_text("one")
    recipe = BaseImageRecipe(ca_certificates=(cert,))
    tag = recipe.tag
    cert.write_text("two")
    assert recipe.tag != tag and recipe.tag.startswith("smddp-compat-base:bookworm-")


def test_apt_sources_are_read_in_both_formats(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://mirror.example/debian bookworm main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
    )
    assert _apt_sources(tmp_path) == [
        ("http://mirror.example/debian", ["bookworm"]),
        ("http://sec.example/debian-security", ["bookworm-security"]),
    ]


def test_host_wheel_is_reused_only_for_the_same_debian_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "horovod-0.28.1-tf-2.21.0-gloo-mpi-py311"
    (tmp_path / key).mkdir()
    wheel = tmp_path / key / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    monkeypatch.setenv("SMDDP_WHEEL_CACHE", str(tmp_path))
    monkeypatch.setattr("local_mode.docker._image.host_codename", lambda: "bookworm")
    assert host_horovod_wheel(kit_root(), "bookworm") == (key, wheel)
    assert host_horovod_wheel(kit_root(), "trixie") is None
    monkeypatch.setattr("local_mode.docker._image.host_codename", lambda: "trixie")
    assert host_horovod_wheel(kit_root(), "bookworm") is None


def test_a_stopped_daemon_gets_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI on this machine")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(DockerUnavailableError) as caught:
        find_engine()
    message = str(caught.value)
    assert f"DOCKER_HOST=unix://{tmp_path}/no-daemon.sock" in message
    assert "smddp_docker_start" in message and "--backend process" in message


def test_a_missing_docker_cli_gets_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DockerUnavailableError, match=r"apt-get install docker\.io.*--backend process"):
        find_engine()


def test_importing_the_backend_loads_no_tensorflow() -> None:
    import subprocess

    code = "import sys, local_mode.docker; sys.exit('tensorflow' in sys.modules or 'sagemaker' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0


def test_the_maintenance_command_explains_a_stopped_daemon(tmp_path: Path) -> None:
    import subprocess

    if shutil.which("docker") is None:
        pytest.skip("no docker CLI on this machine")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/none.sock", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "local_mode.docker", "check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "does not answer" in done.stderr and "--backend process" in done.stderr
