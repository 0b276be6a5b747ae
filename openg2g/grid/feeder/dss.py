"""Reader for the OpenDSS subset the IEEE test feeders use, producing a :class:`FeederModel`.

Supported: ``Clear``, ``New``/``Edit`` (also ``New object=class.name``), ``Class.name.prop=value``,
``~``/``More`` continuation, ``Redirect``/``Compile``, ``Set`` (``voltagebases``; other options are
ignored), ``CalcV``/``CalcVoltageBases``/``Solve``/``Show``/``Export``/``Plot`` (ignored),
``SetBusXY``, ``BusCoords``; comments ``!``, ``//`` and ``/* ... */``; RPN in-line math such as
``(8 1000 /)``; ``like=``. Ratings: ``normamps``/``emergamps`` of lines and linecodes (a line takes
its linecode's when the code is assigned), ``normhkva``/``emerghkva`` of transformers. Elements: ``Circuit``/``Vsource``, ``Line`` (linecode, matrices or
sequence values, ``Switch=y``), ``LineCode``, two-winding ``Transformer`` (wye/delta, 1- or
3-phase, ``bank=``), ``RegControl``, ``Load`` (models 1, 2, 4, 5; wye/delta), ``Capacitor``.
Anything else raises :class:`FeederError` naming the element and ``file:line``, as does a value
that cannot describe a network (not a finite number, an RPN arithmetic error, a zero or negative
length, voltage, rating or impedance, a power factor outside [-1, 1], a node that is not a
number, a duplicate element, a redirect cycle).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.model import (
    FREQUENCY_HZ,
    CapacitorModel,
    FeederModel,
    LineModel,
    LoadModel,
    RegControlModel,
    SourceModel,
    TransformerModel,
    WindingModel,
)

__all__ = ["read_dss"]

_PHASE = {1: "a", 2: "b", 3: "c"}
_UNIT_M = {"none": None, "mi": 1609.344, "kft": 304.8, "km": 1000.0, "m": 1.0, "ft": 0.3048, "in": 0.0254, "cm": 0.01}
_IGNORED_COMMANDS = {"clear", "solve", "calcv", "calcvoltagebases", "show", "export", "plot", "visualize"}
_OPEN = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}


# ----------------------------------------------------------------------------------- tokens
def _tokens(text: str) -> list[tuple[str | None, str]]:
    """Split one command's parameter text into ``(name or None, value)`` pairs."""
    out: list[tuple[str | None, str]] = []
    i, n = 0, len(text)

    def read_value(i: int) -> tuple[str, int]:
        if text[i] in _OPEN:
            close = _OPEN[text[i]]
            j = text.find(close, i + 1)
            if j < 0:
                j = n
            return text[i : j + 1], j + 1
        j = i
        while j < n and not text[j].isspace() and text[j] not in ",=":
            j += 1
        return text[i:j], j

    while i < n:
        while i < n and (text[i].isspace() or text[i] == ","):
            i += 1
        if i >= n:
            break
        tok, i = read_value(i)
        k = i
        while k < n and text[k].isspace():
            k += 1
        if k < n and text[k] == "=":
            k += 1
            while k < n and text[k].isspace():
                k += 1
            if k >= n:
                out.append((tok.lower(), ""))
                i = k
                continue
            val, i = read_value(k)
            out.append((tok.lower(), val))
        else:
            out.append((None, tok))
    return out


def _strip(value: str) -> str:
    value = value.strip()
    if value and value[0] in _OPEN and value[-1] == _OPEN[value[0]]:
        value = value[1:-1]
    return value.strip()


def _rpn(expr: str) -> float:
    """Value of an OpenDSS in-line RPN expression such as ``8 1000 /``.

    :raises ValueError: a malformed expression or an arithmetic error, said in words.
    """
    stack: list[float] = []
    ops: dict[str, Callable[[float, float], float]] = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / b,
        "^": lambda a, b: a**b,
    }
    for tok in expr.split():
        if tok in ops or tok.lower() == "sqrt":
            need = 1 if tok.lower() == "sqrt" else 2
            if len(stack) < need:
                raise ValueError(f"RPN expression ({expr}): {tok!r} needs {need} operand(s)")
            try:
                if need == 1:
                    stack.append(math.sqrt(stack.pop()))
                else:
                    b, a = stack.pop(), stack.pop()
                    stack.append(ops[tok](a, b))
            except ZeroDivisionError:
                raise ValueError(f"RPN expression ({expr}): division by zero") from None
            except OverflowError:
                raise ValueError(f"RPN expression ({expr}): result too large") from None
            except ValueError:
                raise ValueError(f"RPN expression ({expr}): {tok} of a negative number") from None
        else:
            stack.append(_float(tok))
    if len(stack) != 1:
        raise ValueError(f"RPN expression ({expr}) leaves {len(stack)} values instead of one")
    return stack[0]


def _float(text: str) -> float:
    """A finite number, else ValueError naming the text."""
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{text!r} is not a finite number")
    return x


def _num(value: str) -> float:
    s = _strip(value)
    try:
        x = float(s)
    except ValueError:
        x = _rpn(s)
    if not math.isfinite(x):
        raise ValueError(f"{s!r} is not a finite number")
    return x


def _positive(value: str) -> float:
    x = _num(value)
    if not x > 0:
        raise ValueError("must be > 0")
    return x


def _nonnegative(value: str) -> float:
    x = _num(value)
    if x < 0:
        raise ValueError("must be >= 0")
    return x


def _int(value: str, allowed: tuple[int, ...] | None = None) -> int:
    """A whole number, optionally one of ``allowed``."""
    x = _num(value)
    if x != int(x):
        raise ValueError("must be a whole number")
    if allowed is not None and int(x) not in allowed:
        raise ValueError(f"must be one of {', '.join(map(str, allowed))}")
    return int(x)


