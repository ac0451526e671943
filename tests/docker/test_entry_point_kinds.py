"""Every kind of entry point SageMaker's training toolkit runs, run in the kit's image as SageMaker starts it.

The toolkit (sagemaker-training, ``_entry_point_type``) knows three kinds: a ``.sh`` file or a name without ``.py``
is a command, executed directly (its shebang chooses the interpreter); a source folder with ``setup.py`` is a
package, installed with pip and run with ``python -m``; any other ``.py`` file is a program, run with ``python``.
Each request is built by the kit's estimator against moto and replayed by the twin (one host each, the four jobs at
once so that their start-up waits overlap). Every job records how it was run in ``output.tar.gz``.
"""

from __future__ import annotations

import io
import json
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest
from tests.fake_aws import ROLE, Aws

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leftovers")]

_RECORD = """
import importlib.metadata, json, os, sys
try:
    installed = importlib.metadata.version("train-package")
except importlib.metadata.PackageNotFoundError:
    installed = None
record = {{"kind": "{kind}", "argv": sys.argv[1:], "main": __name__, "file": os.path.abspath(__file__),
          "interpreter": sys.executable, "installed": installed}}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "probe.json"), "w") as out:
    json.dump(record, out)
"""

_SHELL = """#!/bin/bash
# bash only: [[ ]] and $BASH_VERSION (sh would fail here)
[[ -n "$BASH_VERSION" ]] || exit 3
printf '{"kind": "shell", "argv": "%s", "bash": "%s"}' "$*" "$BASH_VERSION" \\
    > "$SM_OUTPUT_DATA_DIR/probe.json"
"""

#: kind -> (entry point, the source folder's files).
KINDS: dict[str, tuple[str, dict[str, str]]] = {
    "program": ("train.py", {"train.py": _RECORD.format(kind="program")}),
    "shell": ("train.sh", {"train.sh": _SHELL}),
    "package": ("train_package.py", {
        "train_package.py": _RECORD.format(kind="package"),
        "setup.py": "from setuptools import setup\nsetup(name='train-package', version='1.0', "
                    "py_modules=['train_package'])\n",
    }),
    "command": ("run", {"run": "#!/usr/bin/env python3\n" + _RECORD.format(kind="command")}),
}


def _source(tmp_path: Path, kind: str) -> tuple[str, str]:
    entry, files = KINDS[kind]
    folder = tmp_path / kind
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return entry, str(folder)


def test_every_entry_point_kind_runs_as_the_toolkit_runs_it(aws: Aws, kit_image: str, tmp_path: Path) -> None:
    from smddp_compat.estimators import TensorFlow

    twins: dict[str, SageMakerTwin] = {}
    logs: dict[str, io.StringIO] = {}
    for kind in KINDS:
        entry, source = _source(tmp_path, kind)
        TensorFlow(
            entry_point=entry, source_dir=source, role=ROLE, instance_type="ml.c5.xlarge", instance_count=1,
            framework_version="2.21", py_version="py311", image_uri=kit_image, sagemaker_session=aws.sagemaker_session(),
            disable_profiler=True, debugger_hook_config=False, hyperparameters={"epochs": 2},
            # The twin's containers have no route out: pip builds the package with the image's setuptools.
            environment={"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1"} if kind == "package" else None,
        ).fit(wait=False, job_name=f"kind-{kind}")
        logs[kind] = io.StringIO()
        twins[kind] = SageMakerTwin(TrainingJobRequest.from_params(aws.requests[-1]), stream=logs[kind],
                                    output=str(tmp_path / "out"))
    results: dict[str, Any] = {}
    threads = [threading.Thread(target=lambda k=kind: results.__setitem__(k, twins[k].run())) for kind in KINDS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    records = {}
    for kind, result in results.items():
        assert result.status == "Completed", f"{kind}: {logs[kind].getvalue()[-3000:]}"
        with tarfile.open(result.output_artifacts) as archive:
            records[kind] = json.loads(archive.extractfile("probe.json").read())  # type: ignore[union-attr]
    assert set(records) == set(KINDS)
    for kind, record in records.items():
        arguments = record["argv"] if isinstance(record["argv"], str) else " ".join(record["argv"])
        assert record["kind"] == kind and "--epochs 2" in arguments, record  # the hyperparameters, as arguments
    assert records["shell"]["bash"], records["shell"]  # the shebang's bash, not /bin/sh
    assert records["program"]["main"] == "__main__" and records["program"]["file"] == "/opt/ml/code/train.py"
    assert records["package"]["main"] == "__main__" and records["package"]["installed"] == "1.0", records  # pip, -m
    assert records["program"]["installed"] is None
    assert records["command"]["file"] == "/opt/ml/code/run"
