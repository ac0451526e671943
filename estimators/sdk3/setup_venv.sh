#!/usr/bin/env bash
# Builds the SageMaker SDK v3 test environment for the estimators' v3 plug-in (smddp-compat[sdk3]).
#
#   bash estimators/sdk3/setup_venv.sh            # creates or checks .venv-sdk3/ at the repository root
#   SDK3_VENV=/tmp/v3 bash estimators/sdk3/setup_venv.sh
#
# SDK v2 (the main .venv) and SDK v3 cannot share one environment (both own the `sagemaker` package), so the v3
# plug-in is tested in its own venv. No TensorFlow is needed there: the plug-in and its driver scripts do not
# import it. Idempotent: a second run only checks the pins.
# Run the v3 tests with:  .venv-sdk3/bin/python -m pytest tests/estimators/sdk3 -q
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${SDK3_VENV:-$ROOT/.venv-sdk3}
PY="$VENV/bin/python"
PYTHON=${PYTHON:-python3}
SAGEMAKER_SPEC=${SDK3_SAGEMAKER_SPEC:-"sagemaker==3.27.0"}
PINS=("$SAGEMAKER_SPEC" "moto[server]==5.2.5" "boto3" "psutil" "pytest>=8" "pytest-timeout>=2.3")

if [ ! -x "$PY" ]; then
  echo "==> [sdk3] creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
fi

if "$PY" - "$SAGEMAKER_SPEC" <<'PYCHK' 2>/dev/null
import sys
from importlib.metadata import version
import sagemaker.train, moto, psutil, pytest  # noqa: F401  (the imports themselves are the check)
wanted = sys.argv[1].split("==", 1)
sys.exit(0 if len(wanted) < 2 or version("sagemaker") == wanted[1] else 1)
PYCHK
then
  echo "==> [sdk3] $VENV already has $SAGEMAKER_SPEC, moto and pytest"
else
  echo "==> [sdk3] installing ${PINS[*]} into $VENV"
  "$PY" -m pip install -q --disable-pip-version-check "${PINS[@]}"
fi
# The plug-in's own package is used from the source tree (tests put the repository root on sys.path), so no
# editable install of smddp-compat is needed: that would pull TensorFlow and sagemaker<3.
"$PY" -m pip check
echo "==> [sdk3] ready: $PY"