def _phases(value: str) -> int:
    return _int(value, (1, 2, 3))


def _array(value: str) -> list[float]:
    s = _strip(value).replace("|", " ").replace(",", " ")
    return [_float(x) for x in s.split()]


def _words(value: str) -> list[str]:
    return [w.strip("'\"").lower() for w in re.split(r"[\s,]+", _strip(value)) if w.strip("'\"")]


def _matrix(value: str) -> np.ndarray:
    """Lower-triangular (or full) matrix ``a | b c | d e f`` -> full symmetric array."""
    rows = [r for r in _strip(value).split("|")]
    vals = [[_float(x) for x in r.replace(",", " ").split()] for r in rows]
    n = len(vals)
    m = np.zeros((n, n))
    for i, row in enumerate(vals):
        if len(row) == i + 1:
            for j, v in enumerate(row):
                m[i, j] = m[j, i] = v
        elif len(row) == n:
            m[i, :] = row
        else:
            raise ValueError(f"bad matrix row {row}")
    return m


def _bool(value: str) -> bool:
    return _strip(value).lower()[:1] in ("y", "t", "1")


def _bus(spec: str) -> tuple[str, list[int]]:
    """``bus.node.node`` -> (bus, nodes).

    :raises ValueError: an empty bus name or a node that is not a whole number.
    """
    parts = _strip(spec).lower().split(".")
    if not parts[0]:
        raise ValueError(f"bus {spec!r} has no name")
    bad = [p for p in parts[1:] if p != "" and not p.isdigit()]
    if bad:
        raise ValueError(f"bus {spec!r}: node {bad[0]!r} is not a node number")
    return parts[0], [int(p) for p in parts[1:] if p != ""]


# ----------------------------------------------------------------------------------- elements
@dataclass
class _Elem:
    cls: str
    name: str
    where: str
    props: dict[str, Any] = field(default_factory=dict)


