"""``python -m smddp_compat.local_mode.docker build|check|clean`` (``smddp image`` is ``build``): the twin's maintenance commands.

* ``build [--force] [--build-horovod] [--log FILE]``: builds the kit's image if missing (base image included) and
  prints its tag as the last line; ``--build-horovod`` builds Horovod inside instead of reusing the host's wheel.
* ``check``: says whether Docker can be used, and how to fix it if not.
* ``clean``: removes containers and networks left by twin jobs (label ``org.smddp-compat.twin-job``).
"""

from __future__ import annotations

import argparse
import sys
import time

from smddp_compat.local_mode.docker._commands import capture, run_command
from smddp_compat.local_mode.docker._containers import TWIN_LABEL
from smddp_compat.local_mode.docker._engine import find_engine
from smddp_compat.local_mode.docker._image import ensure_image
from smddp_compat.local_mode.docker._rootfs import host_base_recipe
from smddp_compat.local_mode.docker.errors import DockerError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m smddp_compat.local_mode.docker", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the kit's image if it is missing; print its tag")
    build.add_argument("--force", action="store_true", help="run docker build even if the tag exists")
    build.add_argument("--build-horovod", action="store_true", help="build Horovod in the image (ignore host wheel)")
    build.add_argument("--log", default=None, help="append the build output to this file instead of printing it")
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
        if args.command == "clean":
            removed = 0
            for kind, listing in (("rm", ["ps", "-aq"]), ("network rm", ["network", "ls", "-q"])):
                code, ids = capture([engine.docker, *listing, "--filter", f"label={TWIN_LABEL}"], timeout=60)
                if code == 0 and ids:
                    extra = ["--force"] if kind == "rm" else []
                    run_command([engine.docker, *kind.split(), *extra, *ids.split()], timeout=120, stream=sys.stdout)
                    removed += len(ids.split())
            print(f"removed {removed} container(s) and network(s)")
            return 0
        start = time.monotonic()
        build = ensure_image(
            engine,
            base=host_base_recipe(),
            reuse_host_wheel=not args.build_horovod,
            force=args.force,
            log_path=args.log,
            stream=None if args.log else sys.stdout,
        )
        state = "built" if build.built else "already present"
        wheel = f"; Horovod from {build.horovod_wheel}" if build.horovod_wheel else ""
        print(f"{build.tag} ({state} in {time.monotonic() - start:.1f} s{wheel})", file=sys.stderr)
        print(build.tag)
        return 0
    except DockerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def image_main(argv: list[str] | None = None) -> int:
    """``smddp image [--force] [--build-horovod] [--log FILE]``: ``build``, printing the image's tag last."""
    return main(["build", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
