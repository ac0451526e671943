"""Each local host its own ``/opt/ml`` (local_mode.host_views): a script that names SageMaker's paths literally
writes its own host's tree, and nothing of the job is made, read or written in this machine's ``/opt/ml``."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from smddp_compat.local_mode import ConfigurationError, JobSpec, run
from smddp_compat.local_mode import host_views

pytestmark = pytest.mark.processes

# SageMaker's paths, literally, as public scripts write them.
_LITERAL = """\
import json, os
host = os.environ["SM_CURRENT_HOST"]
with open("/opt/ml/input/config/resourceconfig.json") as config:
    assert json.load(config)["current_host"] == host
with open(f"/opt/ml/model/{host}.txt", "w") as model:
    model.write(host)
with open(f"/opt/ml/output/data/seen-{host}.txt", "w") as seen:
    seen.write(" ".join(sorted(os.listdir("/opt/ml/model"))))
"""


def test_a_script_writing_opt_ml_literally_writes_its_own_hosts_tree(tmp_path: Path) -> None:
    if Path("/opt/ml").exists():
        pytest.skip("this machine has an /opt/ml folder: the test proves none is made")
    reason = host_views._unavailable_reason([tmp_path])
    if reason is not None:
        pytest.skip(f"no host views here: {reason}")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "literal.py").write_text(_LITERAL)
    spec = JobSpec(entry_point="literal.py", source_dir=str(tmp_path / "code"), instance_count=2,
                   output_path=str(tmp_path / "out"), job_name="literal")
    stream = io.StringIO()
    result = run(spec, stream=stream)
    assert result.ok, stream.getvalue()[-3000:]
    with tarfile.open(tmp_path / "out" / "literal" / "output" / "model.tar.gz") as model:
        assert sorted(model.getnames()) == ["algo-1.txt", "algo-2.txt"]
    with tarfile.open(tmp_path / "out" / "literal" / "output" / "output.tar.gz") as output:
        seen = {m.name: output.extractfile(m).read().decode() for m in output.getmembers() if m.isfile()}
    assert seen == {"seen-algo-1.txt": "algo-1.txt", "seen-algo-2.txt": "algo-2.txt"}  # each its own model folder
    assert not Path("/opt/ml").exists()


def test_the_host_view_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert host_views.host_view_choice({}) == "private"
    assert host_views.host_view_choice({"SMDDP_HOST_VIEW": "Shared"}) == "shared"
    with pytest.raises(ConfigurationError, match=r"SMDDP_HOST_VIEW='yes': is not a host view.*Fix: unset it"):
        host_views.host_view_choice({"SMDDP_HOST_VIEW": "yes"})
    monkeypatch.setattr(host_views.os, "geteuid", lambda: 1000)
    assert "not root" in (host_views._unavailable_reason([Path("/tmp")]) or "")
    monkeypatch.setattr(host_views.os, "geteuid", lambda: 0)
    assert "mount option" in (host_views._unavailable_reason([Path("/tmp/a,b")]) or "")
