"""``python -m smddp_compat.local_mode.docker check|clean``: the twin's maintenance commands.

* ``check``: says whether Docker can be used, and how to fix it if not.
* ``clean``: removes containers and networks left by twin jobs (label ``org.smddp-compat.twin-job``).

The image the twin runs is built by ``smddp image`` (:mod:`smddp_compat.image`).
"""

from __future__ import annotations

import argparse
import sys

from smddp_compat.image.commands import capture, run_command
from smddp_compat.image.engine import find_engine
from smddp_compat.image.errors import DockerError
from smddp_compat.local_mode.docker._containers import TWIN_LABEL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m smddp_compat.local_mode.docker", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="check that Docker can be used")
    commands.add_parser("clean", help="remove containers and networks left by twin jobs")
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
        engine = find_engine(need_compose=False)
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