class _Reader:
    """Stateful reader: executes commands in file order, as OpenDSS does."""

    def __init__(self) -> None:
        self.circuit: _Elem | None = None
        self.elements: dict[str, dict[str, _Elem]] = {
            k: {} for k in ("linecode", "line", "transformer", "regcontrol", "load", "capacitor")
        }
        self.voltagebases: list[float] = []
        self.coords: dict[str, tuple[float, float]] = {}
        self.frequency_hz = FREQUENCY_HZ
        self.open_files: list[Path] = []  # the redirect chain being read, to refuse cycles

    # -- files ------------------------------------------------------------------------------
    def read_file(self, path: Path, where: str = "") -> None:
        if not path.is_file():
            raise FeederError(f"OpenDSS file not found: {path}")
        key = path.resolve()
        if key in self.open_files:
            chain = " -> ".join(p.name for p in [*self.open_files, key])
            raise FeederError(f"{where}: redirect cycle: {chain}")
        try:
            raw_text = path.read_text(errors="replace")
        except OSError as exc:
            raise FeederError(f"{where or path}: cannot read {path}: {exc.strerror}") from None
        text = raw_text.replace("\r\n", "\n").replace("\r", "\n")
        self.open_files.append(key)
        self._read_lines(path, text)
        self.open_files.pop()

    def _read_lines(self, path: Path, text: str) -> None:
        pending: tuple[str, str] | None = None
        in_block = False
        for lineno, raw in enumerate(text.split("\n"), start=1):
            line = raw
            if in_block:
                end = line.find("*/")
                if end < 0:
                    continue
                line = line[end + 2 :]
                in_block = False
            start = line.find("/*")
            if start >= 0:
                end = line.find("*/", start + 2)
                if end < 0:
                    in_block = True
                    line = line[:start]
                else:
                    line = line[:start] + line[end + 2 :]
            for mark in ("!", "//"):
                k = line.find(mark)
                if k >= 0:
                    line = line[:k]
            line = line.strip()
            if not line:
                continue
            where = f"{path}:{lineno}"
            first = line.split(None, 1)[0].lower()
            if line.startswith("~") or first == "more":
                if pending is None:
                    raise FeederError(f"{where}: continuation line with nothing to continue")
                rest = line[1:] if line.startswith("~") else line[4:]
                pending = (pending[0] + " " + rest, pending[1])
                continue
            if pending is not None:
                self.execute(pending[0], pending[1], path.parent)
            pending = (line, where)
        if pending is not None:
            self.execute(pending[0], pending[1], path.parent)

    # -- commands ---------------------------------------------------------------------------
    def execute(self, line: str, where: str, folder: Path) -> None:
        parts = line.split(None, 1)
        verb = parts[0].lower()
        rest = parts[1] if len(parts) > 1 else ""
        if verb in _IGNORED_COMMANDS:
            return
        if verb in ("redirect", "compile"):
            self.read_file(self._resolve(folder, self._file_arg(verb, rest, where), where), where)
            return
        if verb == "set":
            self._set(rest, where)
            return
        if verb == "setbusxy":
            kv = {k: v for k, v in _tokens(rest)}
            try:
                self.coords[_bus(kv["bus"])[0]] = (_num(kv["x"]), _num(kv["y"]))
            except KeyError:
                raise FeederError(f"{where}: SetBusXY needs bus=, x= and y=") from None
            except ValueError as exc:
                raise FeederError(f"{where}: SetBusXY: {exc}") from None
            return
        if verb == "buscoords":
            self._buscoords(self._resolve(folder, self._file_arg(verb, rest, where), where), where)
            return
        if verb in ("new", "edit"):
            toks = _tokens(rest)
            if not toks:
                raise FeederError(f"{where}: {verb} without an element")
            key, val = toks[0]
            target = val if key in (None, "object") else None
            if target is None:
                raise FeederError(f"{where}: {verb} needs class.name first")
            self._element(verb, target, toks[1:], where)
            return
        if "." in verb and "=" in line:
            # Class.name.prop=value
            head, value = line.split("=", 1)
            bits = head.strip().split(".")
            if len(bits) < 3:
                raise FeederError(f"{where}: cannot read {line!r}")
            self._element("edit", ".".join(bits[:-1]), [(bits[-1].lower(), value.strip())], where)
            return
        if re.fullmatch(r"[A-Za-z_]\w{0,39}", parts[0]):
            raise FeederError(f"{where}: unsupported OpenDSS command {parts[0]!r}")
        # not even a command word: the file is not OpenDSS text, and its content is not echoed
        raise FeederError(f"{where}: not an OpenDSS command (is this an OpenDSS .dss file?)")

    @staticmethod
    def _file_arg(verb: str, rest: str, where: str) -> str:
        words = rest.split()
        if not words:
            raise FeederError(f"{where}: {verb} needs a file name")
        return _strip(words[0])

    @staticmethod
    def _resolve(folder: Path, name: str, where: str) -> Path:
        """The file ``name`` in ``folder``, matched case-insensitively as on Windows."""
        p = folder / name
        if p.is_file():
            return p
        if p.is_dir():
            raise FeederError(f"{where}: {name!r} is a directory, not a file")
        for cand in folder.iterdir() if folder.is_dir() else []:
            if cand.name.lower() == name.lower() and cand.is_file():
                return cand
        raise FeederError(f"{where}: redirected file {name!r} not found in {folder}")

    def _set(self, rest: str, where: str) -> None:
        for key, val in _tokens(rest):
            try:
                if key == "voltagebases":
                    bases = _array(val)
                    if not all(b > 0 for b in bases):
                        raise ValueError("every voltage base must be > 0 kV")
                    self.voltagebases = bases
                elif key in ("defaultbasefrequency", "basefrequency"):
                    self.frequency_hz = _positive(val)
            except ValueError as exc:
                raise FeederError(f"{where}: Set {key}={val}: {exc}") from None

    def _buscoords(self, path: Path, where: str) -> None:
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise FeederError(f"{where or path}: cannot read bus coordinates {path}: {exc.strerror}") from None
        for raw in text.splitlines():
            bits = [b for b in re.split(r"[\s,]+", raw.strip()) if b]
            if len(bits) >= 3:
                try:
                    self.coords[bits[0].lower()] = (_float(bits[1]), _float(bits[2]))
                except ValueError:
                    continue  # a header line ("Bus,X,Y") or a comment

    def _element(self, verb: str, target: str, toks: list[tuple[str | None, str]], where: str) -> None:
        if "." not in target:
            raise FeederError(f"{where}: expected class.name, got {target!r}")
        cls, name = target.split(".", 1)
        cls, name = cls.lower(), _strip(name).lower()
        if cls in ("circuit", "vsource"):
            if verb == "new" and cls == "circuit":
                self.circuit = _Elem("vsource", name, where, _vsource_defaults())
            elif self.circuit is None or verb == "new":
                raise FeederError(f"{where}: {cls}.{name}: only the circuit's own source is supported")
            elem = self.circuit
        elif cls in self.elements:
            table = self.elements[cls]
            if verb == "new":
                if name in table:
                    raise FeederError(f"{where}: {cls}.{name} is defined twice (first at {table[name].where})")
                elem = _Elem(cls, name, where, _DEFAULTS[cls]())
                table[name] = elem
            else:
                if name not in table:
                    raise FeederError(f"{where}: {cls}.{name} is edited before it is defined")
                elem = table[name]
        else:
            raise FeederError(f"{where}: unsupported element {cls}.{name} (the reader handles {_SUPPORTED})")
        for key, val in toks:
            try:
                if key == "basefreq":
                    _positive(val)  # checked for every class; only lines use it (below)
                _SETTERS[elem.cls](self, elem, key, val)
            except FeederError:
                raise
            except ValueError as exc:
                raise FeederError(f"{where}: {cls}.{name}: {key}={val}: {exc}") from None


_SUPPORTED = "circuit/vsource, line, linecode, transformer, regcontrol, load, capacitor"

_MAX_COND = 1e12
"""Largest condition number of a line's or source's impedance matrix: above it the matrix is
zero or singular and the network cannot be solved."""


def _vsource_defaults() -> dict[str, Any]:
    return {
        "bus1": "sourcebus",
        "basekv": 115.0,
        "pu": 1.0,
        "angle": 0.0,
        "mvasc3": 2000.0,
        "mvasc1": 2100.0,
        "x1r1": 4.0,
        "x0r0": 3.0,
        "z": None,
        "phases": 3,
    }


def _linecode_defaults() -> dict[str, Any]:
    return {
        "nphases": 3,
        "r": None,
        "x": None,
        "c": None,
        "seq": _seq_defaults(),
        "units": "none",
        "basefreq": None,
        "normamps": None,
        "emergamps": None,
    }


def _seq_defaults() -> dict[str, float]:
    return {"r1": 0.058, "x1": 0.1206, "r0": 0.1784, "x0": 0.4047, "c1": 3.4, "c0": 1.6}


def _line_defaults() -> dict[str, Any]:
    return {
        "bus1": None,
        "bus2": None,
        "phases": 3,
        "linecode": None,
        "length": 1.0,
        "units": "none",
        "r": None,
        "x": None,
        "c": None,
        "seq": _seq_defaults(),
        "switch": False,
        "enabled": True,
        "basefreq": None,
        "normamps": None,
        "emergamps": None,
    }


