"""One job of the compatibility matrix started through the SageMaker Python SDK v3, as a user's ``ModelTrainer`` code
starts it: ``python -m smddp_compat.bench._matrix_sdk3 MODE --spec FILE``, run by the SDK v3 environment's Python
(``.venv-sdk3``: SDK v3 cannot share an environment with v2).

Modes:

* ``sdk3-local``: :func:`smddp_compat.estimators.sdk3.train_local`, the kit's process backend (no Docker).
* ``sdk3-container``: the SDK's own ``Mode.LOCAL_CONTAINER``: the SDK writes its docker-compose file and runs the kit's
  image on every host, on the ``sagemaker-local`` network (which the matrix creates first, as an internal network of
  this machine's engine).

The spec is the matrix's (``bench/matrix.py``): entry_point, source_dir, hosts, ``distributed`` (the kit config's
class name and fields, or null), hyperparameters, environment, image, output, job_name, max_run. Exit code 0 when
the job completed, 1 when it did not, 2 for a bad spec. The job's output goes to stdout.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from sagemaker.core.training.configs import Compute, SourceCode, StoppingCondition
from sagemaker.core.utils.exceptions import FailedStatusError
from sagemaker.train import ModelTrainer
from sagemaker.train.model_trainer import Mode

from smddp_compat.bench._launch import run_spec_mode
from smddp_compat.estimators import sdk3  # SDK v3 is this module's environment: it runs in .venv-sdk3 only

__all__ = ["main", "CPU_INSTANCE_TYPE"]

#: The instance type the jobs name (4 vCPUs): the ranks run on this machine's CPUs.
CPU_INSTANCE_TYPE = "ml.c5.xlarge"


def _trainer(spec: dict[str, Any], *, instance_type: str, container_root: str | None = None) -> Any:
    distributed = None
    if spec.get("distributed"):
        name, fields = spec["distributed"]
        distributed = getattr(sdk3, name)(**fields)
    settings = {"local_container_root": container_root} if container_root else {}
    return ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER, training_image=spec["image"] or "smddp-compat:latest",
        source_code=SourceCode(source_dir=spec["source_dir"], entry_script=spec["entry_point"]),
        compute=Compute(instance_type=instance_type, instance_count=spec["hosts"]), distributed=distributed,
        hyperparameters=dict(spec["hyperparameters"]), environment=dict(spec["environment"]),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=int(spec["max_run"])),
        base_job_name=spec["job_name"], **settings,
    )


def _sdk3_local(spec: dict[str, Any]) -> int:
    trainer = _trainer(spec, instance_type=CPU_INSTANCE_TYPE)
    try:
        job = sdk3.train_local(trainer, output_path=spec["output"], job_name=spec["job_name"])
    except FailedStatusError as exc:
        print(f"matrix: the local job failed: {exc}", flush=True)
        return 1
    print(f"matrix: the local job ended: {job.training_job_status}", flush=True)
    return 0 if job.training_job_status == "Completed" else 1


def _sdk3_container(spec: dict[str, Any]) -> int:
    root = Path(spec["output"], "container-root")
    root.mkdir(parents=True, exist_ok=True)
    # The kit's configs check the job against a real instance type; the SDK's local mode names its hosts "local".
    checked = _trainer(spec, instance_type=CPU_INSTANCE_TYPE)
    if checked.distributed is not None:
        checked.distributed.check(CPU_INSTANCE_TYPE, spec["hosts"], spec["image"])
    trainer = _trainer(spec, instance_type="local", container_root=str(root))
    try:
        trainer.train(wait=True, logs=True)
    except Exception as exc:  # noqa: BLE001 - the SDK raises several kinds for a failed job: each is the answer
        print(f"matrix: the SDK's local container job failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    for name in ("model.tar.gz", "output.tar.gz"):  # to where every other launcher of the matrix leaves them
        shutil.copy2(root / "compressed_artifacts" / name, Path(spec["output"], name))
    print(f"matrix: the SDK's local container job completed ({root / 'compressed_artifacts'})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs one job; see the module's docstring."""
    return run_spec_mode(argv, prog="python -m smddp_compat.bench._matrix_sdk3", doc=__doc__,
                         spec_help="JSON: see the module's docstring",
                         modes={"sdk3-local": _sdk3_local, "sdk3-container": _sdk3_container})

if __name__ == "__main__":
    sys.exit(main())
