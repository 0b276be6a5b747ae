"""The commands of an OpenDSS master and of every file it pulls in (``Redirect``, ``Compile``), read
as OpenDSS's engine reads them, before the engine runs any of them: the box a ``.dss`` file runs
in, the redirect cycles named, and the file and line of each element definition.

**Reading as the engine does.** The scan follows the engine's own rules (DSS C-API, the engine of
DSS-Python): a file is its bytes (UTF-16 after its byte-order mark, which the engine converts);
its lines end at ``\\n``, ``\\r\\n`` or ``\\r``; a line that begins with ``/*``
opens a block comment, skipped up to and with the line holding ``*/``; each line is one command,
its words split by OpenDSS's parser (:class:`_Parser`: spaces, tabs and commas; ``name=value``;
``"..."``, ``'...'``, ``(...)``, ``[...]`` and ``{...}`` grouping, inside which ``!`` and ``//``
do not start a comment); a command, a ``Set`` option and an ``Export`` kind are named by any
abbreviation the engine takes (its first name in :data:`COMMANDS`, :data:`OPTIONS`,
:data:`EXPORTS` that begins with the word, after an exact match). A ``Redirect`` names its file
from the folder of the file that holds it (``.dss`` added to a name that has no dot anywhere, as
the engine tries). The walk is a loop, not a recursion: a deep chain costs it no stack.

**The box.** A file may read any file the user can read: a ``Redirect`` or ``Compile`` to a
sibling folder (``../common/`` in the OpenDSS test collection) or an absolute path is followed
and scanned like any other, and so are the files commands read (bus coordinates, load shapes).
What it may not do is refused by name, with its file and line, before the engine runs anything
(:func:`scan`), because the engine would do it:

- write a file the command names, or move the folders the engine reads from and writes to:
  ``CD``, ``Set DataPath`` (and ``datapath=`` after ``Solve``, or a value that lands on it by
  position), ``Save``, ``Export`` with a file name, ``AlignFile``, ``Distribute``, ``Rephase``,
  ``Set CaseName`` (the folder its demand-interval files go to); ``Compile`` inside the files,
  which moves OpenDSS's output folder to the compiled file's folder (``Redirect`` reads the
  same file without it); an element name with a ``..`` path component (the engine names files
  in its output folder after elements: ``REG_<name>.csv``, ``<circuit>_EXP_VOLTAGES.csv``);
- run a program or code: ``DOScmd``, ``Set Editor``, ``Set ShowExport``, ``NewActor`` and
  ``Clone`` (engines openg2g does not read), and a user-written model (``UserModel``,
  ``ShaftModel``, ``DynaDLL``: a library the engine loads as it reads the property), named by
  any abbreviation of the property in an element that can take one, or by position there;
- hide what it does from this scan: a command, a ``New`` or a ``Redirect`` file given through a
  parser variable (``@name``), a redirect cycle
  (:class:`RedirectCycle`), more than :data:`MAX_FILES` files or a chain deeper than
  :data:`MAX_DEPTH`, a ``Redirect`` whose file cannot be read.

Every other command runs. What the engine writes on its own (``Show``, ``Export`` of a kind
without a file name, ``Plot``, a regulator's ``DebugTrace``, demand-interval files) goes to its
output folder, the private scratch folder of the process that reads the file
(:func:`~openg2g.grid.feeder.opendss.engine`), deleted once the file is read.

**Definitions** (:attr:`Scan.definitions`): each element's ``New`` in the engine's order, from the
last ``Clear`` or ``New Circuit`` on. An element is *settled* when nothing the scan sees after its
``New`` could change it: no ``enabled`` among its own properties, no later command naming it
(``Edit``, ``Disable``, ``class.name.property=``), no ``BatchEdit`` of its class. Only a settled
element can be refused before the engine runs; any other is left to the engine.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from openg2g.core.errors import FeederError

__all__ = [
    "COMMANDS",
    "EXPORTS",
    "MAX_DEPTH",
    "MAX_FILES",
    "OPTIONS",
    "Definition",
    "RedirectCycle",
    "Refused",
    "Scan",
    "describe_refused",
    "scan",
    "shown",
]

MAX_FILES = 2_000
"""Files a master may pull in, counted each time one is read; a master pulling in more is refused."""

MAX_DEPTH = 100
"""Longest chain of files redirecting to the next one a master may open; a deeper one is refused."""

COMMANDS = (
    *("New", "Edit", "More", "M", "~", "Select", "Save", "Show", "Solve", "Enable", "Disable", "Plot"),
    *("Reset", "Compile", "Set", "Dump", "Open", "Close", "//", "Redirect", "Help", "Quit", "?", "Next"),
    *("Panel", "Sample", "Clear", "About", "Calcvoltagebases", "SetkVBase", "BuildY", "Get", "Init"),
    *("Export", "Fileedit", "Voltages", "Currents", "Powers", "Seqvoltages", "Seqcurrents", "Seqpowers"),
    *("Losses", "Phaselosses", "Cktlosses", "Allocateloads", "Formedit", "Totals", "Capacity", "Classes"),
    *("Userclasses", "Zsc", "Zsc10", "ZscRefresh", "Ysc", "puvoltages", "VarValues", "Varnames"),
    *("Buscoords", "MakeBusList", "MakePosSeq", "Reduce", "Interpolate", "AlignFile", "TOP", "Rotate"),
    *("Vdiff", "Summary", "Distribute", "DI_plot", "Comparecases", "YearlyCurves", "CD", "Visualize"),
    *("CloseDI", "DOScmd", "Estimate", "Reconductor", "_InitSnap", "_SolveNoControl", "_SampleControls"),
    *("_DoControlActions", "_ShowControlQueue", "_SolveDirect", "_SolvePFlow", "AddBusMarker", "Uuids"),
    *("SetLoadAndGenKV", "CvrtLoadshapes", "NodeDiff", "Rephase", "SetBusXY", "UpdateStorage"),
    *("Obfuscate", "LatLongCoords", "BatchEdit", "Pstcalc", "Variable", "ReprocessBuses"),
    *("ClearBusMarkers", "RelCalc", "var", "Cleanup", "FinishTimeStep", "NodeList", "Connect"),
    *("Disconnect", "Remove", "CalcIncMatrix", "CalcIncMatrix_O", "Refine_BusLevels", "CalcLaplacian"),
    *("ExportOverloads", "ExportVViolations", "Zsc012", "AllPCEatBus", "AllPDEatBus", "TotalPowers"),
    *("GISCoords", "ClearAll", "COMHelp", "NewActor", "Wait", "SolveAll", "Abort", "Clone"),
)
"""The engine's commands, in its order (``Executive.Command(i)``): a word names the first it begins."""

