"""``smddp mlflow-send FILE...``: sends what a tracked job's end could not send to its MLflow server (the server was
unreachable when the job ended: the job kept its metrics and status in ``mlflow-pending.json`` in its folder,
:func:`smddp_compat.local_mode.tracking.send_pending`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from smddp_compat.cli_help import help_texts
from smddp_compat.commands.local_cli import run_reporting_errors
from smddp_compat.local_mode.tracking import PENDING_FILE, send_pending

__all__ = ["main", "build_parser"]

_EXIT_CODES = [("0", "every file was sent (and removed)"), ("1", "a server still cannot be reached (its file is kept)"),
               ("2", "a file is not a run's kept end")]


def build_parser() -> argparse.ArgumentParser:
    """The ``smddp mlflow-send`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="smddp mlflow-send",
        **help_texts(
            f"""
            Send a tracked job's end to its MLflow run: the metric points, tags and final status that the job
            could not send because its tracking server was unreachable when it ended. The job wrote them to
            {PENDING_FILE} in its folder and said this command; once the server answers again, run it with that
            file. Credentials, if the server needs them, come from MLFLOW_TRACKING_USERNAME and
            MLFLOW_TRACKING_PASSWORD.
            """,
            exit_codes=_EXIT_CODES,
            examples=[("a job's kept end", f"smddp mlflow-send smddp_local_output/train-2026-12-04-08-00-00-123/"
                                           f"{PENDING_FILE}")],
        ),
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help=f"a {PENDING_FILE} a job wrote")
    return parser


def _send(files: Sequence[str]) -> int:
    for name in files:
        record = send_pending(Path(name))
        print(f"smddp mlflow-send: run {record.run_id} at {record.tracking_uri}: {len(record.metrics)} metric "
              f"points and status {record.status} sent; {name} removed")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``smddp mlflow-send`` with the arguments after it; returns the exit code."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    return run_reporting_errors(lambda: _send(args.files), "smddp mlflow-send")
