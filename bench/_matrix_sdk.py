"""One job of the compatibility matrix started through the SageMaker Python SDK (v2), as a user's estimator code
starts it: ``python -m smddp_compat.bench._matrix_sdk MODE --spec FILE``.

Modes:

* ``sdk-local``: the SDK's own local mode: the kit's estimator with ``instance_type="local"`` and a
  :class:`sagemaker.local.LocalSession` (``local_code``: the source folder is mounted, nothing uploaded); the SDK
  writes its docker-compose file and runs the kit's image on every host, on the ``sagemaker-local`` network (which
  the matrix creates first, as an internal network of this machine's engine). Offline: fake credentials, a region,
  and a user configuration that opts out of the SDK's telemetry.
* ``twin``: the kit's estimator sends its CreateTrainingJob request to a private moto server
  (:class:`~smddp_compat.estimators.replay.PrivateSageMaker`: S3 and SageMaker on loopback); the request, captured
  on the client side as SageMaker would receive it, is written to ``request.json`` in the output folder and replayed
  by the SageMaker twin in the kit's image.

Runs in its own process (the matrix supervises it with a time limit) so that the SDK's settings never reach the
matrix. Exit code 0 when the job completed, 1 when it did not, 2 for a bad spec. The job's output goes to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from smddp_compat.bench._launch import run_spec_mode
from smddp_compat.estimators.replay import PrivateSageMaker
from smddp_compat.local_mode.docker import SageMakerTwin, TrainingJobRequest

__all__ = ["main", "sdk_environment"]

ROLE = "arn:aws:iam::111111111111:role/SageMakerRole"
CPU_INSTANCE_TYPE = "ml.c5.xlarge"


def sdk_environment(work_dir: Path) -> dict[str, str]:
    """The environment variables an offline SDK run needs: a region, fake credentials, no AWS config files, and a
    user configuration (written into ``work_dir``) that opts out of telemetry. Names nothing of the user's."""
    config = work_dir / "sagemaker-user-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n",
                      encoding="utf-8")
    return {
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
        "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": os.devnull,
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "matrix-testing",
        "AWS_SECRET_ACCESS_KEY": "matrix-testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _estimator(spec: dict[str, Any], **settings: Any) -> Any:
    from smddp_compat.estimators import TensorFlow  # loads the SageMaker SDK: kept out of the matrix's import

    return TensorFlow(
        entry_point=spec["entry_point"], source_dir=spec["source_dir"], role=ROLE,
        instance_count=spec["hosts"], framework_version="2.21", py_version="py311", image_uri=spec["image"],
        hyperparameters=spec["hyperparameters"], distribution=spec["distribution"] or None,
        environment=spec["environment"], max_run=int(spec["max_run"]), disable_profiler=True,
        debugger_hook_config=False, **settings,
    )


def _sdk_local(spec: dict[str, Any]) -> int:
    from sagemaker.local import LocalSession  # the SDK: kept out of the matrix's import, as below

    session = LocalSession()
    session.config = {"local": {"local_code": True}}  # the source folder is mounted at /opt/ml/code
    estimator = _estimator(spec, instance_type="local", sagemaker_session=session,
                           output_path=f"file://{spec['output']}", model_dir=False, base_job_name=spec["job_name"])
    try:
        estimator.fit(wait=True, logs="All")
    except Exception as exc:  # noqa: BLE001 - the SDK raises several kinds for a failed job: each is the answer
        print(f"matrix: the SDK's local mode job failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    status = session.sagemaker_client.describe_training_job(estimator.latest_training_job.name)["TrainingJobStatus"]
    print(f"matrix: the SDK's local mode job ended: {status}", flush=True)
    return 0 if status == "Completed" else 1


def _twin(spec: dict[str, Any]) -> int:
    import boto3  # here, not at the top: the matrix imports this module for sdk_environment

    with PrivateSageMaker() as aws:
        boto_session = aws.boto_session()
        saved, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, boto_session  # the SDK's stray clients: private too
        try:
            session = aws.sagemaker_session(boto_session)
            captured: list[dict[str, Any]] = []
            session.sagemaker_client.meta.events.register(
                "provide-client-params.sagemaker.CreateTrainingJob",
                lambda params, **_: captured.append(json.loads(json.dumps(params, default=str))),
            )
            estimator = _estimator(spec, instance_type=CPU_INSTANCE_TYPE, sagemaker_session=session)
            estimator.fit(wait=False, job_name=spec["job_name"])
        finally:
            boto3.DEFAULT_SESSION = saved  # the twin's own clients (its S3 in the job's network) are its own
        if not captured:
            print("matrix: the estimator sent no CreateTrainingJob request", flush=True)
            return 1
        Path(spec["output"], "request.json").write_text(json.dumps(captured[-1], indent=2), encoding="utf-8")
        request = TrainingJobRequest.from_params(captured[-1])
        result = SageMakerTwin(request, stream=sys.stdout, s3_client_factory=aws.s3_client,
                               job_name=spec["job_name"], output=spec["output"], stop_grace=10).run()
    print(f"matrix: the twin's job ended: {result.status}"
          + (f" ({result.failure_reason})" if result.failure_reason else ""), flush=True)
    return 0 if result.status == "Completed" else 1


def main(argv: list[str] | None = None) -> int:
    """Runs one job; see the module's docstring."""
    return run_spec_mode(argv, prog="python -m smddp_compat.bench._matrix_sdk", doc=__doc__,
                         spec_help="JSON: entry_point, source_dir, hosts, distribution, hyperparameters, environment, "
                                   "image, output, job_name, max_run",
                         modes={"sdk-local": _sdk_local, "twin": _twin})

if __name__ == "__main__":
    sys.exit(main())
