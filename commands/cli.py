"""The ``smddp`` command: one entry point for the kit's subcommands (:data:`SUBCOMMANDS`, and ``shim-path``).

``smddp --help`` lists the commands; ``smddp <command> --help`` gives a command's options, exit codes and examples
(every command's help is laid out by :mod:`smddp_compat.cli_help`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Sequence

from smddp_compat.cli_help import epilog
from smddp_compat.smdistributed_shim import path as shim_path

__all__ = ["main", "SUBCOMMANDS"]

#: subcommand -> (module, function, whether the subcommand name is passed on, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, bool, str]] = {
    "local": ("smddp_compat.commands.local_cli", "main", False, "run a SageMaker training job on this machine"),
    "tune": ("smddp_compat.commands.tune_cli", "main", False,
             "tune a training job's hyperparameters on this machine (SageMaker's tuning, trials as smddp local jobs)"),
    "submit": ("smddp_compat.commands.submit_cli", "main", True, "submit a training job to SageMaker"),
    "status": ("smddp_compat.commands.submit_cli", "main", True, "show a SageMaker training job's status"),
    "logs": ("smddp_compat.commands.submit_cli", "main", True, "print a SageMaker training job's logs"),
    "wait": ("smddp_compat.commands.submit_cli", "main", True, "wait for a SageMaker training job to end"),
    "fetch": ("smddp_compat.commands.submit_cli", "main", True, "download a training job's model artifact"),
    "mlflow-send": ("smddp_compat.commands.mlflow_cli", "main", False,
                    "send a tracked job's metrics and status to MLflow, kept when its server was unreachable"),
    "bench": ("smddp_compat.bench.run", "main", False, "run the benchmarks and print the table of ratios"),
    "matrix": ("smddp_compat.bench.matrix", "main", False,
               "run every strategy x Keras x launcher as short jobs; write the compatibility matrix"),
    "doctor": ("smddp_compat.commands.doctor", "main", False, "check this machine's set-up and say how to fix what is missing"),
    "install-horovod": ("smddp_compat.commands.horovod_install", "main", False,
                        "build Horovod against the TensorFlow of an environment and install it there"),
    "image": ("smddp_compat.image.__main__", "main", False,
              "build or reuse the training image (--gpu: CUDA); print its tag"),
}


def _usage() -> str:
    """``smddp --help``: the commands, where each one's help is, the exit codes and examples."""
    lines = ["usage: smddp <command> [args...]", "",
             "SageMaker's smdistributed.dataparallel for TensorFlow 2.21: run a training job on this machine or",
             "on SageMaker, check the set-up, build the training image, measure. The launcher is smddprun",
             "(smddprun --help).",
             "", "commands:"]
    width = max(map(len, [*SUBCOMMANDS, "shim-path"]))
    lines += [f"  {name:<{width}} {entry[3]}" for name, entry in SUBCOMMANDS.items()]
    lines.append(f"  {'shim-path':<{width}} print the directory holding the smdistributed alias (for PYTHONPATH)")
    lines += ["", "Run `smddp <command> --help` for a command's options, exit codes and examples.", ""]
    lines.append(epilog(
        exit_codes=[("0", "success"), ("2", "no or unknown command, or bad usage: nothing was started"),
                    ("other", "the command's own (smddp <command> --help lists them)")],
        examples=[("the bundled MNIST job on this machine: 2 hosts x 1 process, distribution smddp", "smddp local"),
                  ("a command's options, exit codes and examples", "smddp submit --help")],
    ))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smddp`` console script; returns the subcommand's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage(), file=sys.stdout if args else sys.stderr)  # no command is a usage error: said on stderr
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "shim-path":
        print(shim_path())
        return 0
    if command not in SUBCOMMANDS:
        print(f"smddp: unknown command {command!r}.\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name, keep_name, _ = SUBCOMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(f"smddp: the {command!r} command is unavailable ({exc}); run `bash setup.sh` to install the kit.",
              file=sys.stderr)
        return 2
    function: Callable[[list[str]], int] = getattr(module, function_name)
    try:
        return int(function(args if keep_name else rest) or 0)
    finally:
        from smddp_compat.launcher import release_stdout  # the launcher package: not loaded for `smddp --help`

        release_stdout()  # a closed standard output (`smddp local | head -1`) must not turn into a traceback


if __name__ == "__main__":
    sys.exit(main())
