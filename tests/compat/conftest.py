"""Fixtures for the compat tests: run a program as N real ranks under smddprun, with a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class JobRun:
    returncode: int
    output: str
    results: dict[int, dict]


def quiet_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def smddprun_argv(num_proc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "smddp_compat.launcher", "-np", str(num_proc), *args]


@pytest.fixture
def run_ranks(tmp_path: Path):
    """Runs ``programs/<name>`` as ``num_proc`` ranks; each rank may write ``$RESULT_DIR/rank<N>.json``."""

    def run(name: str, num_proc: int, *args: str, env: dict[str, str] | None = None, timeout: float = 180,
            launcher_args: tuple[str, ...] = ()) -> JobRun:
        result_dir = tmp_path / f"results-{name}-{num_proc}"
        result_dir.mkdir(exist_ok=True)
        argv = smddprun_argv(num_proc, "--timeout", str(timeout), *launcher_args,
                             sys.executable, str(PROGRAMS / name), *args)
        proc = subprocess.run(argv, env=quiet_env(RESULT_DIR=str(result_dir), **(env or {})),
                              capture_output=True, text=True, timeout=timeout + 30, cwd=tmp_path)
        results = {}
        for path in result_dir.glob("rank*.json"):
            results[int(path.stem[4:])] = json.loads(path.read_text())
        return JobRun(proc.returncode, proc.stdout + proc.stderr, results)

    return run
