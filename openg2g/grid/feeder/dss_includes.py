"""The files an OpenDSS master pulls in (``Redirect``, ``Compile``), scanned before the engine reads
them, to refuse a redirect cycle at once and by name.

OpenDSS has no include guard: a file that redirects, directly or through others, to a file that
is still being read recurses until the engine's stack runs out, which took 15-40 s of a 2-core
machine before :func:`~openg2g.grid.feeder.opendss.read_opendss` could only say "crashed". The scan
follows the commands as the engine resolves them (a path relative to the folder of the file that
names it) and gives up, leaving the file to the engine, wherever it cannot be sure of what the
engine would read: a ``CD`` or ``Set DataPath`` (which move the folder paths resolve from), a file
it cannot read, more than :data:`MAX_FILES` files. So it can only miss a cycle, never invent one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

__all__ = ["MAX_FILES", "RedirectCycle", "redirect_cycle"]

MAX_FILES = 2_000
"""Files scanned at most; a master pulling in more is left to the engine."""

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_INCLUDE = re.compile(r"^[ \t]*(redirect|compile)[ \t]+(.+?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_MOVES_FOLDER = re.compile(r"^[ \t]*(cd[ \t]|set[ \t]+datapath\b)", re.IGNORECASE | re.MULTILINE)
_FILE_ARGUMENT = re.compile(
    r"^(?:file[ \t]*=[ \t]*)?(?:\"([^\"]*)\"|'([^']*)'|\(([^)]*)\)|\[([^\]]*)\]|(\S+))", re.IGNORECASE
)


class RedirectCycle(NamedTuple):
    """A redirect cycle: the ``(file, line)`` of each command of the chain, from the master, and the
    file the last one names, which the chain is still reading."""

    chain: list[tuple[Path, int]]
    target: Path

    def describe(self, folder: Path) -> str:
        """The chain in words, paths relative to ``folder`` where they are inside it."""

        def shown(path: Path) -> str:
            return path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)

        steps = " -> ".join(f"{shown(f)} line {n}" for f, n in self.chain)
        return f"{steps} -> {shown(self.target)}, which is still being read"


class _Unsure(Exception):
    """The scan cannot tell what the engine would read: leave the file to it."""


def redirect_cycle(master: Path) -> RedirectCycle | None:
    """The first redirect cycle of ``master``, or ``None`` when there is none or the scan cannot
    tell (see the module docstring)."""
    scanned = [0]
    try:
        return _cycle(master.resolve(), [], scanned)
    except _Unsure:
        return None


def _cycle(path: Path, chain: list[tuple[Path, int]], scanned: list[int]) -> RedirectCycle | None:
    scanned[0] += 1
    if scanned[0] > MAX_FILES:
        raise _Unsure
    try:
        text = path.read_text(errors="replace")
    except OSError:
        raise _Unsure from None
    text = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    if _MOVES_FOLDER.search(text):
        raise _Unsure
    reading = [p for p, _ in chain] + [path]
    for match in _INCLUDE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        target = _target(path.parent, match.group(2))
        if target is None or not target.is_file():
            continue  # no file named: the engine says so
        step = [*chain, (path, line)]
        if target in reading:
            return RedirectCycle(step, target)
        found = _cycle(target, step, scanned)
        if found is not None:
            return found
    return None


def _target(folder: Path, argument: str) -> Path | None:
    """The file a ``Redirect``/``Compile`` argument names, resolved from ``folder``; ``None`` for an
    argument naming none (a comment right after the command)."""
    if argument.startswith(("!", "//")):
        return None
    match = _FILE_ARGUMENT.match(argument)
    if match is None:
        return None
    name = next(g for g in match.groups() if g is not None).strip()
    if not name:
        return None
    return (folder / name).resolve()
