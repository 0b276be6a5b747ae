"""Help texts as plain text: the reST markup of the docstrings the sub-commands reuse, taken out.

The module docstrings that serve as ``--help`` descriptions are written for the API docs
(``code``, :role:`targets`, ``Examples::``); a terminal shows them as plain text instead.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["plain_help", "plain_text"]

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def _role_text(match: re.Match[str]) -> str:
    # :func:`title <target>` shows the title; :class:`~a.b.C` the last part, as Sphinx does
    inner = match.group(1)
    if inner.endswith(">") and "<" in inner:
        return inner[: inner.index("<")].strip()
    if inner.startswith("~"):
        return inner[1:].rpartition(".")[2]
    return inner


def plain_text(text: str) -> str:
    """``text`` without reST markup: a role becomes its text, a double-backquoted literal its
    content, a paragraph's closing ``::`` one colon; directive lines (``.. name::``) and lone
    ``::`` lines are dropped."""
    text = _LITERAL.sub(r"\1", _ROLE.sub(_role_text, text))
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith(".. ") or line.strip() == "::":
            continue
        if line.rstrip().endswith("::"):
            line = line.rstrip()[:-1]
        lines.append(line)
    return "\n".join(lines)


def plain_help(parser: argparse.ArgumentParser) -> None:
    """Make every help text of ``parser`` and of its sub-commands (at any depth) plain text, in place.

    Descriptions keep their line breaks (paragraphs, example commands), as the docstrings lay them out.
    """
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if parser.description:
        parser.description = plain_text(parser.description)
    if parser.epilog:
        parser.epilog = plain_text(parser.epilog)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # the one-line help in the list of sub-commands
                if isinstance(choice.help, str):
                    choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):  # an alias maps to the same parser
                plain_help(sub)
