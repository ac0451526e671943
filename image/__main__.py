"""``smddp image [--gpu] [--force] [--build-horovod] [--log FILE]`` (also ``python -m smddp_compat.image``).

Builds the kit's training image, or reuses it, and prints its tag last: what, how and where its ``--help`` says.
"""

from __future__ import annotations

import argparse
import sys
import time

from smddp_compat.cli_help import help_texts
from smddp_compat.image.build import ensure_image
from smddp_compat.image.engine import find_engine
from smddp_compat.image.errors import DockerError
from smddp_compat.image.rootfs import host_base_recipe

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="smddp image",  # also when run as python -m smddp_compat.image: the command users are shown
        **help_texts(
            """
            Build the kit's SageMaker training image if the Docker engine does not hold it yet (its debootstrapped
            base included), or reuse it; print its tag as the last line of standard output. The tag is
            smddp-compat:<digest of the build context> (also smddp-compat:latest); with --gpu the GPU image,
            smddp-compat-gpu:<digest> and smddp-compat-gpu:latest. What was done and how long it took go to
            standard error. smddp local --backend docker and the SageMaker twin build it on first use too.

            The engine is the one DOCKER_HOST names (else the default socket).
            """,
            exit_codes=[("0", "the image is there (built or reused); its tag is the last line of standard output"),
                        ("2", "Docker cannot be used, or the build failed (the message says why and what to do)")],
            examples=[
                ("build or reuse the CPU image (about 8 minutes the first time on 2 cores; seconds when current)",
                 "smddp image"),
                ("rebuild it, the build's output in a file, its steps and their times on the console",
                 "smddp image --force --log /tmp/image-build.log"),
                ("the GPU image, for ml.p4d / ml.g5 instance types", "smddp image --gpu"),
            ],
        ),
    )
    parser.add_argument("--gpu", action="store_true",
                        help="the GPU image (smddp-compat-gpu: tensorflow[and-cuda], Horovod with NCCL) for GPU "
                             "instance types; about 28 minutes the first time on 2 cores")
    parser.add_argument("--force", action="store_true", help="run docker build even if the tag exists")
    parser.add_argument("--build-horovod", action="store_true",
                        help="build Horovod in the image (ignore the host's cached wheel)")
    parser.add_argument("--log", default=None, metavar="FILE",
                        help="append the build's output to FILE instead of printing it; the console then shows each "
                        "build step with its elapsed time")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Builds or reuses the image and prints its tag.

    Args:
        argv: The arguments after ``smddp image`` (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0, or 2 when Docker cannot be used or the build failed (the message says why and what to do).
    """
    args = _parser().parse_args(argv)
    start = time.monotonic()
    try:
        build = ensure_image(
            find_engine(),
            base=host_base_recipe(),
            reuse_host_wheel=not args.build_horovod,
            force=args.force,
            log_path=args.log,
            stream=None if args.log else sys.stdout,
            gpu=args.gpu,
            progress=sys.stderr if args.log else None,
        )
    except DockerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = "built" if build.built else "already present"
    wheel = f"; Horovod from {build.horovod_wheel}" if build.horovod_wheel else ""
    print(f"{build.tag} ({state} in {time.monotonic() - start:.1f} s{wheel})", file=sys.stderr)
    print(build.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