OPTIONS = (
    *("type", "element", "hour", "sec", "year", "frequency", "stepsize", "mode", "random", "number"),
    *("time", "class", "object", "circuit", "editor", "tolerance", "maxiterations", "h", "Loadmodel"),
    *("Loadmult", "normvminpu", "normvmaxpu", "emergvminpu", "emergvmaxpu", "%mean", "%stddev", "LDCurve"),
    *("%growth", "Genkw", "Genpf", "CapkVAR", "Addtype", "Allowduplicates", "Zonelock", "UEweight"),
    *("Lossweight", "UEregs", "Lossregs", "Voltagebases", "Algorithm", "Trapezoidal", "Autobuslist"),
    *("Controlmode", "Tracecontrol", "Genmult", "Defaultdaily", "Defaultyearly", "Allocationfactors"),
    *("Cktmodel", "Pricesignal", "Pricecurve", "Terminal", "Basefrequency", "Harmonics", "Maxcontroliter"),
    *("Bus", "Datapath", "KeepList", "ReduceOption", "DemandInterval", "%Normal", "DIVerbose", "Casename"),
    *("Markercode", "Nodewidth", "Log", "Recorder", "Overloadreport", "Voltexceptionreport", "Cfactors"),
    *("ShowExport", "Numallociterations", "DefaultBaseFrequency", "Markswitches", "Switchmarkercode"),
    *("Daisysize", "Marktransformers", "TransMarkerCode", "TransMarkerSize", "LoadShapeClass"),
    *("EarthModel", "QueryLog", "MarkCapacitors", "MarkRegulators", "MarkPVSystems", "MarkStorage"),
    *("CapMarkerCode", "RegMarkerCode", "PVMarkerCode", "StoreMarkerCode", "CapMarkerSize"),
    *("RegMarkerSize", "PVMarkerSize", "StoreMarkerSize", "NeglectLoadY", "MarkFuses", "FuseMarkerCode"),
    *("FuseMarkerSize", "MarkReclosers", "RecloserMarkerCode", "RecloserMarkerSize", "RegistryUpdate"),
    *("MarkRelays", "RelayMarkerCode", "RelayMarkerSize", "ProcessTime", "TotalTime", "StepTime"),
    *("SampleEnergyMeters", "MinIterations", "DSSVisualizationTool", "KeepLoad", "Zmag", "SeasonRating"),
    *("SeasonSignal", "LineTypes", "EventLogDefault", "LongLineCorrection", "ShowReports", "NumCPUs"),
    *("NumCores", "NumActors", "ActiveActor", "CPU", "ActorProgress", "Parallel", "ConcatenateReports"),
    "NUMANodes",
)
"""The options of ``Set`` and ``Solve``, in the engine's order (``Executive.Option(i)``): a value
without a name sets the option after the one before it."""

