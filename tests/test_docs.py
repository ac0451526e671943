"""The docs run as written: every shell and Python block of README.md and docs/*.md is executed by a test.

One test per fenced block, with the id ``file:line`` (the line of its opening fence). A block's test runs it in a
fresh temporary folder that holds links to the checkout's top-level entries (so ``.venv/bin/smddp``,
``entry_points/`` and ``.ci/`` resolve as in the checkout, while what a command writes stays out of it): shell blocks
(``bash``, ``sh``, ``console``) with ``bash -e -o pipefail``, Python blocks as a file run by the venv's Python. Each
test asserts exit code 0 and, where the doc says what the output holds, that it does.

How a block's test differs from the block as written is said in the doc itself, in an HTML comment just above the
block (hidden when rendered): ``<!-- docs-test: DIRECTIVE ; DIRECTIVE ... -->``. Directives:

``skip: REASON``
    not run (real AWS, a 28-minute build, ``setup.sh`` itself); the reason is required and the skips are counted.
``fragment: FILE``
    not run alone: a few lines shown from FILE, which is run elsewhere; the test checks that the lines appear there,
    consecutively and in order (indentation aside).
``replace "OLD" "NEW"``
    the test runs the block with OLD replaced by NEW (a shorter run); OLD must be in the block.
``env NAME=VALUE``
    an extra environment variable (``$VAR`` in VALUE is expanded).
``expect "TEXT"``
    the output (stdout and stderr) must contain TEXT.
``save NAME``
    the block is a file, NAME, that other blocks run (it is put in every block's folder); some shell block that is
    run must name it.
``name LABEL`` / ``needs LABEL``
    a block that ``needs`` another runs it first, in the same folder and fake AWS.
``aws``
    AWS is moto's server on loopback (fake credentials, region us-east-1; the SageMaker SDK's STS endpoint pointed at
    it), reset for the test.
``docker``
    needs the Docker engine and the kit's image (skipped without an engine; failed under ``CI=true``, as the other
    Docker tests).
``python PATH``
    the interpreter for a Python block (e.g. ``.venv-sdk3/bin/python``).
``timeout SECONDS``
    the block's time limit (default 300).

Shell blocks can call ``docs_stop_at TEXT COMMAND...``: runs COMMAND until its output shows TEXT, then stops it (and
everything it started) and succeeds; it fails if COMMAND ends first with an error, or never shows TEXT.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import docker_missing_is_an_error
from tests.docker.conftest import (  # noqa: F401 - fixtures
    _leftover_suspects, docker_engine, kit_image, no_leftovers)
from tests.fake_aws import ACCESS_KEY, REGION, SECRET_KEY, moto_url  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py", "python3"}
#: Fence info strings of blocks that are shown, never run (synopses, trees, tables of text).
NOT_CODE = {"text", "json", "yaml", "diff", "ini", "toml", "dockerfile", "markdown"}
#: At most this many blocks may be skipped (the skip list must stay small).
MAX_SKIPPED = 6
DEFAULT_TIMEOUT = 300
#: Top-level entries of the checkout not linked into a block's folder (outputs of earlier runs).
NOT_LINKED = {".git", "sm_local", "smddp_local_output", ".pytest_cache"}

_DIRECTIVE = re.compile(r"<!--\s*docs-test:(.*?)-->", re.DOTALL)
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass
class Block:
    """One fenced code block of a doc, with what its comment says about its test."""

    doc: Path
    line: int
    lang: str
    text: str
    skip: str | None = None
    fragment: str | None = None
    replaces: list[tuple[str, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    expects: list[str] = field(default_factory=list)
    save: str | None = None
    name: str | None = None
    needs: list[str] = field(default_factory=list)
    aws: bool = False
    docker: bool = False
    python: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    problems: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    @property
    def kind(self) -> str:
        return "shell" if self.lang in SHELL else "python" if self.lang in PYTHON else "shown"

    @property
    def shortened(self) -> bool:
        return bool(self.replaces or self.env)

    def script(self) -> str:
        """The text the test runs: the block with its replacements made."""
        text = self.text
        for old, new in self.replaces:
            text = text.replace(old, new)
        if self.lang == "console":  # `$ command` lines only
            text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
        return text


def _parse_directive(block: Block, raw: str) -> None:
    raw = " ".join(raw.split())
    for kind in ("skip", "fragment"):
        if raw.startswith(f"{kind}:"):
            setattr(block, kind, raw[len(kind) + 1:].strip())
            if not getattr(block, kind):
                block.problems.append(f"'{kind}:' without a {'reason' if kind == 'skip' else 'file'}")
            return
    lexer = shlex.shlex(raw, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    parts: list[list[str]] = [[]]
    for token in lexer:
        if token == ";":
            parts.append([])
        else:
            parts[-1].append(token)
    for words in filter(None, parts):
        verb, args = words[0], words[1:]
        expected = {"replace": 2, "env": 1, "expect": 1, "save": 1, "name": 1, "needs": 1, "aws": 0, "docker": 0,
                    "python": 1, "timeout": 1}
        if verb not in expected or len(args) != expected[verb]:
            block.problems.append(f"unknown or malformed directive {' '.join(words)!r}")
            continue
        if verb == "replace":
            if args[0] not in block.text:
                block.problems.append(f"replace: {args[0]!r} is not in the block")
            block.replaces.append((args[0], args[1]))
        elif verb == "env":
            key, sep, value = args[0].partition("=")
            if not sep:
                block.problems.append(f"env: {args[0]!r} is not NAME=VALUE")
            block.env[key] = value
        elif verb == "expect":
            block.expects.append(args[0])
        elif verb in ("save", "name", "python"):
            setattr(block, verb, args[0])
        elif verb == "needs":
            block.needs.append(args[0])
        elif verb in ("aws", "docker"):
            setattr(block, verb, True)
        elif verb == "timeout":
            block.timeout = float(args[0])


def parse_doc(doc: Path) -> list[Block]:
    """Every fenced block of one Markdown file, with the ``docs-test`` comment just above it (if any)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        _indent, fence, lang = opening.groups()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index])
            index += 1
        index += 1  # the closing fence
        block = Block(doc, start + 1, lang.lower(), textwrap.dedent("\n".join(body)) + "\n")
        # The comment just above the fence (blank lines allowed between them).
        above = start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0 and lines[above].rstrip().endswith("-->"):
            first = above
            while first > 0 and "<!--" not in lines[first]:
                first -= 1
            match = _DIRECTIVE.search("\n".join(lines[first:above + 1]))
            if match:
                _parse_directive(block, match.group(1))
        blocks.append(block)
    return blocks


