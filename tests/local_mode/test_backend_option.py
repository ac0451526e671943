"""`smddp local --backend` on the command line."""

import pytest

from local_mode import cli


def test_docker_backend_without_a_request_is_refused(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    code = cli.main([str(script), "--backend", "docker", "--output", str(tmp_path / "out")])
    assert code == 2
    assert "--backend docker replays a SageMaker request" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_backend_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--backend", "kubernetes"])
    assert info.value.code == 2
    assert "invalid choice: 'kubernetes'" in capsys.readouterr().err
