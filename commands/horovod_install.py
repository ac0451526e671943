"""``smddp install-horovod``: Horovod 0.28.1 built against the TensorFlow already installed in an environment of the
user's own (a venv, a conda env, a TensorFlow container image), with the kit's build fixes for TensorFlow 2.21.

The work is the kit's one build script, :data:`BUILD_SCRIPT` (``install_horovod.sh`` beside this module), which
``setup.sh`` and the training images run too: it checks the target (TensorFlow present and tested, the build tools
there), reuses a wheel built before for the same Horovod, TensorFlow, engines and Python (``$SMDDP_WHEEL_CACHE``), or
builds one (about 3 minutes on 2 cores), installs it, and writes the build's key where ``smddp doctor`` reads it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from smddp_compat.cli_help import HelpFormatter, epilog

__all__ = ["BUILD_SCRIPT", "build_parser", "install_command", "main"]

#: The build script every installation path runs (shipped in the package).
BUILD_SCRIPT = Path(__file__).resolve().with_name("install_horovod.sh")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``smddp install-horovod``."""
    parser = argparse.ArgumentParser(
        prog="smddp install-horovod", formatter_class=HelpFormatter,
        description="Build Horovod 0.28.1 against the TensorFlow installed in an environment and install it there "
                    "(Gloo and MPI; NCCL too on a machine with CUDA 12's nvcc and a GPU, or with SMDDP_GPU=1).",
        epilog=epilog(
            exit_codes=[("0", "installed, or already installed"),
                        ("2", "the environment cannot take it (one line names the reason and the fix)"),
                        ("other", "the build failed (its output is above)")],
            examples=[("into the environment running smddp", "smddp install-horovod"),
                      ("into a conda env", "smddp install-horovod --python ~/miniconda3/envs/tf/bin/python"),
                      ("a CPU-only build on a GPU machine", "SMDDP_GPU=0 smddp install-horovod")],
            notes=["Needs TensorFlow 2.21.x in the target (SMDDP_UNTESTED_TENSORFLOW=1 tries another), cmake, a C++ "
                   "compiler, Open MPI's headers, the target Python's headers and the highwayhash and farmhash "
                   "headers (Debian: build-essential cmake libhighwayhash-dev libfarmhash-dev libopenmpi-dev "
                   "openmpi-bin python3-dev). Built wheels are kept in $SMDDP_WHEEL_CACHE (default "
                   "~/.cache/smddp-compat/wheels) and reused by any environment with the same TensorFlow and Python."]),
    )
    parser.add_argument("--python", default=sys.executable, metavar="PYTHON",
                        help="the target environment's interpreter (default: the one running smddp)")
    parser.add_argument("--constraint", action="append", default=[], metavar="FILE",
                        help="a pip constraints file for what gets installed (repeatable)")
    return parser


def install_command(python: str, constraints: Sequence[str] = ()) -> list[str]:
    """The command that builds and installs Horovod into ``python``'s environment."""
    bash = shutil.which("bash") or "bash"
    return [bash, str(BUILD_SCRIPT), python, *[option for path in constraints for option in ("-c", path)]]


def main(argv: Sequence[str] | None = None) -> int:
    """``smddp install-horovod``; returns the build script's exit code (2 for a bad option)."""
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # --help (0) or a bad option (2)
        return int(exc.code or 0)
    for path in args.constraint:
        if not os.path.isfile(path):
            print(f"smddp install-horovod: --constraint {path!r} is not a file: give a pip constraints file",
                  file=sys.stderr)
            return 2
    try:
        return subprocess.call(install_command(args.python, [os.path.abspath(p) for p in args.constraint]))
    except OSError as exc:
        print(f"smddp install-horovod: could not run {BUILD_SCRIPT} with bash ({exc.strerror or exc}): install bash",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