def _transformer_defaults() -> dict[str, Any]:
    w = {"bus": None, "conn": "wye", "kv": 12.47, "kva": 1000.0, "r_pct": 0.2, "tap": 1.0}
    return {
        "phases": 3,
        "windings": [dict(w), dict(w)],
        "wdg": 0,
        "xhl": 7.0,
        "ppm": 1.0,
        "bank": None,
        "maxtap": 1.1,
        "mintap": 0.9,
        "numtaps": 32,
        "normhkva": None,
        "emerghkva": None,
    }


def _regcontrol_defaults() -> dict[str, Any]:
    return {
        "transformer": None,
        "winding": 1,
        "vreg": 120.0,
        "band": 3.0,
        "ptratio": 60.0,
        "ctprim": 300.0,
        "r": 0.0,
        "x": 0.0,
        "delay": 15.0,
        "ptphase": 1,
    }


def _load_defaults() -> dict[str, Any]:
    return {
        "bus1": None,
        "phases": 3,
        "conn": "wye",
        "model": 1,
        "kv": 12.47,
        "kw": 10.0,
        "kvar": None,
        "pf": 0.88,
        "vminpu": 0.95,
        "vmaxpu": 1.05,
        "vlowpu": 0.5,
        "cvrwatts": 1.0,
        "cvrvars": 2.0,
    }


def _capacitor_defaults() -> dict[str, Any]:
    return {"bus1": None, "bus2": None, "phases": 3, "conn": "wye", "kvar": 600.0, "kv": 12.47}


_DEFAULTS: dict[str, Callable[[], dict[str, Any]]] = {
    "linecode": _linecode_defaults,
    "line": _line_defaults,
    "transformer": _transformer_defaults,
    "regcontrol": _regcontrol_defaults,
    "load": _load_defaults,
    "capacitor": _capacitor_defaults,
}

_IGNORED_PROPS = {"basefreq", "spectrum", "yearly", "daily", "duty", "status", "numcust", "tapdelay", "maxtapchange"}


def _unsupported(elem: _Elem, key: str | None) -> FeederError:
    return FeederError(f"{elem.where}: {elem.cls}.{elem.name}: unsupported property {key!r}")


def _like(reader: _Reader, elem: _Elem, val: str) -> None:
    src = reader.elements[elem.cls].get(_strip(val).lower())
    if src is None:
        raise FeederError(f"{elem.where}: {elem.cls}.{elem.name}: like={val} names no earlier {elem.cls}")
    elem.props = copy.deepcopy(src.props)


