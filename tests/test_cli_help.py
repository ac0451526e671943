"""Every command of the kit explains itself: ``--help`` exits 0 with the right program name, a description, help for
every option, the exit codes and examples; and the options a job is described with read the same in ``smddp local``
and ``smddp submit`` (one definition, :mod:`smddp_compat.commands.job_options`).

Each ``--help`` runs as a user runs it, in a fresh interpreter; the parsers themselves are read for the option checks.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smddp_compat.commands.cli import SUBCOMMANDS
from smddp_compat.cli_help import EXAMPLES_HEADING, EXIT_CODES_HEADING, HelpFormatter, epilog, help_texts
from smddp_compat.commands.job_options import JOB_OPTIONS_TITLE

REPO = Path(__file__).resolve().parents[1]
SMDDP = ["-m", "smddp_compat.commands.cli"]

#: (interpreter arguments, the program name the usage line must show)
HELP_RUNS: list[tuple[list[str], str]] = [
    *[([*SMDDP, name, "--help"], f"smddp {name}") for name in SUBCOMMANDS],
    (["-m", "smddp_compat.launcher", "--help"], "smddprun"),
    (["-m", "smddp_compat.image", "--help"], "smddp image"),  # the module's own entry says the user's command
    (["-m", "smddp_compat.bench", "--help"], "smddp bench"),
    (["-m", "smddp_compat.local_mode.docker", "--help"], "python -m smddp_compat.local_mode.docker"),
    (["-m", "smddp_compat.local_mode.docker", "check", "--help"], "python -m smddp_compat.local_mode.docker check"),
    (["-m", "smddp_compat.local_mode.docker", "clean", "--help"], "python -m smddp_compat.local_mode.docker clean"),
]


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _has_sections(text: str) -> None:
    lines = text.splitlines()
    assert EXIT_CODES_HEADING in lines, text
    assert EXAMPLES_HEADING in lines, text
    codes = lines[lines.index(EXIT_CODES_HEADING) + 1:]
    assert codes and codes[0].split()[0] == "0", text  # the codes start with success
    examples = lines[lines.index(EXAMPLES_HEADING) + 1:]
    assert examples and examples[0].strip(), text


@pytest.mark.processes
def test_smddp_help_lists_every_command_the_exit_codes_and_examples() -> None:
    done = _run([*SMDDP, "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: smddp <command>")
    for name in [*SUBCOMMANDS, "shim-path"]:
        assert f"\n  {name} " in done.stdout, name
    assert "smddp <command> --help" in done.stdout
    _has_sections(done.stdout)
    bare = _run(SMDDP)  # no command: a usage error, said on standard error
    assert bare.returncode == 2 and bare.stdout == "" and "usage: smddp <command>" in bare.stderr


@pytest.mark.processes
@pytest.mark.parametrize("args, prog", HELP_RUNS, ids=[" ".join(a[1:-1]) or a[0] for a, _ in HELP_RUNS])
def test_help_exits_0_with_its_program_a_description_exit_codes_and_examples(args: list[str], prog: str) -> None:
    if args[:2] == SMDDP and not _module_present(SUBCOMMANDS[args[2]][0]):
        pytest.skip(f"smddp {args[2]}'s module {SUBCOMMANDS[args[2]][0]} is not in this checkout yet")
    done = _run(args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"usage: {prog} "), done.stdout[:200]
    description = done.stdout.split("\n\n")[1]
    assert description.strip() and not description.lstrip().startswith(("options:", "positional")), done.stdout
    assert "``" not in done.stdout, "raw reStructuredText double backticks in the help"
    _has_sections(done.stdout)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser a user reaches, by its program name (each subcommand's own)."""
    from smddp_compat.launcher._cli import build_parser as smddprun_parser
    from smddp_compat.local_mode.docker.__main__ import _parser as docker_parser

    found: dict[str, argparse.ArgumentParser] = {"smddprun": smddprun_parser()}
    roots = [docker_parser()]
    for name, (module_name, _, keep_name, _) in SUBCOMMANDS.items():
        if not _module_present(module_name):
            continue
        module = importlib.import_module(module_name)
        factory = getattr(module, "build_parser", None) or getattr(module, "_parser", None)
        assert factory is not None, f"{module_name} must expose build_parser() for smddp {name}"
        parser = factory()
        if keep_name:
            roots.append(parser)
        else:
            found[parser.prog] = parser
    for root in roots:
        found[root.prog] = root
        for action in root._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.update({sub.prog: sub for sub in action.choices.values()})
    return found


