"""smddp_compat.source_files: one exclusion list, used by the local code copy and by the upload (the jobs that
check it end to end: tests/local_mode/test_reliability.py and tests/estimators/test_submit_v2.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from smddp_compat.source_files import SOURCE_EXCLUDES, copy_source_tree, ignore_excluded, is_excluded


def test_every_copy_of_a_jobs_code_uses_the_one_list() -> None:
    from smddp_compat import estimators
    from smddp_compat.estimators import _source_bundle

    assert estimators.DEFAULT_SOURCE_EXCLUDES is SOURCE_EXCLUDES
    assert _source_bundle.is_excluded is is_excluded
    # One copy rule too (links, loops, special files: tests/reliability/test_job_files.py).
    assert _source_bundle.copy_source_tree is copy_source_tree
    runner_source = (Path(__file__).resolve().parents[2] / "local_mode" / "runner.py").read_text()
    assert "copy_source_tree(spec.source_dir" in runner_source and "copytree" not in runner_source
    assert "ignore_patterns" not in runner_source


#: Where tools people use every day keep secrets (issue 35 found each of these copied into jobs and uploaded).
SECRETS_TOOLS_KEEP = [
    ".config/gcloud/application_default_credentials.json", "application_default_credentials.json", ".kube/config",
    ".npmrc", ".pypirc", ".config/gh/hosts.yml", ".huggingface/token", ".cache/huggingface/token",
    ".config/rclone/rclone.conf", "rclone.conf", ".bash_history", ".zsh_history", "service-account.json",
    "keystore.jks", "server.key.bak", ".kaggle/kaggle.json", ".docker/config.json", ".git-credentials", ".envrc",
    ".azure/accessTokens.json", ".gnupg/private-keys-v1.d/k.key",
]


def test_keys_credentials_caches_and_version_control_are_left_out(tmp_path: Path) -> None:
    source = tmp_path / "src"
    kept = ["train.py", "pkg/model.py", "keys.py", "netrc_reader.py", "data/key.txt", "training_history/loss.csv",
            "config.yaml", "pkg/cache.py", "history_plot.py", "model.keras"]
    dropped = [".netrc", "id_rsa", "id_rsa.pub", "x.key", ".git/config", "__pycache__/t.pyc", "pkg/__pycache__/m.pyc",
               ".env", ".env.local", "deploy.pem", ".aws/credentials", "pkg/credentials", ".venv/bin/python",
               *SECRETS_TOOLS_KEEP]
    for rel in kept + dropped:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text("x")
    shutil.copytree(source, tmp_path / "copy", ignore=ignore_excluded)
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == sorted(kept)


def test_a_shipped_package_leaves_out_the_installed_kits_parts(tmp_path: Path, monkeypatch) -> None:
    """An installed kit holds estimators/, local_mode/, ... inside smddp_compat/: a job ships the runtime only."""
    from smddp_compat.estimators import _source_bundle

    installed = tmp_path / "site-packages" / "smddp_compat"
    for name in ("__init__.py", "cluster.py", "launcher/__init__.py", "local_mode/__init__.py",
                 "estimators/cli.py", "commands/cli.py", "bench/run.py", "entry_points/common/errors.py",
                 "__pycache__/x.pyc"):
        (installed / name).parent.mkdir(parents=True, exist_ok=True)
        (installed / name).write_text("")
    monkeypatch.setattr(_source_bundle, "compat_package_dir", lambda: str(installed))
    skipped = _source_bundle.copy_compat_core(str(tmp_path / "shipped"), SOURCE_EXCLUDES)
    shipped = sorted(p.relative_to(tmp_path / "shipped").as_posix() for p in (tmp_path / "shipped").rglob("*.py"))
    assert shipped == ["__init__.py", "cluster.py", "launcher/__init__.py"]
    assert {Path(p).name for p in skipped} == {"bench", "commands", "entry_points", "estimators", "local_mode",
                                               "__pycache__"}