EXPORTS = (
    *("Voltages", "SeqVoltages", "Currents", "SeqCurrents", "Estimation", "Capacity", "Overloads"),
    *("Unserved", "Powers", "SeqPowers", "Faultstudy", "Generators", "Loads", "Meters", "Monitors"),
    *("Yprims", "Y", "seqz", "P_byphase", "CIM100Fragments", "CIM100", "CDPSMAsset", "Buscoords"),
    *("Losses", "Uuids", "Counts", "Summary", "CDPSMElec", "CDPSMGeo", "CDPSMTopo", "CDPSMStateVar"),
    *("Profile", "EventLog", "AllocationFactors", "VoltagesElements", "GICMvars", "BusReliability"),
    *("BranchReliability", "NodeNames", "Taps", "NodeOrder", "ElemCurrents", "ElemVoltages"),
    *("ElemPowers", "Result", "YNodeList", "YVoltages", "YCurrents", "PVSystem_Meters"),
    *("Storage_Meters", "Sections", "ErrorLog", "IncMatrix", "IncMatrixRows", "IncMatrixCols"),
    *("BusLevels", "Laplacian"),
)
"""The kinds of ``Export``, in the engine's order (``help export`` lists them)."""

_EXPORTS_WITH_OPTION = {"unserved", "powers", "p_byphase", "monitors", "y", "profile", "sections"}
"""Export kinds whose next word is an option of theirs (``powers kva``, ``monitors m1``), not a file."""

_EXPORTS_BY_NAME = {"cim100fragments", "cim100"}
"""Export kinds that take ``name=value`` options, one of which (any abbreviation of ``fil``) is the file."""

_WRITES_NAMED = "writes the file it names"
_MOVES_FOLDER = "moves the folder OpenDSS reads from and writes to"
_CODE = "a library OpenDSS would load and run"