def test_every_option_of_every_parser_has_help_and_the_help_its_sections() -> None:
    parsers = _parsers()
    assert {"smddp local", "smddp submit", "smddp status", "smddp logs", "smddp wait", "smddp fetch", "smddp bench",
            "smddp image", "smddprun", "python -m smddp_compat.local_mode.docker clean"} <= set(parsers)
    missing = []
    for prog, parser in sorted(parsers.items()):
        assert (parser.description or "").strip(), f"{prog}: no description"
        _has_sections(parser.format_help())
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:  # internal (smddprun --rank-specs)
                continue
            if not (action.help or "").strip():
                missing.append(f"{prog}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without help: " + ", ".join(missing)


# -- one syntax for the job's options in smddp local and smddp submit ------------------------------------------------


def _local_and_submit() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    from smddp_compat.commands.submit_cli import build_parser as estimators_parser
    from smddp_compat.commands.local_cli import build_parser as local_parser

    return local_parser(), _parsers_of(estimators_parser())["smddp submit"]


def _parsers_of(root: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    return {sub.prog: sub for sub in action.choices.values()}


def _job_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    (group,) = [g for g in parser._action_groups if g.title == JOB_OPTIONS_TITLE]
    return {action.dest: action for action in group._group_actions}


def test_the_job_options_are_the_same_in_local_and_submit() -> None:
    local, submit = _local_and_submit()
    local_actions, submit_actions = _job_actions(local), _job_actions(submit)
    assert set(local_actions) == set(submit_actions) >= {
        "entry_point", "source_dir", "instance_count", "processes_per_host", "distribution", "hyperparameters",
        "channel", "output", "max_run", "job_name", "mesh", "devices_per_process"}
    for dest, action in local_actions.items():
        other = submit_actions[dest]
        same = ("option_strings", "metavar", "nargs", "type")
        assert [getattr(action, a) for a in same] == [getattr(other, a) for a in same], dest
        assert type(action) is type(other), dest
    assert local_actions["hyperparameters"].option_strings == ["--hyperparameters", "--hp"]


SUBMIT_ONLY = ["--instance-type", "ml.c5.xlarge"]
SHARED_ARGV = [
    "train.py", "--source-dir", "src", "--instance-count", "2", "--processes-per-host", "1",
    "--distribution", "dtensor",
    "--hp", "epochs=3", "--hyperparameters", "note=a=b", "lr=0.1",
    "--channel", "train=./data", "--channel", "test=s3://bucket/test", "val=s3://bucket/val",
    "--output", "s3://bucket/jobs", "--max-run", "3600", "--job-name", "my-job", "--mesh", "batch=4,model=2",
    "--devices-per-process", "2",
]


def test_local_and_submit_read_the_same_words_the_same_way() -> None:
    local, submit = _local_and_submit()
    from_local = vars(local.parse_args(SHARED_ARGV))
    from_submit = vars(submit.parse_args([*SHARED_ARGV, *SUBMIT_ONLY]))
    for dest in _job_actions(local):
        assert from_local[dest] == from_submit[dest], (dest, from_local[dest], from_submit[dest])
    # both forms of a repeated NAME=VALUE option: words after one flag, or the flag again (neither drops a word)
    assert from_local["hyperparameters"] == ["epochs=3", "note=a=b", "lr=0.1"]
    assert from_local["channel"] == ["train=./data", "test=s3://bucket/test", "val=s3://bucket/val"]
    assert from_local["max_run"] == 3600 and from_local["instance_count"] == 2


@pytest.mark.parametrize("argv, words", [
    (["--instance-count", "2.5"], "expected a whole number, got '2.5'"),
    (["--max-run", "nan"], "expected a finite number of seconds > 0, got 'nan'"),
])
def test_local_and_submit_refuse_the_same_bad_words_in_the_same_words(
        argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    for parser, extra in zip(_local_and_submit(), ([], SUBMIT_ONLY)):
        with pytest.raises(SystemExit) as stop:
            parser.parse_args(["train.py", *argv, *extra])
        assert stop.value.code == 2
        assert words in capsys.readouterr().err, parser.prog


def test_submit_names_a_script_given_after_a_name_value_option(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sagemaker.tensorflow", reason="SageMaker SDK v2 is not installed in this environment")
    from smddp_compat.commands.submit_cli import main

    assert main(["submit", "--instance-type", "ml.c5.xlarge", "--channel", "train=s3://bucket/t", "train.py"]) == 2
    err = capsys.readouterr().err
    assert "--channel='train.py': is not NAME=VALUE" in err and "goes before the option" in err, err
    assert main(["submit", "--instance-type", "ml.c5.xlarge"]) == 2
    assert "ENTRY_POINT" in capsys.readouterr().err


def test_smddprun_takes_the_job_time_limit_and_the_grace_as_smddp_local_spells_them() -> None:
    from smddp_compat.launcher._cli import build_parser

    old = build_parser().parse_args(["-np", "2", "--timeout", "30", "--grace", "2", "python", "x.py"])
    new = build_parser().parse_args(["-np", "2", "--max-run", "30", "--stop-grace", "2", "python", "x.py"])
    assert (old.timeout, old.grace, old.command) == (new.timeout, new.grace, new.command) == (30.0, 2.0,
                                                                                              ["python", "x.py"])


# -- the shared layout -----------------------------------------------------------------------------------------------


def test_the_layout_wraps_prose_and_keeps_lists_and_commands_as_written() -> None:
    parser = argparse.ArgumentParser(prog="demo", **help_texts(
        "A long sentence " * 12,
        notes=["table:\n  a    first\n  b    second"],
        exit_codes=[("0", "ok"), ("2", "bad usage")],
        examples=[("a long command", "demo --one 1 \\\n--two 2")],
    ))
    formatter = parser._get_formatter()
    assert isinstance(formatter, HelpFormatter)
    text = parser.format_help()
    description = text.split("\n\n")[1]
    assert len(description.splitlines()) > 1 and all(len(line) <= 100 for line in description.splitlines())
    assert "table:\n  a    first\n  b    second" in text
    assert "exit codes:\n  0        ok\n  2        bad usage" in text
    assert "examples:\n  # a long command\n  demo --one 1 \\\n      --two 2" in text
    with pytest.raises(ValueError):
        epilog(exit_codes=[], examples=[("x", "y")])
