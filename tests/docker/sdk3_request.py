"""Builds an SDK v3 ``ModelTrainer`` training job with the kit's SMDDPCompat config against the fake AWS and writes its
CreateTrainingJob request (SDK v3's other configs run through its own local mode: test_sagemaker_local_mode.py).

Run by the twin's tests with ``.venv-sdk3``'s Python (SDK v3 cannot share an environment with v2), with the fake
AWS's variables (``AWS_ENDPOINT_URL`` at moto, fake credentials, the telemetry opt-out) in the environment:

    .venv-sdk3/bin/python tests/docker/sdk3_request.py OUT.json IMAGE SOURCE_DIR ENTRY_SCRIPT [HYPERPARAMETERS_JSON]
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import boto3  # noqa: E402
from botocore.client import BaseClient  # noqa: E402
from sagemaker.core.helper import session_helper  # noqa: E402
from sagemaker.core.helper.session_helper import Session  # noqa: E402
from sagemaker.train import ModelTrainer  # noqa: E402
from sagemaker.train.configs import Compute, SourceCode  # noqa: E402

from smddp_compat.estimators.sdk3 import SOURCE_IGNORE_PATTERNS, SMDDPCompat  # noqa: E402

out, image, source_dir, entry_script = sys.argv[1:5]
# The SDK builds its STS client with a regional endpoint that ignores AWS_ENDPOINT_URL (FACTS.md): point it at moto.
session_helper.sts_regional_endpoint = lambda region: os.environ["AWS_ENDPOINT_URL"]
session = Session(boto_session=boto3.Session(region_name="us-east-1"))
# ModelTrainer sends CreateTrainingJob through a client of its own: every botocore client's calls are watched.
captured = []
_make_api_call = BaseClient._make_api_call


def _recording(self, operation_name, api_params):
    if operation_name == "CreateTrainingJob":
        captured.append(json.loads(json.dumps(api_params, default=str)))
    return _make_api_call(self, operation_name, api_params)


BaseClient._make_api_call = _recording
hyperparameters = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {"kind": "smddp"}
trainer = ModelTrainer(
    training_image=image,
    role="arn:aws:iam::123456789012:role/SageMakerRole",
    sagemaker_session=session,
    source_code=SourceCode(source_dir=source_dir, entry_script=entry_script, ignore_patterns=SOURCE_IGNORE_PATTERNS),
    compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2),
    distributed=SMDDPCompat(),
    hyperparameters=hyperparameters,
    base_job_name="twin-sdk3-smddp",
)
trainer.train(wait=False)
with open(out, "w", encoding="utf-8") as handle:
    json.dump(captured[-1], handle)
