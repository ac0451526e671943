"""The ``--help`` pages of the kit's commands, laid out one way: a description, then the notes a command needs
(its outputs, its measurements...), then its exit codes and examples.

Every command of the kit builds its parser with :func:`help_texts`, e.g.
``argparse.ArgumentParser(prog="smddp image", **help_texts("Build ...", exit_codes=[("0", "...")], examples=[...]))``.
Prose paragraphs are wrapped to the terminal's width; a paragraph with indented lines (a list, a table, a command)
is printed as written. Standard library only.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any

__all__ = ["HelpFormatter", "epilog", "help_texts", "EXIT_CODES_HEADING", "EXAMPLES_HEADING"]

#: The headings of the two sections every command's help ends with (tests look for them).
EXIT_CODES_HEADING = "exit codes:"
EXAMPLES_HEADING = "examples:"

#: Exit codes: the code's column width; examples: how far a command's continuation lines are indented.
_CODE_WIDTH = 9
_INDENT = "  "


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, with descriptions and epilogs laid out paragraph by paragraph.

    A paragraph (text between blank lines) whose lines all start at the margin is prose: it is wrapped to the width.
    A paragraph with an indented line (``exit codes:`` and its rows, examples, a list) is kept as written.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = text.strip("\n").split("\n\n")
        out = []
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            if any(line[:1].isspace() for line in lines):
                out.append("\n".join(indent + line if line else line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(line.strip() for line in lines), width, break_on_hyphens=False,
                                         initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(out)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # an option's help: wrapped at spaces only, so that a URI or a file name is never cut at a hyphen
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def epilog(exit_codes: Sequence[tuple[str, str]], examples: Sequence[tuple[str, str]],
           notes: Sequence[str] = ()) -> str:
    """The end of a command's help: its notes, then ``exit codes:`` and ``examples:``.

    Args:
        exit_codes: ``(code, meaning)`` pairs, e.g. ``("124", "--max-run passed")``.
        examples: ``(what it does, command)`` pairs; a command may span several lines (a shell continuation
            ``\\`` ends each but the last), its later lines are indented further.
        notes: Paragraphs before the exit codes (prose is wrapped; indented lines are kept).

    Raises:
        ValueError: No exit code or no example was given: every command lists both.
    """
    if not exit_codes or not examples:
        raise ValueError("a command's help lists its exit codes and at least one example")
    codes = [EXIT_CODES_HEADING]
    for code, meaning in exit_codes:
        codes.append(f"{_INDENT}{code:<{_CODE_WIDTH}}{meaning}")
    shown = [EXAMPLES_HEADING]
    for what, command in examples:
        shown.append(f"{_INDENT}# {what}")
        first, *rest = command.strip().splitlines()
        shown.append(_INDENT + first.strip())
        shown += [_INDENT * 3 + line.strip() for line in rest]
    return "\n\n".join([*notes, "\n".join(codes), "\n".join(shown)])


def help_texts(description: str, *, exit_codes: Sequence[tuple[str, str]], examples: Sequence[tuple[str, str]],
               notes: Sequence[str] = ()) -> dict[str, Any]:
    """The keyword arguments of ``ArgumentParser(...)`` (or of a subparsers' ``add_parser(...)``) for a command's help:
    ``{"description": ..., "epilog": ..., "formatter_class": HelpFormatter}``, the epilog from :func:`epilog` of the
    other arguments. ``description`` is what the command does, paragraphs separated by blank lines.
    """
    return {
        "description": textwrap.dedent(description).strip(),
        "epilog": epilog(exit_codes, examples, notes),
        "formatter_class": HelpFormatter,
    }