_REFUSED_COMMANDS: dict[str, str] = {
    "cd": _MOVES_FOLDER,
    "compile": (
        "moves OpenDSS's output folder to the compiled file's folder, where a later Show, Export or trace "
        "would write (Redirect reads the same file without moving it)"
    ),
    "save": "writes a copy of the circuit into a folder it creates",
    "alignfile": "writes an aligned copy of the file beside it",
    "distribute": "writes the generator file it names, then reads it",
    "rephase": "writes an editing script",
    "doscmd": "runs a shell command",
    "newactor": "starts another OpenDSS engine, which openg2g does not read",
    "clone": "starts other OpenDSS engines, which openg2g does not read",
}
"""Commands refused wherever they are (lower case), and why."""

_REFUSED_OPTIONS: dict[str, str] = {
    "datapath": _MOVES_FOLDER,
    "casename": "names the folder demand-interval files are written to",
    "editor": "names a program for OpenDSS to start",
    "showexport": "starts the editor on each exported file",
}
"""``Set``/``Solve`` options refused (lower case), and why."""

_SETS_OPTIONS = {"set", "solve"}
"""Commands whose words are options (``Solve mode=daily``)."""

_EDITS = {"new", "edit", "more", "m", "~", "batchedit"}
"""Commands that set an element's properties (a property assignment ``class.name.prop=value`` too)."""

_MODEL_CLASSES = {"generator", "pvsystem", "storage", "capcontrol"}
"""Element classes with a user-written model property (:data:`_MODEL_PROPERTIES`)."""

_MODEL_PROPERTIES = ("usermodel", "shaftmodel", "dynadll")
"""Properties naming a library the engine loads (any abbreviation of them may reach them)."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_CLIMBS = re.compile(r"(?:^|[./\\])\.\.(?:[/\\]|$)")
"""A ``..`` path component in an element's name (``class.name``; the engine takes ``/`` and ``\\``
for separators)."""
_NAME_MENTION = re.compile(r"(?<![\w.])([a-z_]\w*)\.([^\s.=,;\"'()\[\]{}]+)")
"""``class.name`` in a command: a command that names an element may edit it (its name ends at a
dot, a space or a delimiter, as a property follows it: ``Load.ld.kW=3``)."""


# ----------------------------------------------------------------------------------- parser
_WHITE = " \t"
_DELIMITERS = ",="
_QUOTES = {"(": ")", '"': '"', "'": "'", "[": "]", "{": "}"}
_UNQUOTED = re.compile(r"(?:[^,= \t!/]|/(?!/))*")
_BLANKS = re.compile(r"[ \t]*")
"""The characters of a word outside quotes: up to a delimiter, a blank, ``!`` or ``//``."""


class _Parser:
    """OpenDSS's command parser (``TDSSParser.NextParam`` of DSS C-API), as far as the scan needs:
    each parameter's name (before ``=``) and value, quotes and brackets grouping, ``!`` or ``//``
    outside them ending the line (:attr:`comment` is where)."""

    def __init__(self, line: str) -> None:
        self.buf = line + " "  # the engine appends a blank so that the last word ends
        self.end = len(self.buf) - 1
        self.last = " "  # the delimiter that ended the last word, "!" for a comment
        self.comment: int | None = None
        self.pos = self._skip(0)

    def _skip(self, pos: int) -> int:
        match = _BLANKS.match(self.buf, pos, self.end)
        return pos if match is None else match.end()

    def _token(self) -> str:
        buf, pos, end = self.buf, self.pos, self.end
        if pos > end:
            return ""
        close = _QUOTES.get(buf[pos])
        if close is not None:
            start = pos + 1
            found = buf.find(close, start, end)
            pos = end if found < 0 else found
            token = buf[start:pos]
            if pos < end:
                pos += 1
        else:
            match = _UNQUOTED.match(buf, pos, end)
            assert match is not None  # the pattern matches the empty word too
            token, pos = match.group(), match.end()
            if pos < end:
                char = buf[pos]
                self.last = " " if char in _WHITE else "!" if char in "!/" else char
        if self.last == "!":
            self.comment = pos
            self.pos = len(buf)
            return token
        if self.last == " ":
            pos = self._skip(pos)
        if pos < end and buf[pos] in _DELIMITERS:
            self.last = buf[pos]
            pos += 1
        self.pos = self._skip(pos)
        return token

    def param(self) -> tuple[str, str]:
        """The next ``(name, value)``; the name is empty for a value given by position."""
        self.last = " "
        token = self._token()
        if self.last == "=":
            return token, self._token()
        return "", token

    def params(self) -> list[tuple[str, str]]:
        """Every parameter left on the line (a trailing empty one dropped)."""
        out = []
        while self.pos < self.end:
            out.append(self.param())
        while out and out[-1] == ("", ""):
            out.pop()
        return out


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower(text: str) -> str:
    """``text`` in lower case as the engine makes it (ASCII letters only)."""
    return text.translate(_LOWER)