def _set_vsource(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key in ("bus1", None):
        _bus(val)
        p["bus1"] = val
    elif key in ("basekv", "pu", "mvasc3", "mvasc1", "x1r1", "x0r0"):
        p[key] = _positive(val)
        if key.startswith("mvasc"):
            p["z"] = None
    elif key == "angle":
        p[key] = _num(val)
    elif key in ("r1", "x1", "r0", "x0"):
        if p["z"] is None:
            p["z"] = {"r1": 1.65, "x1": 6.6, "r0": 1.9, "x0": 5.7}
        p["z"][key] = _nonnegative(val)
    elif key == "phases":
        if _num(val) != 3:
            raise FeederError(f"{e.where}: only a three-phase source is supported")
    elif key in ("basefreq", "frequency"):
        reader.frequency_hz = _positive(val)
    else:
        raise _unsupported(e, key)


def _set_linecode(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key == "nphases":
        p["nphases"] = _phases(val)
    elif key in ("rmatrix", "xmatrix", "cmatrix"):
        p[key[0]] = _matrix(val)
    elif key in ("r1", "x1", "r0", "x0", "c1", "c0"):
        p["seq"][key] = _nonnegative(val)
        p["r"] = p["x"] = p["c"] = None
    elif key == "units":
        p["units"] = _unit(e, val)
    elif key == "basefreq":
        p["basefreq"] = _positive(val)
    elif key in ("normamps", "emergamps"):
        p[key] = _positive(val)
    elif key == "like":
        _like(reader, e, val)
    elif key in _IGNORED_PROPS:
        return
    else:
        raise _unsupported(e, key)


def _unit(e: _Elem, val: str) -> str:
    u = _strip(val).lower()
    if u not in _UNIT_M:
        raise FeederError(f"{e.where}: {e.cls}.{e.name}: unknown length unit {val!r}")
    return u


def _set_line(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key in ("bus1", "bus2"):
        _bus(val)
        p[key] = val
    elif key == "phases":
        p["phases"] = _phases(val)
    elif key == "linecode":
        name = _strip(val).lower()
        if name not in reader.elements["linecode"]:
            raise FeederError(f"{e.where}: line.{e.name}: unknown linecode {val!r}")
        code = reader.elements["linecode"][name].props
        p["linecode"] = name
        p["phases"] = code["nphases"]
        # as OpenDSS: assigning a linecode takes its ratings (a later normamps= overrides them)
        p["normamps"], p["emergamps"] = code["normamps"], code["emergamps"]
    elif key == "length":
        p["length"] = _positive(val)
    elif key == "units":
        p["units"] = _unit(e, val)
    elif key in ("rmatrix", "xmatrix", "cmatrix"):
        p[key[0]] = _matrix(val)
        p["linecode"] = None
    elif key in ("r1", "x1", "r0", "x0", "c1", "c0"):
        p["seq"][key] = _nonnegative(val)
        p["linecode"] = None
        p["r"] = p["x"] = p["c"] = None
    elif key == "switch":
        p["switch"] = _bool(val)
        if p["switch"]:
            p["seq"] = {"r1": 1.0, "x1": 1.0, "r0": 1.0, "x0": 1.0, "c1": 1.1, "c0": 1.0}
            p["linecode"] = None
            p["r"] = p["x"] = p["c"] = None
            p["length"], p["units"] = 0.001, "none"
    elif key == "enabled":
        p["enabled"] = _bool(val)
    elif key == "basefreq":
        p["basefreq"] = _positive(val)
    elif key in ("normamps", "emergamps"):
        p[key] = _positive(val)
    elif key == "like":
        _like(reader, e, val)
    elif key in _IGNORED_PROPS:
        return
    else:
        raise _unsupported(e, key)


def _set_transformer(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    w = p["windings"][p["wdg"]]
    if key == "phases":
        p["phases"] = _int(val, (1, 3))
    elif key == "windings":
        if _num(val) != 2:
            raise FeederError(f"{e.where}: transformer.{e.name}: only two-winding transformers are supported")
    elif key == "wdg":
        k = _int(val)
        if k not in (1, 2):
            raise FeederError(f"{e.where}: transformer.{e.name}: winding {k} (only 2 windings supported)")
        p["wdg"] = k - 1
    elif key == "bus":
        _bus(val)
        w["bus"] = val
    elif key == "conn":
        w["conn"] = _conn(e, _strip(val))
    elif key in ("kv", "kva", "tap"):
        w[key] = _positive(val)
    elif key == "%r":
        w["r_pct"] = _nonnegative(val)
    elif key in ("buses", "conns", "kvs", "kvas", "taps", "%rs"):
        if key in ("buses", "conns"):
            for i, word in enumerate(_words(val)[:2]):
                if key == "buses":
                    _bus(word)
                    p["windings"][i]["bus"] = word
                else:
                    p["windings"][i]["conn"] = _conn(e, word)
        else:
            values = _array(val)[:2]
            if key == "%rs" and min(values, default=0.0) < 0:
                raise ValueError("must be >= 0")
            if key != "%rs" and min(values, default=1.0) <= 0:
                raise ValueError("every value must be > 0")
            for i, x in enumerate(values):
                p["windings"][i][{"kvs": "kv", "kvas": "kva", "taps": "tap", "%rs": "r_pct"}[key]] = x
    elif key in ("xhl", "x12"):
        p["xhl"] = _nonnegative(val)
    elif key in ("xht", "xlt", "x13", "x23"):
        return  # third-winding reactances: irrelevant for two windings
    elif key == "%loadloss":
        for wi in p["windings"]:
            wi["r_pct"] = _nonnegative(val) / 2.0
    elif key in ("%noloadloss", "%imag"):
        if _num(val) != 0.0:
            raise FeederError(f"{e.where}: transformer.{e.name}: magnetising branch ({key}) is not supported")
    elif key in ("ppm", "ppm_antifloat"):
        p["ppm"] = _nonnegative(val)
    elif key == "bank":
        p["bank"] = _strip(val).lower()
    elif key in ("maxtap", "mintap"):
        p[key] = _positive(val)
    elif key == "numtaps":
        p["numtaps"] = _int(val)
        if p["numtaps"] < 1:
            raise ValueError("must be >= 1")
    elif key == "like":
        _like(reader, e, val)
    elif key in ("normhkva", "emerghkva"):
        p[key] = _positive(val)
    elif key in ("sub", "xrconst", "leadlag", "thermal", "n", "m"):
        return
    else:
        raise _unsupported(e, key)


def _conn(e: _Elem, val: str) -> str:
    v = val.lower()
    if v in ("wye", "y", "ln"):
        return "wye"
    if v in ("delta", "d", "ll"):
        return "delta"
    raise FeederError(f"{e.where}: {e.cls}.{e.name}: unknown connection {val!r}")


def _set_regcontrol(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key == "transformer":
        p["transformer"] = _strip(val).lower()
    elif key == "winding":
        p[key] = _int(val)
    elif key == "ptphase":
        p[key] = _int(val, (1, 2, 3))
    elif key in ("vreg", "band", "ptratio", "ctprim"):
        p[key] = _positive(val)
    elif key == "delay":
        p[key] = _nonnegative(val)
    elif key in ("r", "x"):
        p[key] = _num(val)
    elif key == "like":
        _like(reader, e, val)
    elif key in _IGNORED_PROPS or key in ("reversible", "revvreg", "revband", "revr", "revx", "debugtrace"):
        return
    else:
        raise _unsupported(e, key)


def _set_load(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key in ("bus1", None):
        _bus(val)
        p["bus1"] = val
    elif key == "phases":
        p["phases"] = _phases(val)
    elif key == "conn":
        p["conn"] = _conn(e, _strip(val))
    elif key == "model":
        m = _int(val)
        if m not in (1, 2, 4, 5):
            raise FeederError(f"{e.where}: load.{e.name}: load model {m} is not supported (1, 2, 4, 5 are)")
        p["model"] = m
    elif key == "kvar":
        p["kvar"] = _num(val)
    elif key == "pf":
        pf = _num(val)
        if not (0 < abs(pf) <= 1):
            raise ValueError("a power factor must lie in [-1, 1] and not be 0 (negative = leading)")
        p["pf"] = pf
        p["kvar"] = None
    elif key in ("kv", "vminpu", "vmaxpu"):
        p[key] = _positive(val)
    elif key == "vlowpu":
        p[key] = _nonnegative(val)
    elif key in ("kw", "cvrwatts", "cvrvars"):
        p[key] = _num(val)
    elif key == "like":
        _like(reader, e, val)
    elif key in _IGNORED_PROPS or key in ("vminnorm", "vminemerg", "xfkva", "allocationfactor", "kwh", "kwhdays"):
        return
    else:
        raise _unsupported(e, key)


def _set_capacitor(reader: _Reader, e: _Elem, key: str | None, val: str) -> None:
    p = e.props
    if key in ("bus1", None):
        _bus(val)
        p["bus1"] = val
    elif key == "bus2":
        _bus(val)
        p["bus2"] = val
    elif key == "phases":
        p["phases"] = _phases(val)
    elif key == "conn":
        p["conn"] = _conn(e, _strip(val))
    elif key in ("kvar", "kv"):
        arr = _array(val)
        if len(arr) != 1:
            raise FeederError(f"{e.where}: capacitor.{e.name}: multi-step capacitors are not supported")
        if key == "kv" and not arr[0] > 0:
            raise ValueError("must be > 0")
        p[key] = arr[0]
    elif key == "like":
        _like(reader, e, val)
    elif key in _IGNORED_PROPS:
        return
    else:
        raise _unsupported(e, key)


_SETTERS: dict[str, Callable[[_Reader, _Elem, str | None, str], None]] = {
    "vsource": _set_vsource,
    "linecode": _set_linecode,
    "line": _set_line,
    "transformer": _set_transformer,
    "regcontrol": _set_regcontrol,
    "load": _set_load,
    "capacitor": _set_capacitor,
}


# ----------------------------------------------------------------------------------- assembly
def _nodes(e: _Elem, spec: str | None, n_cond: int, n_phase: int) -> list[int]:
    """Node of each conductor: explicit ones first, then 1..n_phase, then ground (OpenDSS rules)."""
    if spec is None:
        raise FeederError(f"{e.where}: {e.cls}.{e.name}: no bus given")
    _, given = _bus(spec)
    if given:
        nodes = given[:n_cond] + [0] * max(0, n_cond - len(given))
    else:
        nodes = [i + 1 if i < n_phase else 0 for i in range(n_cond)]
    for k in nodes:
        if k not in (0, 1, 2, 3):
            raise FeederError(f"{e.where}: {e.cls}.{e.name}: node {k} (only nodes 0-3 are supported)")
    return nodes


def _phase_list(e: _Elem, nodes: list[int]) -> tuple[str, ...]:
    if 0 in nodes:
        raise FeederError(f"{e.where}: {e.cls}.{e.name}: a phase conductor on node 0 is not supported")
    return tuple(_PHASE[k] for k in nodes)


def _seq_to_phase(seq: dict[str, float], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z1, z0 = complex(seq["r1"], seq["x1"]), complex(seq["r0"], seq["x0"])
    zs, zm = (2 * z1 + z0) / 3, (z0 - z1) / 3
    cs, cm = (2 * seq["c1"] + seq["c0"]) / 3, (seq["c0"] - seq["c1"]) / 3
    z = np.full((n, n), zm) + np.eye(n) * (zs - zm)
    c = np.full((n, n), cm) + np.eye(n) * (cs - cm)
    return z.real, z.imag, c


def _build_line(reader: _Reader, e: _Elem) -> LineModel:
    p = e.props
    n = p["phases"]
    units, length = p["units"], p["length"]
    if p["linecode"] is not None:
        code = reader.elements["linecode"][p["linecode"]].props
        if code["r"] is not None:
            r, x = code["r"], code["x"] if code["x"] is not None else np.zeros_like(code["r"])
            c = code["c"] if code["c"] is not None else np.zeros_like(code["r"])
        else:
            r, x, c = _seq_to_phase(code["seq"], code["nphases"])
        code_units = code["units"]
        base_hz = code["basefreq"]
    else:
        if p["r"] is not None:
            r = p["r"]
            x = p["x"] if p["x"] is not None else np.zeros_like(r)
            c = p["c"] if p["c"] is not None else np.zeros_like(r)
        else:
            r, x, c = _seq_to_phase(p["seq"], n)
        code_units = "none"
        base_hz = p["basefreq"]
    if base_hz is not None and base_hz != reader.frequency_hz:
        raise FeederError(
            f"{e.where}: line.{e.name}: impedances given at basefreq {base_hz:g} Hz but the circuit runs at "
            f"{reader.frequency_hz:g} Hz (rescaling them is not supported)"
        )
    if r.shape != (n, n) or x.shape != (n, n) or c.shape != (n, n):
        shapes = " and ".join(f"{a.shape[0]}x{a.shape[1]}" for a in (r, x, c))
        raise FeederError(f"{e.where}: line.{e.name}: {n} phases but {shapes} r/x/c matrices")
    z = r + 1j * x
    if np.linalg.cond(z) > _MAX_COND:
        raise FeederError(
            f"{e.where}: line.{e.name}: zero or singular impedance matrix (largest |r + jx| "
            f"{np.abs(z).max():g} ohm per unit length); give nonzero r/x, or Switch=y for a closed switch"
        )
    # length expressed in the impedance data's unit
    if code_units != "none" and units != "none":
        factor = length * _UNIT_M[units] / _UNIT_M[code_units]
    else:
        factor = length
    length_unit = units if units != "none" else code_units
    length_km = length * _UNIT_M[length_unit] / 1000.0 if _UNIT_M[length_unit] else float("nan")
    w = 2 * math.pi * reader.frequency_hz
    nodes1 = _nodes(e, p["bus1"], n, n)
    nodes2 = _nodes(e, p["bus2"], n, n)
    if _bus(p["bus1"])[0] == _bus(p["bus2"])[0]:
        raise FeederError(f"{e.where}: line.{e.name}: bus1 and bus2 are the same bus {_bus(p['bus1'])[0]!r}")
    return LineModel(
        name=e.name,
        bus1=_bus(p["bus1"])[0],
        bus2=_bus(p["bus2"])[0],
        phases1=_phase_list(e, nodes1),
        phases2=_phase_list(e, nodes2),
        r_ohm=(r * factor).tolist(),
        x_ohm=(x * factor).tolist(),
        b_us=(w * c * 1e-3 * factor).tolist(),
        length_km=length_km,
        switch=bool(p["switch"]),
        in_service=bool(p["enabled"]),
        norm_amps=p["normamps"],
        emerg_amps=p["emergamps"],
    )


def _build_transformer(e: _Elem) -> TransformerModel:
    p = e.props
    n = p["phases"]
    if n not in (1, 3):
        raise FeederError(f"{e.where}: transformer.{e.name}: {n} phases (1 or 3 supported)")
    if not p["maxtap"] > p["mintap"]:
        raise FeederError(f"{e.where}: transformer.{e.name}: maxtap {p['maxtap']} must exceed mintap {p['mintap']}")
    if p["xhl"] == 0 and all(w["r_pct"] == 0 for w in p["windings"]):
        raise FeederError(f"{e.where}: transformer.{e.name}: zero impedance (xhl and %r are all 0)")
    windings = []
    for w in p["windings"]:
        n_cond = n + 1 if w["conn"] == "wye" else (n if n == 3 else 2)
        nodes = _nodes(e, w["bus"], n_cond, n)
        phase_nodes = nodes[:n] if w["conn"] == "wye" or n == 3 else nodes[:2]
        if w["conn"] == "wye" and nodes[n] != 0:
            raise FeederError(f"{e.where}: transformer.{e.name}: ungrounded wye neutral is not supported")
        if w["conn"] == "delta" and n == 1:
            raise FeederError(f"{e.where}: transformer.{e.name}: 1-phase delta winding is not supported")
        windings.append(
            WindingModel(
                bus=_bus(w["bus"])[0],
                phases=_phase_list(e, phase_nodes),
                conn=w["conn"],
                kv=w["kv"],
                kva=w["kva"],
                r_pct=w["r_pct"],
                tap=w["tap"],
            )
        )
    return TransformerModel(
        name=e.name,
        n_phases=n,
        windings=windings,
        x_pct=p["xhl"],
        ppm_antifloat=p["ppm"],
        bank=p["bank"],
        min_tap_pu=p["mintap"],
        max_tap_pu=p["maxtap"],
        num_taps=p["numtaps"],
        norm_kva=p["normhkva"],
        emerg_kva=p["emerghkva"],
    )


def _build_load(e: _Elem) -> LoadModel:
    p = e.props
    n = p["phases"]
    n_cond = n + 1 if p["conn"] == "wye" else (n if n == 3 else n + 1)
    nodes = _nodes(e, p["bus1"], n_cond, n)
    if p["conn"] == "wye":
        if nodes[n] != 0:
            raise FeederError(f"{e.where}: load.{e.name}: ungrounded wye neutral is not supported")
        nodes = nodes[:n]
        if 0 in nodes:
            raise FeederError(f"{e.where}: load.{e.name}: phase conductor on node 0")
    if not p["vminpu"] < p["vmaxpu"]:
        raise FeederError(f"{e.where}: load.{e.name}: vminpu {p['vminpu']} must be below vmaxpu {p['vmaxpu']}")
    kvar = p["kvar"]
    if kvar is None:
        pf = p["pf"]
        kvar = p["kw"] * math.sqrt(1.0 / pf**2 - 1.0) * (1 if pf >= 0 else -1)
    return LoadModel(
        name=e.name,
        bus=_bus(p["bus1"])[0],
        phases=tuple(_PHASE.get(k) for k in nodes),
        conn=p["conn"],
        model=p["model"],
        kv=p["kv"],
        kw=p["kw"],
        kvar=kvar,
        n_phases=n,
        vminpu=p["vminpu"],
        vmaxpu=p["vmaxpu"],
        vlowpu=p["vlowpu"],
        cvrwatts=p["cvrwatts"],
        cvrvars=p["cvrvars"],
    )


def _build_capacitor(e: _Elem) -> CapacitorModel:
    p = e.props
    n = p["phases"]
    if p["bus2"] is not None and any(_bus(p["bus2"])[1]):
        raise FeederError(f"{e.where}: capacitor.{e.name}: series or ungrounded capacitors are not supported")
    nodes = _nodes(e, p["bus1"], n, n)
    return CapacitorModel(
        name=e.name,
        bus=_bus(p["bus1"])[0],
        phases=_phase_list(e, nodes),
        conn=p["conn"],
        kvar=p["kvar"],
        kv=p["kv"],
    )


def _source(e: _Elem) -> SourceModel:
    p = e.props
    kv = p["basekv"]
    if p["z"] is not None:
        z1 = complex(p["z"]["r1"], p["z"]["x1"])
        z0 = complex(p["z"]["r0"], p["z"]["x0"])
    else:
        x1 = kv**2 / p["mvasc3"] / math.sqrt(1.0 + 1.0 / p["x1r1"] ** 2)
        r1 = x1 / p["x1r1"]
        xs = kv**2 / p["mvasc1"] / math.sqrt(1.0 + 1.0 / p["x0r0"] ** 2)
        rs = xs / p["x0r0"]
        z1 = complex(r1, x1)
        z0 = complex(3 * rs - 2 * r1, 3 * xs - 2 * x1)
    if min(abs(z1), abs(z0)) == 0:
        raise FeederError(f"{e.where}: vsource.{e.name}: zero source impedance (z1 = {z1}, z0 = {z0} ohm)")
    nodes = _nodes(e, p["bus1"], 3, 3)
    if nodes != [1, 2, 3]:
        raise FeederError(f"{e.where}: the source must connect to nodes 1.2.3")
    return SourceModel(
        bus=_bus(p["bus1"])[0],
        base_kv=kv,
        v_pu=p["pu"],
        angle_deg=p["angle"],
        z1_ohm=[z1.real, z1.imag],
        z0_ohm=[z0.real, z0.imag],
    )


def _bus_kv(
    source: SourceModel, lines: list[LineModel], transformers: list[TransformerModel], bases: list[float]
) -> dict[str, float]:
    """Base line-to-line voltage of every bus: propagate from the source through lines and
    transformer ratios, then snap to the nearest declared voltage base (as CalcVoltageBases)."""
    adj: dict[str, list[tuple[str, float]]] = {}
    for ln in lines:
        adj.setdefault(ln.bus1, []).append((ln.bus2, 1.0))
        adj.setdefault(ln.bus2, []).append((ln.bus1, 1.0))
    for t in transformers:
        w1, w2 = t.windings
        ratio = w2.kv / w1.kv
        adj.setdefault(w1.bus, []).append((w2.bus, ratio))
        adj.setdefault(w2.bus, []).append((w1.bus, 1.0 / ratio))
    kv: dict[str, float] = {source.bus: source.base_kv}
    stack = [source.bus]
    while stack:
        b = stack.pop()
        for nb, ratio in adj.get(b, []):
            if nb not in kv:
                kv[nb] = kv[b] * ratio
                stack.append(nb)
    if bases:
        kv = {b: min(bases, key=lambda v: abs(v - x)) for b, x in kv.items()}
    return kv


def _bank_names(transformers: list[TransformerModel], controlled: set[str]) -> None:
    """Give every regulator (a transformer with a RegControl) a bank: its ``bank=`` or, when the
    file names none, the group of regulators between the same two buses, named after the first
    (lower case, a trailing phase letter after a digit dropped: ``Reg1`` -> ``reg1``, ``reg1a``
    -> ``reg1``)."""
    groups: dict[tuple[str, str], str] = {}
    for t in transformers:
        if t.name not in controlled or t.bank is not None:
            continue
        key = (t.windings[0].bus, t.windings[1].bus)
        if key not in groups:
            groups[key] = re.sub(r"(?<=\d)[abc]$", "", t.name)
        t.bank = groups[key]


def _build_regcontrol(e: _Elem, transformers: set[str]) -> RegControlModel:
    p = e.props
    if p["transformer"] not in transformers:
        raise FeederError(f"{e.where}: regcontrol.{e.name}: unknown transformer {p['transformer']!r}")
    if p["winding"] != 2:
        raise FeederError(f"{e.where}: regcontrol.{e.name}: only winding=2 (the tapped winding) is supported")
    return RegControlModel(
        name=e.name,
        transformer=p["transformer"],
        winding=p["winding"],
        vreg_v=p["vreg"],
        band_v=p["band"],
        ptratio=p["ptratio"],
        ctprim_a=p["ctprim"],
        r_v=p["r"],
        x_v=p["x"],
        delay_s=p["delay"],
        ptphase=p["ptphase"],
    )


def _bus_phase_sets(
    source: SourceModel,
    lines: list[LineModel],
    transformers: list[TransformerModel],
    loads: list[LoadModel],
    capacitors: list[CapacitorModel],
) -> dict[str, set[str]]:
    """Bus -> the phases any element connects there (the source bus has all three)."""
    phases: dict[str, set[str]] = {source.bus: {"a", "b", "c"}}
    for ln in lines:
        phases.setdefault(ln.bus1, set()).update(ln.phases1)
        phases.setdefault(ln.bus2, set()).update(ln.phases2)
    for t in transformers:
        for w in t.windings:
            phases.setdefault(w.bus, set()).update(w.phases)
    for ld in loads:
        phases.setdefault(ld.bus, set()).update(p for p in ld.phases if p)
    for c in capacitors:
        phases.setdefault(c.bus, set()).update(c.phases)
    return phases


def read_dss(path: str | Path, name: str | None = None) -> FeederModel:
    """Read an OpenDSS master file (and everything it redirects to) into a :class:`FeederModel`.

    Bus coordinates come from ``SetBusXY``/``BusCoords`` commands, or else from a ``*BusXY*.csv``
    or ``BusCoords.dat`` file beside the master.

    :param path: master ``.dss`` file.
    :param name: feeder name; defaults to the circuit name.
    :raises FeederError: an unsupported command, element or property (message gives file:line),
        or a feeder without a circuit.
    """
    path = Path(path)
    reader = _Reader()
    reader.read_file(path)
    if reader.circuit is None:
        raise FeederError(f"{path}: no circuit defined (New Circuit.<name> ...)")
    if not reader.coords:
        for cand in sorted(path.parent.iterdir()):
            low = cand.name.lower()
            if ("busxy" in low and low.endswith(".csv")) or low == "buscoords.dat":
                reader._buscoords(cand, "")
    source = _source(reader.circuit)
    lines = [_build_line(reader, e) for e in reader.elements["line"].values()]
    transformers = [_build_transformer(e) for e in reader.elements["transformer"].values()]
    regcontrols = [_build_regcontrol(e, {t.name for t in transformers}) for e in reader.elements["regcontrol"].values()]
    controlled = {r.transformer for r in regcontrols}
    for t in transformers:
        if t.name not in controlled:
            t.bank = None
    _bank_names(transformers, controlled)
    loads = [_build_load(e) for e in reader.elements["load"].values()]
    capacitors = [_build_capacitor(e) for e in reader.elements["capacitor"].values()]
    bus_kv = _bus_kv(source, lines, transformers, reader.voltagebases)
    phases = _bus_phase_sets(source, lines, transformers, loads, capacitors)
    orphans = [b for b in phases if b not in bus_kv]
    if orphans:
        raise FeederError(f"{path}: buses not connected to the source: {sorted(orphans)}")
    order = [b for b in bus_kv]
    return FeederModel(
        name=name or reader.circuit.name,
        source=source,
        bus_kv={b: bus_kv[b] for b in order},
        bus_phases={b: tuple(sorted(phases[b])) for b in order},
        lines=lines,
        transformers=transformers,
        regcontrols=regcontrols,
        loads=loads,
        capacitors=capacitors,
        coords={b: reader.coords[b] for b in order if b in reader.coords},
        frequency_hz=reader.frequency_hz,
    )
