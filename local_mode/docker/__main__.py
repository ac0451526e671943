"""``python -m smddp_compat.local_mode.docker check|clean``: the twin's maintenance commands (``--help``: each one's
help, exit codes and examples).

* ``check``: says whether Docker can be used, and how to fix it if not.
* ``clean``: removes containers and networks left by twin jobs (label ``org.smddp-compat.twin-job``).

The image the twin runs is built by ``smddp image`` (:mod:`smddp_compat.image`).
"""

from __future__ import annotations

import argparse
import sys

from smddp_compat.cli_help import help_texts
from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import find_engine
from smddp_compat.image.errors import DockerError
from smddp_compat.local_mode.docker._containers import TWIN_LABEL


_PROG = "python -m smddp_compat.local_mode.docker"
_DOCKER_CODES = [("0", "done"), ("2", "Docker cannot be used (the message says why and how to fix it), or bad usage")]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG, **help_texts(
        """
        The SageMaker twin's maintenance commands: check that Docker can be used, remove what twin jobs left.
        The image the twin runs is built by smddp image; jobs run with smddp local --backend docker.
        """,
        exit_codes=_DOCKER_CODES,
        examples=[("is Docker usable?", f"{_PROG} check"), ("remove left-over twin containers", f"{_PROG} clean")],
    ))
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="check or clean")
    commands.add_parser("check", help="check that Docker can be used", **help_texts(
        "Check that the Docker engine (DOCKER_HOST, else the default socket) answers; print its version and "
        "where it is, or why it cannot be used and how to fix it.",
        exit_codes=[("0", "Docker can be used"), ("2", "it cannot (the message says why and how to fix it)")],
        examples=[("check the engine DOCKER_HOST names",
                   f"DOCKER_HOST=unix:///run/docker.sock {_PROG} check")],
    ))
    commands.add_parser("clean", help="remove containers and networks left by twin jobs", **help_texts(
        f"Remove the containers and networks that twin jobs left behind (those labelled {TWIN_LABEL}), e.g. after "
        "the twin itself was killed; print how many were removed.",
        exit_codes=_DOCKER_CODES,
        examples=[("remove them", f"{_PROG} clean")],
    ))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code.
    """
    args = _parser().parse_args(argv)
    try:
        engine = find_engine()
        if args.command == "check":
            print(f"docker {engine.server_version} at {engine.docker_host or 'the default socket'}")
            return 0
        removed = 0
        for kind, listing in (("rm", ["ps", "-aq"]), ("network rm", ["network", "ls", "-q"])):
            code, ids = capture([engine.docker, *listing, "--filter", f"label={TWIN_LABEL}"], timeout=60)
            if code == 0 and ids:
                extra = ["--force"] if kind == "rm" else []
                run_command([engine.docker, *kind.split(), *extra, *ids.split()], timeout=120, stream=sys.stdout)
                removed += len(ids.split())
        print(f"removed {removed} container(s) and network(s)")
        return 0
    except DockerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
