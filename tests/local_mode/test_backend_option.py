"""`smddp local --backend/--image` on the command line."""

import pytest

from local_mode import cli


def test_image_without_docker_backend_is_refused(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    code = cli.main([str(script), "--image", "my/image:1", "--output", str(tmp_path / "out")])
    assert code == 2
    assert "--image 'my/image:1' needs --backend docker" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_backend_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--backend", "kubernetes"])
    assert info.value.code == 2
    assert "invalid choice: 'kubernetes'" in capsys.readouterr().err
