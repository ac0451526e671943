"""SageMaker's ``train`` command, for the kit's image: what SageMaker and the SageMaker SDK's local mode run.

A SageMaker training container is started with the argument ``train`` and a filled ``/opt/ml``: hyperparameters
(JSON-encoded, including ``sagemaker_program`` and ``sagemaker_submit_directory``), resource and input-data
configuration. AWS's framework images answer with the sagemaker-training toolkit; this is the small part of it a
single-process-per-host job needs, built on the same environment code as ``smddp local`` (so a script sees the same
``SM_*`` variables and ``--name value`` arguments either way):

* the ``SM_*`` and platform variables for this host, the hyperparameters as arguments;
* the entry point run from the submitted code folder (``python`` for ``.py``, ``sh`` for ``.sh``), its output
  unbuffered, SIGTERM passed on to it;
* its exit code returned; on failure ``/opt/ml/output/failure`` holds a reason if the script wrote none.

Distributed launches (MPI, smddp) are not done here: run those with ``smddp local --backend docker``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from local_mode.environment import (
    DISTRIBUTION_FLAGS,
    TOOLKIT_PARAMETERS,
    cmd_args,
    default_region,
    platform_environment,
    training_environment,
)
from local_mode.layout import HostLayout

__all__ = ["main"]

_BASE = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _decode(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _fail(layout: HostLayout, reason: str) -> int:
    print(f"train: {reason}", file=sys.stderr, flush=True)
    layout.failure_file.parent.mkdir(parents=True, exist_ok=True)
    if not layout.failure_file.exists():
        layout.failure_file.write_text(reason + "\n", encoding="utf-8")
    return 1


def main(argv: list[str] | None = None) -> int:
    """Runs the job's entry point under the SageMaker contract.

    Args:
        argv: Ignored (SageMaker passes ``train``); kept for the console-script signature.

    Returns:
        The entry point's exit code (1 when it could not be started).
    """
    del argv
    resource = _read_json(_BASE / "input/config/resourceconfig.json")
    host = resource.get("current_host", os.environ.get("CURRENT_HOST", "algo-1"))
    resource.setdefault("current_host", host)
    resource.setdefault("hosts", [host])
    layout = HostLayout(host=host, root=_BASE)
    encoded = _read_json(layout.hyperparameters_file)
    values = {name: _decode(text) for name, text in encoded.items()}
    framework = {k: v for k, v in values.items() if k.startswith("sagemaker_") or k in TOOLKIT_PARAMETERS}
    user = {k: v for k, v in values.items() if k not in framework}
    program = framework.get("sagemaker_program")
    if not program:
        return _fail(layout, "hyperparameter sagemaker_program is missing: set entry_point on the estimator")
    enabled = [flag for flag in DISTRIBUTION_FLAGS if framework.get(flag)]
    if enabled:
        return _fail(
            layout,
            f"distributed launch {enabled} is not supported by this image's `train`; run the job with "
            "`smddp local --backend docker --distribution ...` instead",
        )
    submit = str(framework.get("sagemaker_submit_directory") or layout.code_dir)
    if submit.startswith("file://"):
        submit = submit[len("file://") :]
    code_dir = Path(submit)
    if not code_dir.is_dir():
        return _fail(layout, f"sagemaker_submit_directory {submit!r} is not a folder in the container "
                             "(an s3:// source cannot be fetched here): use local code (local_code=True)")
    framework["sagemaker_submit_directory"] = str(code_dir)
    job_name = os.environ.get("TRAINING_JOB_NAME") or str(framework.get("sagemaker_job_name", "local-job"))
    env = dict(os.environ)
    env.update(platform_environment(layout, job_name=job_name, region=default_region()))
    env.update(
        training_environment(
            layout,
            resource=resource,
            data_config=_read_json(layout.input_data_config_file),
            hyperparameters=user,
            framework_parameters=framework,
            num_cpus=os.cpu_count() or 1,
            num_gpus=0,
            job_name=job_name,
        )
    )
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_dir), env.get("PYTHONPATH", "")) if p)
    script = code_dir / program
    if not script.is_file():
        return _fail(layout, f"entry point {program!r} not found in {code_dir}")
    runner = [sys.executable] if program.endswith(".py") else (["/bin/sh"] if program.endswith(".sh") else [])
    command = [*runner, str(script), *cmd_args(user)]
    layout.model_dir.mkdir(parents=True, exist_ok=True)
    layout.output_data_dir.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(command, cwd=code_dir, env=env)  # noqa: S603 - argument list

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        _fail(layout, f"entry point {program} {how}")
        return code if code > 0 else 128 - code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
