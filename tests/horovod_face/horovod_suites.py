"""Runs Horovod 0.28.1's own TensorFlow test suites against raw Horovod or this kit's Horovod face.

Horovod's suites are not in its PyPI release and are not part of this repository: give a checkout of Horovod's
public repository at tag v0.28.1 (or a folder holding its ``test/`` tree)::

    git clone --depth 1 --branch v0.28.1 https://github.com/horovod/horovod /tmp/horovod-v0.28.1
    .venv/bin/python -m tests.horovod_face.horovod_suites /tmp/horovod-v0.28.1            # the full table
    .venv/bin/python -m tests.horovod_face.horovod_suites /tmp/horovod-v0.28.1 --face kit --keras keras3 \\
        --suite test_tensorflow2_keras.py

Each run copies the suite into a fresh temporary folder, and for ``--face kit`` rewrites only its import lines
(``horovod.tensorflow`` -> ``smddp_compat.horovod.tensorflow``, ``horovod.keras`` -> ``smddp_compat.horovod.keras``,
nothing else). It runs the file with pytest on 2 ranks under ``smddprun`` (Gloo), each rank through a wrapper that
exits 0 whatever pytest does (a launcher stops every rank when one exits non-zero), and counts rank 0's JUnit
report. With ``--keras tf_keras`` the ranks run with ``TF_USE_LEGACY_KERAS=1``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SUITES", "SuiteResult", "rewrite_imports", "run_suite", "main"]

#: The suites measured, with the files each needs beside it (paths inside the checkout).
SUITES: dict[str, tuple[str, ...]] = {
    "test_tensorflow.py": ("test/parallel/test_tensorflow.py", "test/parallel/base_test_tensorflow.py",
                           "test/utils/common.py"),
    "test_tensorflow2_keras.py": ("test/parallel/test_tensorflow2_keras.py",),
}
FACES = ("horovod", "kit")
KERAS_FLAVOURS = {"tf_keras": {"TF_USE_LEGACY_KERAS": "1"}, "keras3": {}}
REPO = Path(__file__).resolve().parents[2]

# Import lines of the suites that name Horovod's TensorFlow and Keras modules; nothing else is rewritten.
_IMPORT_LINE = re.compile(r"^(\s*(?:import|from)\s+)horovod\.(tensorflow|keras)\b", re.MULTILINE)

# Runs one rank's pytest, then exits 0 (so the launcher lets the other rank finish).
_RANK_WRAPPER = """\
import os, subprocess, sys
rank = os.environ.get("HOROVOD_RANK", "0")
report = os.path.join(sys.argv[1], f"rank{rank}.xml")
subprocess.call([sys.executable, "-m", "pytest", *sys.argv[2:], f"--junitxml={report}"])
sys.exit(0)
"""


@dataclass
class SuiteResult:
    """Counts from rank 0's JUnit report of one suite run."""

    suite: str
    face: str
    keras: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)
    problem: str = ""

    def cell(self) -> str:
        """``passed / failed`` (and skipped), or the reason there are no counts."""
        if self.problem:
            return self.problem
        return f"{self.passed} / {self.failed} ({self.skipped} skipped)"


def rewrite_imports(source: str) -> str:
    """Swaps the suite's Horovod TensorFlow/Keras import lines for this kit's Horovod face."""
    return _IMPORT_LINE.sub(r"\1smddp_compat.horovod.\2", source)


def _prepare(checkout: Path, suite: str, face: str, workdir: Path) -> Path:
    for relative in SUITES[suite]:
        source = checkout / relative
        if not source.is_file():
            raise FileNotFoundError(f"{source} not found: give a checkout of Horovod's repository at tag v0.28.1")
        text = source.read_text(encoding="utf-8")
        (workdir / source.name).write_text(rewrite_imports(text) if face == "kit" else text, encoding="utf-8")
    # The suites look for test/utils/common.py in ../utils relative to themselves; a copy beside them is enough.
    (workdir / "rank_wrapper.py").write_text(_RANK_WRAPPER, encoding="utf-8")
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return workdir / suite


def _count(report: Path, result: SuiteResult) -> None:
    root = ElementTree.parse(report).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        outcome = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            result.passed += 1
        elif outcome.tag == "skipped":
            result.skipped += 1
        else:
            result.failed += 1
            result.failures[name] = (outcome.get("message") or "").splitlines()[0][:200] if outcome.get(
                "message") else outcome.tag