ALL_BLOCKS = [block for doc in DOC_FILES for block in parse_doc(doc)]
RUN_BLOCKS = [block for block in ALL_BLOCKS if block.kind != "shown"]
SAVED = {block.save: block for block in RUN_BLOCKS if block.save}
NAMED = {block.name: block for block in RUN_BLOCKS if block.name}


# --- running a block -------------------------------------------------------------------------------------------

_STOP_AT = r'''
import signal, subprocess, sys
import psutil
text, argv = sys.argv[1], sys.argv[2:]
proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
seen = b""
for chunk in iter(lambda: proc.stdout.readline(), b""):
    sys.stdout.buffer.write(chunk); sys.stdout.flush()
    seen += chunk
    if text.encode() in seen:
        # Freeze the command so it starts nothing more, end it, then stop everything it started (in any session:
        # each job gets SIGTERM, which its launcher passes on to its own processes; SIGKILL after 30 s).
        root = psutil.Process(proc.pid)
        root.suspend()
        tree = root.children(recursive=True)
        root.kill()
        proc.wait(timeout=30)
        for child in tree:
            child.terminate()
        _gone, alive = psutil.wait_procs(tree, timeout=30)
        for child in alive:
            child.kill()
        print(f"docs_stop_at: stopped after {text!r} ({len(tree)} child process(es) stopped)")
        sys.exit(0)
code = proc.wait()
sys.exit(code or f"docs_stop_at: the command ended before printing {text!r}")
'''

#: Patches the SageMaker SDK's STS endpoint (which ignores AWS_ENDPOINT_URL) to moto's, in every Python process.
_SITECUSTOMIZE = r'''
import importlib.abc, os, sys

_TARGETS = {"sagemaker.session", "sagemaker.core.helper.session_helper"}


class _PatchSts(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None and spec.loader is not None:
                original = spec.loader.exec_module

                def exec_module(module, _original=original):
                    _original(module)
                    if hasattr(module, "sts_regional_endpoint"):
                        module.sts_regional_endpoint = lambda region: os.environ["AWS_ENDPOINT_URL"]

                spec.loader.exec_module = exec_module
                return spec
        return None


if os.environ.get("AWS_ENDPOINT_URL"):
    sys.meta_path.insert(0, _PatchSts())
'''


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in NOT_LINKED:
            (work / entry.name).symlink_to(entry)
    for name, block in SAVED.items():
        (work / name).write_text(block.script(), encoding="utf-8")
    (tmp_path / "docs_stop_at.py").write_text(_STOP_AT, encoding="utf-8")
    return work