@functools.cache
def _lowered(names: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """``names`` in lower case, in order and as a set."""
    low = tuple(_lower(n) for n in names)
    return low, frozenset(low)


def _named(word: str, names: tuple[str, ...]) -> str | None:
    """The name (lower case) of ``names`` the engine takes ``word`` for: the same name, else the
    first that begins with it; None for none (or no word)."""
    low = _lower(word)
    if not low:
        return None
    ordered, known = _lowered(names)
    if low in known:
        return low
    return next((n for n in ordered if n.startswith(low)), None)


# ----------------------------------------------------------------------------------- results
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


class Definition(NamedTuple):
    """Where an element is defined: the file and line of its ``New`` command, whether it is
    settled (module docstring), and the properties that command gives it, its ``~`` continuations
    included (lower case, comments removed)."""

    file: Path
    line: int
    settled: bool
    properties: str


class Refused(NamedTuple):
    """A command refused before the engine runs: where, the command as written, and why."""

    file: Path
    line: int
    command: str
    why: str


_SHOWN_CHARS = 200
"""Characters of a refused command a message shows."""


def describe_refused(refused: list[Refused], folder: Path) -> list[str]:
    """One line per refused command: ``file line N: command: why`` (paths as :func:`shown`; no line
    or command for a file that cannot be read at all)."""
    out = []
    for r in refused:
        at = f"{shown(r.file, folder)} line {r.line}" if r.line else shown(r.file, folder)
        text = r.command if len(r.command) <= _SHOWN_CHARS else r.command[: _SHOWN_CHARS - 3] + "..."
        out.append(f"{at}: {text}: {r.why}" if text else f"{at}: {r.why}")
    return out


@dataclass(frozen=True)
class Scan:
    """What the scan of a master found.

    :param definitions: every element ``"class.name"`` (lower case) the circuit defines, with where.
    :param refused: the commands refused (module docstring), in the engine's order.
    :param utf8: every file read is UTF-8 (or UTF-16); else its names are bytes of another encoding,
        Latin-1 most often, which the engine keeps as they are.
    """

    definitions: dict[str, Definition]
    refused: list[Refused] = field(default_factory=list)
    utf8: bool = True


# ----------------------------------------------------------------------------------- walk
class _Command(NamedTuple):
    """One command: where, its text (comment removed), the command it runs (lower case; ``=`` for a
    property assignment ``name=value``, whose parameters include that first one; ``@`` for one named
    through a parser variable; "" for a word that names no command) and its parameters after the
    command's own word."""

    file: Path
    line: int
    text: str
    verb: str
    params: list[tuple[str, str]]


def _command(file: Path, line: int, raw: str) -> _Command | None:
    """The command of a line, None for a blank or comment line."""
    parser = _Parser(raw)
    params = parser.params()
    text = (raw if parser.comment is None else raw[: parser.comment]).strip()
    if not params or params[0] == ("", ""):
        return None
    name, value = params[0]
    if name:  # name=value: a property of an element, not a command
        return _Command(file, line, text, "=", params)
    if value.startswith("@") and len(value) > 1:
        return _Command(file, line, text, "@", params[1:])
    return _Command(file, line, text, _named(value, COMMANDS) or "", params[1:])


class _Frame:
    """A file being read: its lines and where the reading is."""

    def __init__(self, path: Path, lines: list[str], opened_at: tuple[Path, int] | None) -> None:
        self.path = path
        self.folder = Path(os.path.realpath(path.parent))  # the engine's working folder while it reads
        self.lines = lines
        self.index = 0
        self.in_block = False
        self.opened_at = opened_at


class _Walk:
    """The commands of a master and every file it pulls in, in the engine's order; the refusals the
    walk itself finds (a file it cannot read or named through a variable, a cycle) gathered on the way."""

    def __init__(self, master: Path) -> None:
        self.master = master
        self.refused: list[Refused] = []
        self.utf8 = True
        self.files = 0

    def commands(self) -> Iterator[_Command]:
        """Each command of every file read, a ``Redirect``'s file read where the command is.

        :raises FeederError: more than :data:`MAX_FILES` files, a chain deeper than :data:`MAX_DEPTH`.
        """
        stack: list[_Frame] = []
        lines = self._lines(self.master, None)
        if lines is not None:
            stack.append(_Frame(self.master, lines, None))
        while stack:
            frame = stack[-1]
            if frame.index >= len(frame.lines):
                stack.pop()
                continue
            raw = frame.lines[frame.index]
            frame.index += 1
            if not frame.in_block and raw.startswith("/*"):
                frame.in_block = True
            if frame.in_block:  # the whole line is the comment's, up to the one holding */
                frame.in_block = "*/" not in raw
                continue
            command = _command(frame.path, frame.index, raw)
            if command is None:
                continue
            yield command
            if command.verb in ("redirect", "compile"):
                opened = self._open(command, frame, stack)
                if opened is not None:
                    stack.append(opened)

    def _open(self, command: _Command, frame: _Frame, stack: list[_Frame]) -> _Frame | None:
        """The frame of the file a ``Redirect`` names (None when the engine would read none)."""
        argument = command.params[0][1] if command.params else ""
        if not argument:
            return None  # no file: the engine says so
        if argument.startswith("@"):
            self.refuse(command, "names its file through a parser variable, which openg2g cannot follow")
            return None
        target = self._target(frame.folder, argument)
        where = (frame.path, frame.index)
        if target is None:
            self.refuse(command, f"file not found: {Path(os.path.abspath(frame.folder / argument))}")
            return None
        real = Path(os.path.realpath(target))
        chain = [f.opened_at for f in stack[1:] if f.opened_at is not None] + [where]
        if any(Path(os.path.realpath(f.path)) == real for f in stack):  # the engine would recurse until it crashed
            self.refuse(command, f"redirect cycle: {RedirectCycle(chain, target).describe(self.master.parent)}")
            return None
        if len(stack) >= MAX_DEPTH:
            raise FeederError(
                f"{self.master}: files redirecting one to the next more than {MAX_DEPTH} deep "
                f"({shown(frame.path, self.master.parent)} line {frame.index} opens the next one): "
                "openg2g does not read so deep a chain"
            )
        lines = self._lines(target, command)
        return None if lines is None else _Frame(target, lines, where)

    def _target(self, folder: Path, argument: str) -> Path | None:
        """The file the engine reads for ``argument`` from ``folder``: the name itself, else with
        ``.dss`` added when the full path has no dot; None for neither."""
        expanded = os.path.abspath(folder / argument)  # ExpandFileName: made whole, .. taken out
        if os.path.isfile(expanded):
            return Path(expanded)
        if "." not in expanded and os.path.isfile(expanded + ".dss"):
            return Path(expanded + ".dss")
        return None

    def _lines(self, path: Path, command: _Command | None) -> list[str] | None:
        """The lines of ``path`` as the engine has them (:func:`_text`), None when it cannot be read
        (refused, with ``command`` that named it).

        :raises FeederError: more than :data:`MAX_FILES` files read.
        """
        self.files += 1
        if self.files > MAX_FILES:
            raise FeederError(f"{self.master}: more than {MAX_FILES} files read: openg2g does not read so many")
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.refuse(command or _Command(path, 0, "", "", []), f"cannot be read: {exc.strerror}")
            return None
        text, utf8 = _text(data)
        self.utf8 = self.utf8 and utf8
        return _LINE_BREAK.split(text)

    def refuse(self, command: _Command, why: str) -> None:
        self.refused.append(Refused(command.file, command.line, command.text, why))


def _text(data: bytes) -> tuple[str, bool]:
    """A file's text as the engine reads it, and whether its bytes are UTF-8: UTF-16 after its
    byte-order mark (the engine converts it), else the bytes themselves, a UTF-8 byte-order mark
    dropped (bytes that are not UTF-8 kept, as the engine keeps them: the scan only compares ASCII)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace"), True
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), False


# ----------------------------------------------------------------------------------- checks
def _refusals(command: _Command, active: str | None) -> list[str]:
    """Why ``command`` is refused (module docstring), none when it runs; ``active`` is the class of
    the element the engine is editing (None when the scan cannot tell)."""
    verb = command.verb
    if verb == "@":
        return ["names its command through a parser variable, which openg2g cannot follow"]
    if verb in _REFUSED_COMMANDS:
        return [_REFUSED_COMMANDS[verb]]
    if verb in _SETS_OPTIONS:
        return _option_refusals(command.params)
    if verb == "export":
        return _export_refusals(command.params)
    out = []
    if verb == "new":
        target = _new_target(command.params)
        if target.startswith("@"):
            out.append("names its element through a parser variable, which openg2g cannot follow")
        elif _CLIMBS.search(target):
            out.append(
                f"the name {target!r} climbs out of a folder (..): OpenDSS writes files named after elements "
                "into its output folder"
            )
    if verb in _EDITS or verb == "=":
        out.extend(_model_refusals(command, active))
    return out


def _option_refusals(params: list[tuple[str, str]]) -> list[str]:
    """Why the options of a ``Set``/``Solve`` are refused: each option as the engine takes it, a
    value without a name being the option after the one before."""
    out = []
    index = -1
    for name, value in params:
        if not value:
            break  # the engine's options end at the first empty value
        if name:
            option = _named(name, OPTIONS)
            index = -1 if option is None else _lowered(OPTIONS)[0].index(option)
        else:
            index += 1
            option = _lower(OPTIONS[index]) if 0 <= index < len(OPTIONS) else None
        if option in _REFUSED_OPTIONS:
            given = "" if name else f" (the value {value!r}, by its position)"
            out.append(f"{OPTIONS[index]}{given} {_REFUSED_OPTIONS[option]}")
    return out


def _export_refusals(params: list[tuple[str, str]]) -> list[str]:
    """Why an ``Export`` is refused: it names a file (a word after its kind and the kind's own option)."""
    if not params:
        return []
    kind = _named(params[0][1], EXPORTS)
    rest = params[1:]
    if kind in _EXPORTS_BY_NAME:
        named = [(n, v) for n, v in rest if n]
        if any(_lower(n)[:3] == "fil"[: len(n)] for n, _ in named) or len(named) < len(rest):
            return [_WRITES_NAMED]
        return []
    if kind in _EXPORTS_WITH_OPTION:
        rest = rest[1:]
    return [_WRITES_NAMED] if rest else []


def _new_target(params: list[tuple[str, str]]) -> str:
    """The ``class.name`` a ``New`` defines (given as its first word or as ``object=``)."""
    if not params:
        return ""
    name, value = params[0]
    return value if not name or _named(name, ("object",)) else ""


def _model_refusals(command: _Command, active: str | None) -> list[str]:
    """Why a command setting properties is refused: it may name a user-written model, a property
    of :data:`_MODEL_PROPERTIES` of an element that can take one (or of an element the scan cannot
    tell), by any abbreviation or by position."""
    if command.verb in ("new", "edit"):
        cls = _lower(_new_target(command.params).partition(".")[0])
        params = command.params[1:]
    elif command.verb == "batchedit":
        cls = _lower(command.params[0][1].partition(".")[0]) if command.params else ""
        params = command.params[1:]
    elif command.verb == "=":
        name = _lower(command.params[0][0])
        parts = name.split(".")
        cls = parts[0] if len(parts) > 2 else active or ""
        params = [(parts[-1], command.params[0][1]), *command.params[1:]]
    else:  # More, M, ~: the element the engine is editing
        cls = active or ""
        params = command.params
    if cls and not cls.startswith("@") and cls not in _MODEL_CLASSES:  # a variable may name any class
        return []
    out = []
    for name, value in params:
        low = _lower(name)
        if not low:
            out.append(f"the value {value!r} sets a property by position, which may be a user-written model: {_CODE}")
        elif any(p.startswith(low) for p in _MODEL_PROPERTIES):
            out.append(f"{name}={value} may name a user-written model: {_CODE}")
    return out


def _active_class(command: _Command, active: str | None) -> str | None:
    """The class of the element the engine edits after ``command`` (None when the scan cannot tell):
    a ``New``, ``Edit`` or ``Select`` makes its element the one; a continuation keeps it."""
    if command.verb in ("new", "edit", "select"):
        cls, dot, _ = _new_target(command.params).partition(".")
        return _lower(cls) if dot and not cls.startswith("@") else None
    if command.verb in ("more", "m", "~"):
        return active
    if command.verb == "=":
        parts = command.params[0][0].split(".")
        return _lower(parts[0]) if len(parts) > 2 else active
    return None


# ----------------------------------------------------------------------------------- definitions
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

    def command(self, command: _Command) -> None:
        """One command, in the engine's order."""
        self.order += 1
        verb, words = command.verb, command.text
        rest = words.partition(" ")[2]
        if verb in ("more", "m", "~"):
            if self.last is not None:
                more = words.partition("~")[2] if words.startswith("~") else rest
                self.properties[self.last].append(more.strip().lower())
                if re.search(r"\benabled\s*=", more, re.IGNORECASE):
                    self.unsettled.add(self.last)
            return
        self.last = None
        if verb in ("clear", "clearall"):
            self.clear()
            return
        if verb == "new":
            cls, dot, name = _lower(_new_target(command.params)).partition(".")
            if cls == "circuit":
                self.clear()
                return
            if dot and name:
                element = f"{cls}.{name}"
                if element in self.defined:  # a second New names the element: the engine's to judge
                    self.mentioned[element] = self.order
                    return
                self.defined[element] = (command.file, command.line, self.order)
                props = (words.split(None, 2)[2:] or [""])[0]  # after the command and the element
                self.properties[element] = [props.lower()]
                if re.search(r"\benabled\s*=", props, re.IGNORECASE):
                    self.unsettled.add(element)
                self.last = element
                return
        if verb == "batchedit":
            self.batch[rest.strip().split(".", 1)[0].lower()] = self.order
        for cls, name in _NAME_MENTION.findall(words.lower()):
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


def scan(master: Path) -> Scan:
    """Scan ``master`` and every file it pulls in (module docstring): the definitions, the commands
    refused, whether every file is UTF-8.

    :raises FeederError: more than :data:`MAX_FILES` files or a chain deeper than :data:`MAX_DEPTH`.
    """
    walk = _Walk(master.resolve())
    found = _Definitions()
    active: str | None = None
    for command in walk.commands():
        found.command(command)
        for why in _refusals(command, active):
            walk.refuse(command, why)
        active = _active_class(command, active)
    return Scan(found.result(), walk.refused, walk.utf8)