def run_suite(checkout: Path, suite: str, face: str, keras: str, *, ranks: int = 2, timeout: float = 3000,
              test_timeout: float = 300) -> SuiteResult:
    """Runs one suite on ``ranks`` ranks and returns rank 0's counts.

    Args:
        checkout: Horovod's repository at v0.28.1 (holding ``test/``).
        suite: A key of :data:`SUITES`.
        face: "horovod" (unchanged) or "kit" (import lines swapped).
        keras: "tf_keras" or "keras3".
        ranks: Number of ranks.
        timeout: Seconds for the whole run.
        test_timeout: Seconds for one test (pytest-timeout).
    """
    result = SuiteResult(suite, face, keras)
    with tempfile.TemporaryDirectory(prefix=f"horovod-suite-{face}-{keras}-") as tmp:
        workdir = Path(tmp)
        test_file = _prepare(checkout, suite, face, workdir)
        reports = workdir / "reports"
        reports.mkdir()
        env = {name: value for name, value in os.environ.items() if name != "TF_USE_LEGACY_KERAS"}
        env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1", **KERAS_FLAVOURS[keras])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
        argv = [sys.executable, "-m", "smddp_compat.launcher", "-np", str(ranks), "--no-shim",
                "--timeout", str(int(timeout)), sys.executable, str(workdir / "rank_wrapper.py"), str(reports),
                "-q", "-p", "no:cacheprovider", "-c", str(workdir / "pytest.ini"), f"--timeout={int(test_timeout)}",
                str(test_file)]
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout + 60)
        result.seconds = time.monotonic() - started
        report = reports / "rank0.xml"
        if report.is_file():
            _count(report, result)
        else:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            result.problem = f"no report from rank 0 (exit {proc.returncode})"
            result.failures["(run)"] = tail
    return result


def _table(results: list[SuiteResult]) -> str:
    lines = ["| suite | raw Horovod, tf-keras | kit, tf-keras | raw Horovod, Keras 3 | kit, Keras 3 |",
             "|---|---|---|---|---|"]
    by_key = {(r.suite, r.face, r.keras): r for r in results}
    for suite in SUITES:
        cells = []
        for keras in ("tf_keras", "keras3"):
            for face in FACES:
                found = by_key.get((suite, face, keras))
                cells.append(found.cell() if found else "not run")
        lines.append(f"| {suite}: passed / failed | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: runs the chosen suites, faces and Keras flavours; prints the table and every failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", default=os.environ.get("SMDDP_HOROVOD_CHECKOUT"),
                        help="Horovod's repository at v0.28.1 (default: $SMDDP_HOROVOD_CHECKOUT)")
    parser.add_argument("--suite", choices=sorted(SUITES), action="append")
    parser.add_argument("--face", choices=FACES, action="append")
    parser.add_argument("--keras", choices=sorted(KERAS_FLAVOURS), action="append")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3000, help="seconds per suite run")
    args = parser.parse_args(argv)
    if not args.checkout:
        print("skipped: no Horovod checkout given (pass its path, or set SMDDP_HOROVOD_CHECKOUT); "
              "get one with: git clone --depth 1 --branch v0.28.1 https://github.com/horovod/horovod", flush=True)
        return 0
    checkout = Path(args.checkout).resolve()
    if not (checkout / "test" / "parallel").is_dir():
        print(f"error: {checkout} holds no test/parallel folder; give Horovod's repository at tag v0.28.1",
              file=sys.stderr)
        return 2
    if shutil.which("git") and (checkout / ".git").exists():
        print("checkout at", subprocess.run(["git", "-C", str(checkout), "describe", "--tags"],
                                            capture_output=True, text=True).stdout.strip(), flush=True)
    results = []
    for suite in args.suite or list(SUITES):
        for keras in args.keras or ["tf_keras", "keras3"]:
            for face in args.face or list(FACES):
                result = run_suite(checkout, suite, face, keras, ranks=args.ranks, timeout=args.timeout)
                print(f"{suite} {face} {keras}: {result.cell()} in {result.seconds:.0f} s", flush=True)
                for name, reason in sorted(result.failures.items()):
                    print(f"    FAILED {name}: {reason}", flush=True)
                results.append(result)
    print()
    print(_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