def _environment(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    if block.aws or any(NAMED[label].aws for label in block.needs if label in NAMED):
        url = request.getfixturevalue("moto_url")
        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=30).read()
        config = tmp_path / "sagemaker-user-config.yaml"
        config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
        site = tmp_path / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        env.update({
            "AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
            "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config), "SAGEMAKER_VALIDATE_ROLE": "false",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])),
        })
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            env.pop(name, None)
    return env


def _python_for(block: Block) -> str:
    if block.python:
        interpreter = REPO / block.python
        if not interpreter.exists():
            message = f"{block.python} is missing (CI builds it: bash estimators/sdk3/setup_venv.sh)"
            if docker_missing_is_an_error(dict(os.environ)):
                pytest.fail(message)
            pytest.skip(message)
        return str(interpreter)
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _run(block: Block, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    block_env = dict(env)
    for key, value in block.env.items():
        block_env[key] = os.path.expandvars(value)
    if block.kind == "python":
        script = work / f"docs_block_{block.line}.py"  # in the folder, so the checkout's smddp_compat is importable
        script.write_text(block.script(), encoding="utf-8")
        argv = [_python_for(block), str(script)]
    else:
        preamble = f'docs_stop_at() {{ "{_python_for(block)}" "{work.parent / "docs_stop_at.py"}" "$@"; }}\n'
        argv = ["bash", "-e", "-o", "pipefail", "-c", preamble + block.script()]
    proc = subprocess.Popen(argv, cwd=work, env=block_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=block.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        pytest.fail(f"{block.id} did not end within {block.timeout:.0f} s; its output:\n{output[-4000:]}")
    # Nothing the block started may outlive it (its process group is its own).
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        pass
    else:
        os.killpg(proc.pid, 9)
        pytest.fail(f"{block.id} left processes running after it ended (killed now); its output:\n{output[-4000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, output, "")


def _check_fragment(block: Block) -> None:
    target = REPO / block.fragment  # type: ignore[operator]
    assert target.is_file(), f"{block.id}: fragment of {block.fragment}, which does not exist"
    wanted = [line.strip() for line in block.text.splitlines() if line.strip()]
    have = [line.strip() for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = any(have[i:i + len(wanted)] == wanted for i in range(len(have) - len(wanted) + 1))
    assert found, f"{block.id}: these lines are not in {block.fragment} as shown:\n" + "\n".join(wanted)


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[block.id for block in RUN_BLOCKS])
def test_block_runs_as_written(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Runs one block of the docs (shortened as its comment says) and checks its exit code and stated output."""
    assert not block.problems, f"{block.id}: bad docs-test comment: {'; '.join(block.problems)}"
    if block.skip:
        pytest.skip(f"docs: {block.skip}")
    if block.fragment:
        _check_fragment(block)
        return
    if block.save:
        compile(block.script(), block.save, "exec")  # it parses; the shell block that names it runs it
        users = [other for other in RUN_BLOCKS if other.kind == "shell" and not other.skip and block.save in other.text]
        assert users, f"{block.id} is saved as {block.save}, but no shell block that runs names it"
        return
    if block.docker or any(NAMED[label].docker for label in block.needs if label in NAMED):
        request.getfixturevalue("kit_image")
        request.getfixturevalue("no_leftovers")  # no twin container or network left behind
    work = _workdir(tmp_path)
    env = _environment(block, tmp_path, request)
    for label in block.needs:
        assert label in NAMED, f"{block.id} needs {label!r}, which no block is named"
        done = _run(NAMED[label], work, env)
        assert done.returncode == 0, f"{NAMED[label].id} (needed by {block.id}) failed:\n{done.stdout[-4000:]}"
    done = _run(block, work, env)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-6000:]}"
    for text in block.expects:
        assert text in done.stdout, f"{block.id}: {text!r} not in its output:\n{done.stdout[-6000:]}"


def test_every_block_is_run_or_says_why_not() -> None:
    """Every block has a language; skips give a reason and stay few; prints the counts."""
    unlabelled = [block.id for block in ALL_BLOCKS if not block.lang]
    assert not unlabelled, f"fenced blocks without a language (use text for a block that is shown only): {unlabelled}"
    unknown = [block.id for block in ALL_BLOCKS if block.kind == "shown" and block.lang not in NOT_CODE]
    assert not unknown, f"blocks in a language this test cannot run nor knows to be shown only: {unknown}"
    stray = [block.id for block in ALL_BLOCKS if block.kind == "shown" and (block.skip or block.replaces)]
    assert not stray, f"docs-test comments above blocks that are not run: {stray}"
    problems = [f"{block.id}: {problem}" for block in RUN_BLOCKS for problem in block.problems]
    assert not problems, "\n".join(problems)
    saved = [block.save for block in RUN_BLOCKS if block.save]
    assert len(saved) == len(set(saved)), f"two blocks saved under one name: {saved}"
    skipped = [block for block in RUN_BLOCKS if block.skip]
    assert all(block.skip for block in skipped)
    assert len(skipped) <= MAX_SKIPPED, f"{len(skipped)} blocks skipped (at most {MAX_SKIPPED}): " + ", ".join(
        block.id for block in skipped)
    fragments = [block for block in RUN_BLOCKS if block.fragment]
    files = [block for block in RUN_BLOCKS if block.save]
    executed = [block for block in RUN_BLOCKS if not (block.skip or block.fragment or block.save)]
    shortened = [block for block in executed if block.shortened]
    print(f"\ndocs blocks: {len(RUN_BLOCKS)} shell/Python blocks in {len(DOC_FILES)} files: "
          f"{len(executed) - len(shortened)} run as written, {len(shortened)} shortened, "
          f"{len(files)} files run by other blocks, {len(fragments)} fragments, {len(skipped)} skipped")
    for block in skipped:
        print(f"  skipped {block.id}: {block.skip}")


def test_the_parser_reads_directives() -> None:
    """The comment grammar: quoting, several directives, a skip without a reason."""
    block = Block(REPO / "README.md", 1, "bash", 'run --epochs 5 "a; b"\n')
    _parse_directive(block, 'replace "--epochs 5" "--epochs 1" ; env A=1 ; expect "x; y" ; aws')
    assert block.replaces == [("--epochs 5", "--epochs 1")] and block.env == {"A": "1"}
    assert block.expects == ["x; y"] and block.aws and not block.problems
    assert block.script() == 'run --epochs 1 "a; b"\n'
    empty = Block(REPO / "README.md", 1, "bash", "x\n")
    _parse_directive(empty, "skip:")
    assert empty.problems
    stale = Block(REPO / "README.md", 1, "bash", "x\n")
    _parse_directive(stale, 'replace "not there" "y"')
    assert stale.problems


#: Link targets that another change brings (``smddp matrix`` writes docs/matrix.md); drop a name once its file exists.
PENDING_TARGETS: set[str] = set()
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_leads_somewhere() -> None:
    """Each relative link of README.md and docs/*.md names a file of the checkout (and, with #, one of its headings)."""
    broken = []
    for doc in DOC_FILES:
        in_fence = False
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if _FENCE.match(line):
                in_fence = not in_fence
            if in_fence:
                continue
            for target in _LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http(s), mailto: not checked here
                path_part, _, anchor = target.partition("#")
                path = (doc.parent / path_part).resolve() if path_part else doc
                relative = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
                if not path.exists():
                    if relative not in PENDING_TARGETS:
                        broken.append(f"{doc.relative_to(REPO)}:{number}: {target} (no such file)")
                    continue
                if anchor and path.suffix == ".md":
                    headings = {_anchor(h) for h in re.findall(r"^#+\s+(.*)$", path.read_text(encoding="utf-8"), re.MULTILINE)}
                    if anchor not in headings:
                        broken.append(f"{doc.relative_to(REPO)}:{number}: {target} (no heading #{anchor})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_a_fragment_must_be_in_its_file() -> None:
    """The fragment check passes for lines of a file that runs, and fails for lines that are not there."""
    present = Block(REPO / "README.md", 1, "python", "    loss_fn = tf.keras.losses.MeanSquaredError()\n"
                    "opt = tf.keras.optimizers.Adam(0.01 * sdp.size())\n", fragment="README.md")
    _check_fragment(present)
    absent = Block(REPO / "README.md", 1, "python", "sdp.init()\nprint('not in the README')\n", fragment="README.md")
    with pytest.raises(AssertionError):
        _check_fragment(absent)
