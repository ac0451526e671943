"""Fixtures for the estimator tests: the fake AWS of :mod:`tests.fake_aws`, tarball and script helpers."""

from __future__ import annotations

import tarfile
from typing import Any

import pytest

from tests.fake_aws import ACCESS_KEY, ACCOUNT, REGION, REPO, ROLE, SECRET_KEY, Aws, aws, moto_url  # noqa: F401


def tar_members(path: str) -> dict[str, bytes]:
    """Every regular file of a tar.gz and its content."""
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.lstrip("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.fixture
def tiny_script(tmp_path: Any) -> str:
    """A TF-free entry point that records what it saw."""
    path = tmp_path / "code" / "train.py"
    path.parent.mkdir()
    path.write_text(
        "import json, os, sys\n"
        "out = os.environ.get('PROBE_DIR')\n"
        "if out:\n"
        "    name = os.environ.get('DTENSOR_CLIENT_ID') or os.environ.get('HOROVOD_RANK') or '0'\n"
        "    with open(os.path.join(out, f'probe-{name}.json'), 'w') as f:\n"
        "        json.dump({'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}, f)\n"
    )
    return str(path)
