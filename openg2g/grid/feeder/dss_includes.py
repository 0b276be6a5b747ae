"""The files an OpenDSS master pulls in (``Redirect``, ``Compile``), scanned before the engine reads
them: to refuse a redirect cycle at once and by name, and to know the file and line that define
each element, so that a refusal names every element openg2g cannot model, where the user wrote
it, before the engine runs the file's own solves.

OpenDSS has no include guard: a file that redirects, directly or through others, to a file that
is still being read recurses until the engine's stack runs out, which took 15-40 s of a 2-core
machine before :func:`~openg2g.grid.feeder.opendss.read_opendss` could only say "crashed". The scan
follows the commands as the engine resolves them (a path relative to the folder of the file that
names it) and gives up, leaving the file to the engine, wherever it cannot be sure of what the
engine would read: a ``CD`` or ``Set DataPath`` (which move the folder paths resolve from), a file
it cannot read, more than :data:`MAX_FILES` files. So it can only miss a cycle, never invent one.

The definitions (:func:`element_definitions`) follow the same walk, command by command in the
engine's order (its block comments: a line that begins with ``/*`` up to the line holding
``*/``), from the last ``Clear`` or ``New Circuit`` on. An element is *settled* when nothing the
scan sees after its ``New`` could change it: no ``enabled`` among its own properties, no later
command naming it (``Edit``, ``Disable``, ``class.name.property=``), no ``BatchEdit`` of its class.
Only a settled element can be refused before the engine runs; any other is left to the engine.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

__all__ = ["MAX_FILES", "Definition", "RedirectCycle", "element_definitions", "redirect_cycle", "shown"]

MAX_FILES = 2_000
"""Files scanned at most; a master pulling in more is left to the engine."""

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_INCLUDE = re.compile(r"^[ \t]*(redirect|compile)[ \t]+(.+?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_MOVES_FOLDER = re.compile(r"^[ \t]*(cd[ \t]|set[ \t]+datapath\b)", re.IGNORECASE | re.MULTILINE)
_MENTION = re.compile(r"(?<![\w.])([a-z_]\w*)\.([^\s.=,;\"'()\[\]{}]+)")
"""``class.name`` in a command: a command that names an element may edit it (its name ends at a
dot, a space or a delimiter, as a property follows it: ``Load.ld.kW=3``)."""

_NEW_TARGET = re.compile(r"^(?:object[ \t]*=[ \t]*)?(?:\"([^\"]*)\"|'([^']*)'|(\S+))", re.IGNORECASE)
"""The element a ``New`` command defines: ``class.name``, quoted or not, after an optional ``object=``."""

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
        steps = " -> ".join(f"{shown(f, folder)} line {n}" for f, n in self.chain)
        return f"{steps} -> {shown(self.target, folder)}, which is still being read"


def shown(path: Path, folder: Path) -> str:
    """``path`` as a message shows it: relative to ``folder`` where it is inside it, else whole."""
    return path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)


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


class Definition(NamedTuple):
    """Where an element is defined: the file and line of its ``New`` command, whether it is
    settled (module docstring), and the properties that command gives it, its ``~`` continuations
    included (lower case, comments removed)."""

    file: Path
    line: int
    settled: bool
    properties: str


class _Definitions:
    """The definitions and the element names commands mention, in the order the engine reads them."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget everything: a ``Clear`` or a new circuit starts over."""
        self.order = 0
        self.defined: dict[str, tuple[Path, int, int]] = {}  # class.name -> file, line, order
        self.properties: dict[str, list[str]] = {}  # class.name -> its New's properties, continuations
        self.unsettled: set[str] = set()  # defined with an enabled property of their own
        self.mentioned: dict[str, int] = {}  # class.name -> order of the last command naming it
        self.batch: dict[str, int] = {}  # class -> order of the last BatchEdit of it
        self.last: str | None = None  # the element a ~ (More) continues

    def command(self, path: Path, line: int, words: str) -> None:
        """One command (comment removed) at ``line`` of ``path``."""
        self.order += 1
        head, _, rest = words.partition(" ")
        verb = head.lower()
        if verb.startswith("~") or verb in ("more", "m"):
            if self.last is not None:
                more = words[1:] if verb.startswith("~") else rest
                self.properties[self.last].append(more.strip().lower())
                if re.search(r"\benabled\s*=", more, re.IGNORECASE):
                    self.unsettled.add(self.last)
            return
        self.last = None
        if verb in ("clear", "clearall"):
            self.clear()
            return
        if verb == "new":
            rest = rest.strip()
            target = _NEW_TARGET.match(rest)
            named = next((g for g in target.groups() if g is not None), "") if target else ""
            cls, dot, name = named.strip().lower().partition(".")
            if cls == "circuit":
                self.clear()
                return
            if dot and name:
                element = f"{cls}.{name}"
                if element in self.defined:  # a second New names the element: the engine's to judge
                    self.mentioned[element] = self.order
                    return
                self.defined[element] = (path, line, self.order)
                self.properties[element] = [rest[target.end() :].strip().lower()] if target else []
                if re.search(r"\benabled\s*=", rest, re.IGNORECASE):
                    self.unsettled.add(element)
                self.last = element
                return
        if verb == "batchedit":
            self.batch[rest.strip().split(".", 1)[0].lower()] = self.order
        for cls, name in _MENTION.findall(words.lower()):
            self.mentioned[f"{cls}.{name}"] = self.order

    def result(self) -> dict[str, Definition]:
        out = {}
        for element, (path, line, order) in self.defined.items():
            cls = element.split(".", 1)[0]
            settled = (
                element not in self.unsettled
                and self.mentioned.get(element, 0) <= order
                and self.batch.get(cls, 0) <= order
            )
            out[element] = Definition(path, line, settled, " ".join(p for p in self.properties[element] if p))
        return out


def element_definitions(master: Path) -> dict[str, Definition] | None:
    """Every element ``"class.name"`` (lower case) the circuit of ``master`` defines, with where, or
    ``None`` when the scan cannot tell what the engine would read (see the module docstring)."""
    found = _Definitions()
    try:
        _walk(master.resolve(), [], [0], found)
    except _Unsure:
        return None
    return found.result()


def _walk(path: Path, reading: list[Path], scanned: list[int], found: _Definitions) -> None:
    """The commands of ``path`` into ``found``, each redirected file's where the engine reads it."""
    scanned[0] += 1
    if scanned[0] > MAX_FILES or path in reading:  # a cycle: redirect_cycle refuses it first
        raise _Unsure
    try:
        text = path.read_text(errors="replace")
    except OSError:
        raise _Unsure from None
    if _MOVES_FOLDER.search(text):
        raise _Unsure
    in_block = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if not in_block and raw.startswith("/*"):
            in_block = True
        if in_block:
            in_block = "*/" not in raw
            continue
        words = re.split(r"!|//", raw, maxsplit=1)[0].strip()
        if not words:
            continue
        include = _INCLUDE.match(words)
        if include is not None:
            target = _target(path.parent, include.group(2))
            if target is not None and target.is_file():
                _walk(target, [*reading, path], scanned, found)
            continue
        found.command(path, number, words)
