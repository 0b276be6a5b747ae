"""Reading any OpenDSS circuit into a :class:`FeederModel`, with OpenDSS's own engine.

The file is compiled by the DSS engine of DSS-Extensions (DSS-Python, the engine OpenDSS users
script), so every command, element, property, line construction (line codes, geometries, wire
and cable data, spacings), transformer code, in-line expression and redirect is read exactly as
OpenDSS reads it. The engine then solves one snapshot (controls held), and the model is taken
from the compiled circuit.

**What is read:**

- **buses**: each bus's nodes, its voltage base as OpenDSS reports it (``Bus.kVBase``, after
  ``CalcVoltageBases`` when the file leaves a base unset) and its coordinates (from the file, or
  from a ``*BusXY*.csv``/``BusCoords.dat`` file beside it, read by the engine);
- **source**: the circuit's ``Vsource``, three-phase (voltage, angle and its 3x3 Thevenin
  admittance in sequence impedances) or single-phase (one phase to ground); any further voltage
  source, and a current source (``Isource``), is a static element with its Norton current;
- **lines**: every conductor's node (neutrals and ground wires kept where the file keeps them),
  the whole line's series impedance and shunt susceptance matrices, switch flag, in or out of
  service, ratings;
- **transformers**: a two-winding, one- or three-phase transformer whose admittance is the
  two-winding model openg2g can retap (:func:`~openg2g.grid.feeder.network.stamp_transformer`)
  is kept as one, with its regulator control; any other (three-winding, center-tapped, with a
  magnetizing branch, a neutral impedance...) and an ``AutoTrans`` is a static element with
  OpenDSS's own primitive admittance, which never changes during a run (so it cannot be regulated);
- **capacitors** (one step, shunt) with their controls; **reactors**, **faults** and anything
  else passive: static elements;
- **loads** (OpenDSS load models 1, 2, 4 and 5) at ``kW x LoadMult`` (``kW`` for a fixed or
  exempt one, which a load multiplier never scales);
- **generation** at the output OpenDSS solves for it in the snapshot: **generators** of model 1
  (constant kW and kvar in their voltage band) and 2 (constant impedance), **PV systems** and
  **storage** elements of model 1 and 2 (a storage element idling, charging or discharging at
  the kW and kvar its state, inverter and limits give it: a charging or idling one draws power;
  held there for a whole run, with no state of charge: a scenario's ``grid.storage`` batteries
  are the ones a run charges and discharges);
  **generators of model 3**, which hold their voltage within their kvar limits
  (:class:`~openg2g.grid.feeder.model.RegulatedGeneratorModel`, solved by
  :mod:`~openg2g.grid.feeder.regulated`).

Every element's admittance as openg2g stamps it is checked against the engine's primitive
admittance (``Yprim``) at load: a difference above :data:`YPRIM_RTOL` is an error naming the
element, never a silent approximation. Metering and protection elements (monitors, energy
meters, sensors, fuses, reclosers, relays) do not change a snapshot and are not read. Switch
controls are read (:class:`~openg2g.grid.feeder.model.SwtControlModel`): a solve with controls
operates their switches, one with ``controlmode=off`` does not.

**What is refused**, and why: what openg2g cannot model, element by element (the classes of
:data:`REFUSED_CLASSES`: induction machines, inverter and storage controls, power-electronic and
geomagnetic elements; user-written models; generator models 4 to 7; load models 3, 6, 7 and 8;
a regulator of a transformer it cannot retap, control settings the model has no place for).
Every such element is named at once, with the file and line that define it
(:attr:`~openg2g.grid.feeder.dss_includes.Scan.definitions`); when the scan of the files is
sure of an element (nothing later can disable it), the refusal comes before the engine runs the
file at all, so none of the file's own solves is waited for. Errors of the engine itself (an
unknown property, a circuit it cannot build) reach the user with the file and the engine's
message, as a :class:`FeederError`; an OpenDSS warning (a duplicate ``New``, which the engine
ignores) does not stop the reading: the file is read on past it as OpenDSS does, and the warnings
are logged.

**What a file may do.** A ``.dss`` file is a script, and the engine runs every command of it. It
may read any file the user can (a ``Redirect`` to a sibling folder, bus coordinates, load shapes),
and what the engine writes by itself (``Show``, ``Export`` without a file name, ``Plot``, a debug
trace) goes to the scratch folder of the process that reads it, removed when the reading ends
(:func:`run_in_worker`). It may not write a file it names or move the engine's folders (``Export``
to a file, ``Save``, ``Set DataPath``, ``CD``, ``Compile`` inside the files...), run a program or
load a user-written model's library (``DOScmd``, ``Set Editor``, ``UserModel=``...), or hide what it
does from openg2g's scan (a command through a parser variable, a redirect cycle): each is refused
by name, with its file and line, before the engine runs anything
(:mod:`~openg2g.grid.feeder.dss_includes` lists them). The engine runs in a worker process with at
most :data:`READ_MEMORY_BYTES` of memory (or less, where the caller's limit is lower) for at most
:data:`READ_TIMEOUT_S`: a file that makes it crash or loop is an error naming the file, never a
crash of openg2g.

The initial state (taps, capacitor and switch states) is the circuit's as the file leaves it,
after any ``Solve`` it runs; a scenario sets its own taps. The file's ``maxcontroliter`` is kept for
openg2g's own solve with controls (:mod:`~openg2g.grid.feeder.settle`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import re
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.core.limits import lower_limit
from openg2g.grid.feeder.dss_includes import Definition, Refused, Scan, describe_refused, scan, shown
from openg2g.grid.feeder.model import (
    DEFAULT_EMERG_AMPS,
    DEFAULT_EMERG_KVA_FACTOR,
    DEFAULT_NORM_AMPS,
    CapacitorModel,
    CapControlModel,
    FeederModel,
    GeneratorModel,
    LineModel,
    LoadModel,
    PrimitiveModel,
    RegControlModel,
    RegulatedGeneratorModel,
    SourceModel,
    SwtControlModel,
    TransformerModel,
    WindingModel,
    node_label,
)
from openg2g.grid.feeder.network import (
    FORTESCUE,
    NodeIndex,
    Stamps,
    source_admittance,
    stamp_capacitor,
    stamp_line,
    stamp_transformer,
)

__all__ = [
    "READ_MEMORY_BYTES",
    "READ_TIMEOUT_S",
    "REFUSED_CLASSES",
    "YPRIM_RTOL",
    "engine",
    "read_opendss",
    "run_in_worker",
    "snapshot_mode",
]

_log = logging.getLogger(__name__)

READ_TIMEOUT_S = 300.0
"""Longest :func:`read_opendss` lets the engine read a file (s); IEEE 8500 takes about 2 s."""

READ_MEMORY_BYTES = 8 * 1024**3
"""Address space the engine's worker process may use (bytes); a lower limit of the caller stays."""

_WORKER = "import sys; from openg2g.grid.feeder.opendss import main; sys.exit(main())"
"""The worker process's program (``-m`` would run this module a second time beside its package's import)."""

_REFUSED = 2
"""Exit code of the worker when openg2g or the engine refuses the file (the reason on stderr)."""

YPRIM_RTOL = 1e-9
"""Largest difference between an element's admittance as openg2g stamps it and OpenDSS's ``Yprim``,
relative to the largest entry of ``Yprim``."""

_MAX_ITERATIONS = 500
"""Iteration limit of the snapshot solve at load (OpenDSS's default of 15 is too few for IEEE 8500)."""

_SQRT3 = math.sqrt(3.0)

_UNIT_M = {0: math.nan, 1: 1609.344, 2: 304.8, 3: 1000.0, 4: 1.0, 5: 0.3048, 6: 0.0254, 7: 0.01, 8: 0.001}
"""Metres per OpenDSS length unit code (0 = none: no length known)."""

_NOT_ELECTRICAL = {"monitor", "energymeter", "sensor", "fuse", "recloser", "relay", "fmonitor"}
"""Element classes that do not change a snapshot (metering and protection; their effect, an open
terminal, is read from the element they act on)."""

_STATIC_CLASSES = {"reactor", "fault", "autotrans", "isource"}
"""Element classes read as static elements by their primitive admittance (a current source's is
zero, with its Norton current)."""

_CONTROLS_OVER_TIME = (
    "it changes the output of the elements it controls with the voltage from one solution to the "
    "next, which openg2g does not model"
)

REFUSED_CLASSES: dict[str, str] = {
    "indmach012": (
        "an induction machine: its current follows its slip, a state of its own dynamics openg2g does not solve"
    ),
    "invcontrol": f"a smart-inverter control: {_CONTROLS_OVER_TIME}",
    "expcontrol": f"an exponential volt-var control: {_CONTROLS_OVER_TIME}",
    "storagecontroller": "a storage controller: it dispatches storage over time, which openg2g does not model",
    "gendispatcher": "a generator dispatcher: it dispatches generators over time, which openg2g does not model",
    "espvlcontrol": "a PV and storage dispatch control: it acts over time, which openg2g does not model",
    "vccs": "a voltage-controlled current source: a dynamic inverter model openg2g does not solve",
    "upfc": "a unified power flow controller: a power-electronic series device openg2g does not model",
    "upfccontrol": "the control of a unified power flow controller, which openg2g does not model",
    "vsconverter": "a voltage-source converter (an AC-DC link), which openg2g does not model",
    "gicsource": "a geomagnetically induced current source (a DC study), which openg2g does not model",
    "gicline": "a geomagnetically induced current line (a DC study), which openg2g does not model",
    "gictransformer": "a geomagnetically induced current transformer (a DC study), which openg2g does not model",
}
"""Element classes openg2g cannot model, and why: an element of one of them is refused (named with
the file and line that define it) unless it is disabled."""

_USER_MODEL_CLASSES = ("generator", "storage", "pvsystem")
"""Classes whose elements may run a user-written model (``UserModel=``, ``DynaDLL=``)."""

_GENERATOR_MODELS = {
    4: "generator model 4 (constant kW with a fixed kvar that turns into a fixed reactance outside its band)",
    5: "generator model 5 (constant kW with a constant reactance)",
    6: "generator model 6 (a user-written model, code openg2g does not run)",
    7: "generator model 7 (constant kW and kvar with its current limited below vminpu)",
}
"""Generator models openg2g does not solve, in words (1, 2 and 3 it does)."""

_CONSTANT_IMPEDANCE = (1.0, 1.0)
"""The voltage band of a constant-impedance element (generator, PV or storage model 2): the single
voltage 1 pu, where its impedance delivers its output (:class:`~openg2g.grid.feeder.model.GeneratorModel`)."""

_REFUSALS_SHOWN = 60
"""Refused elements a refusal lists at most (it counts the rest)."""

_PASSIVE_RTOL = 1e-12
"""Most negative eigenvalue of a line's resistance matrix, relative to its largest entry, taken as rounding."""

_WHOLE_MATRIX = 2
"""The engine's ``BuildYMatrix`` option that recomputes every element's primitive admittance."""

_LOAD_VARIABLE = 0
"""The engine's ``Loads.Status`` of a load the load multiplier scales (1 fixed, 2 exempt)."""

_LOAD_MODELS = (1, 2, 4, 5)
"""OpenDSS load models openg2g solves (see :class:`~openg2g.grid.feeder.solver.LoadKernel`)."""

_SNAPSHOT = 0
"""The engine's ``Solution.Mode`` of a snapshot solve."""

_SWITCH_ACTIONS = {1: "open", 2: "close"}
"""The engine's ``SwtControls.Action`` codes (``dssActionOpen``, ``dssActionClose``)."""

_SWITCH_STATES = {1: "open", 2: "closed"}
"""The engine's ``SwtControls.State`` and ``NormalState`` codes (0: a normal state never set)."""


# ----------------------------------------------------------------------------------- engine
@contextmanager
def engine(path: Path, warnings: list[str] | None = None, found: Scan | None = None) -> Iterator[Any]:
    """A fresh DSS engine context with the circuit at ``path`` read in, once the files are scanned
    (:func:`~openg2g.grid.feeder.dss_includes.scan`, or ``found``, the scan already made): no
    command of them runs when the scan refuses one.

    The file is read as ``Redirect`` reads it: the engine steps into the folder of each file it
    reads, so that every relative name resolves beside the file that names it (the commands that
    take a file, ``uuids`` among them, look only in the working folder), and the working folder
    is restored once it has read them. The engine's data and output folder is a temporary one of
    its own: whatever the file or a solve makes the engine write (a ``Show``, a regulator's debug
    trace) lands there and is deleted, never beside the user's files (in :func:`run_in_worker`'s
    process, the temporary folder is inside the worker's scratch folder). Its names are read as
    UTF-8, or as Latin-1 bytes when a file is not UTF-8 (the engine keeps a file's bytes as they
    are), so no name fails to read.

    The engine stops at the first message it gives, a warning included (DSS-Extensions' early
    abort), where OpenDSS reads on past a warning. A file stopped by a warning is read again with
    the engine reading on past its messages (:func:`_read_past_warnings`): its warnings are
    appended to ``warnings``; any other message is still an error.

    :raises FeederError: the scan refuses commands (each named with its file and line), or the
        engine refuses the file (its message, with the file).
    """
    found = scan(path) if found is None else found
    if found.refused:
        raise FeederError(_commands_refusal(path, found.refused))
    from dss import DSS, DSSException  # the engine's library is loaded only to read a file

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="openg2g-opendss-") as scratch:
        ctx = _new_context(DSS, scratch, found.utf8)
        try:
            try:
                ctx.Text.Command = f'redirect "{_engine_text(ctx, path)}"'
            except DSSException as exc:
                message = _engine_message(exc)
                if not _is_warning(message):
                    raise FeederError(f"{path}: OpenDSS: {message}") from None
                ctx.ClearAll()
                ctx = _new_context(DSS, scratch, found.utf8)
                past = _read_past_warnings(ctx, path, Path(scratch), message)
                if warnings is not None:
                    warnings.extend(past)
            finally:
                os.chdir(cwd)
            yield ctx
        finally:
            ctx.ClearAll()


def _new_context(dss: Any, scratch: str, utf8: bool) -> Any:
    """A new engine context with no editor, forms or shell commands, ``scratch`` as its data and
    output folder, its names read as UTF-8 (``utf8``) or as Latin-1 bytes."""
    ctx = dss.NewContext()
    ctx.AllowEditor = False
    ctx.AllowForms = False
    ctx.AllowDOScmd = False
    ctx.AllowChangeDir = True
    if not utf8:
        # DSS-Python decodes the engine's strings with its context's codec (UTF-8, strict): Latin-1
        # reads any byte, and encodes the names it read back to the same bytes
        ctx._api_util.codec = "latin-1"
    ctx.DataPath = scratch
    return ctx


def _engine_text(ctx: Any, path: Path) -> str:
    """``path`` as text the engine's codec encodes back to the file system's bytes."""
    return os.fsencode(path).decode(ctx._api_util.codec)


def _commands_refusal(path: Path, refused: list[Refused]) -> str:
    """The refusal of the commands of ``path``'s files the scan refuses, each with its file and line."""
    n = len(refused)
    head = (
        f"{path}: openg2g refuses {n} line{'s' if n > 1 else ''} of this file, before OpenDSS ran it (a .dss file "
        "may read any file, not write one, move OpenDSS's folders, run code or hide what it does from the scan):"
    )
    return "\n".join([head, *(f"  {line}" for line in describe_refused(refused, path.parent))])


def _is_warning(message: str) -> bool:
    """True for an OpenDSS warning (a duplicate ``New``, a very large conductor count, control
    iterations exceeded): the engine words them so."""
    return message.lower().startswith("warning")


def _read_past_warnings(ctx: Any, path: Path, scratch: Path, first: str) -> list[str]:
    """Read ``path`` into ``ctx`` reading on past every message, as OpenDSS does, then take the
    messages from the engine's error log: the warnings, ``first`` (the one that stopped the first
    reading, with its file and line) in place of the first of them.

    :raises FeederError: a message that is not a warning (the engine's error, without its line,
        which this reading does not know).
    """
    early = ctx.Error.EarlyAbort  # one setting of the engine's library, for every context
    ctx.Error.EarlyAbort = False
    try:
        ctx.Text.Command = f'redirect "{_engine_text(ctx, path)}"'
        log = scratch / "openg2g-messages.txt"
        ctx.Text.Command = f'export errorlog "{_engine_text(ctx, log)}"'
    finally:
        ctx.Error.EarlyAbort = early
    messages = [re.sub(r"^\(\d+\)\s*", "", m).strip() for m in log.read_text(errors="replace").splitlines()]
    messages = [" ".join(m.split()) for m in messages if m]
    errors = [m for m in messages if not _is_warning(m)]
    if errors:
        raise FeederError(f"{path}: OpenDSS: {errors[0]} (the file read on past the warning: {first})")
    return [first, *messages[1:]]


def _engine_message(exc: Exception) -> str:
    """The engine's error message without its number prefix and line breaks."""
    text = str(exc.args[1] if len(exc.args) > 1 else exc)
    return " ".join(text.split())


def _check_values(circuit: Any, path: Path) -> None:
    """Refuse values OpenDSS reads but that describe no network (it would solve a negative line
    length, or fail to converge on a NaN load without saying which): every problem, by element and
    property.

    :raises FeederError: the list of problems.
    """
    problems: list[str] = []

    def need(element: str, prop: str, value: float, ok: bool, what: str) -> None:
        if not (math.isfinite(value) and ok):
            problems.append(f"{element}: {prop}={value:g} ({what})")

    for name in _elements(circuit, "line"):
        circuit.Lines.Name = name
        length = float(circuit.Lines.Length)
        need(f"line.{name}", "length", length, length > 0, "must be > 0")
    for name in _elements(circuit, "load"):
        loads = circuit.Loads
        loads.Name = name
        element = f"load.{name}"
        kv, vmin, vmax = float(loads.kV), float(loads.Vminpu), float(loads.Vmaxpu)
        need(element, "kW", float(loads.kW), True, "must be a finite number")
        need(element, "kvar", float(loads.kvar), True, "must be a finite number")
        need(element, "kV", kv, kv > 0, "must be > 0")
        need(element, "Vminpu", vmin, 0 <= vmin < vmax, f"must be >= 0 and below Vmaxpu={vmax:g}")
    for name in _elements(circuit, "transformer"):
        tr = circuit.Transformers
        tr.Name = name
        resistive = False
        for w in range(1, tr.NumWindings + 1):
            tr.Wdg = w
            kv, kva = float(tr.kV), float(tr.kVA)
            need(f"transformer.{name}", f"winding {w} kV", kv, kv > 0, "must be > 0")
            need(f"transformer.{name}", f"winding {w} kVA", kva, kva > 0, "must be > 0")
            resistive = resistive or float(tr.R) != 0.0
        xhl = float(tr.Xhl)
        need(f"transformer.{name}", "XHL", xhl, resistive or xhl != 0.0, "zero impedance: XHL and every %R are 0")
    for name in _elements(circuit, "capacitor"):
        circuit.Capacitors.Name = name
        kv, kvar = float(circuit.Capacitors.kV), float(circuit.Capacitors.kvar)
        need(f"capacitor.{name}", "kV", kv, kv > 0, "must be > 0")
        need(f"capacitor.{name}", "kvar", kvar, kvar > 0, "must be > 0")
    for name in _elements(circuit, "generator"):
        circuit.Generators.Name = name
        if int(circuit.Generators.Model) == 3:  # what the voltage it holds takes (OpenDSS would not converge)
            element = f"generator.{name}"
            v_pu, lo, hi = (_float_prop(circuit, p) for p in ("Vpu", "Minkvar", "Maxkvar"))
            need(element, "Vpu", v_pu, v_pu > 0, "the voltage it holds must be > 0")
            need(element, "Minkvar", lo, math.isfinite(hi) and lo <= hi, f"must be at most Maxkvar={hi:g}")
    for name in _elements(circuit, "vsource"):
        circuit.Vsources.Name = name
        kv, pu = float(circuit.Vsources.BasekV), float(circuit.Vsources.pu)
        need(f"vsource.{name}", "basekV", kv, kv > 0, "must be > 0")
        need(f"vsource.{name}", "pu", pu, pu > 0, "must be > 0")
    if problems:
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise FeederError(f"{path}: values that describe no network: {'; '.join(problems[:8])}{more}")


def snapshot_mode(ctx: Any) -> None:
    """Put the engine in snapshot mode, unless it is in it already: OpenDSS's ``set mode`` resets
    every control (a capacitor to its state when its CapControl was defined, a switch to its
    normal state, forgetting the action it is to take), and the file's own state is what is read."""
    if int(ctx.ActiveCircuit.Solution.Mode) != _SNAPSHOT:
        ctx.Text.Command = "set mode=snapshot"


def _solve_snapshot(ctx: Any, path: Path) -> None:
    """Solve one snapshot with the controls held (taps and capacitor states as the file left them).

    :raises FeederError: OpenDSS does not solve the circuit.
    """
    from dss import DSSException

    circuit = ctx.ActiveCircuit
    try:
        snapshot_mode(ctx)
        ctx.Text.Command = "set controlmode=off"
        ctx.Text.Command = f"set maxiterations={_MAX_ITERATIONS}"
        circuit.Solution.Solve()
        if any(b.kVBase == 0.0 for b in _buses(circuit)):  # the file never ran CalcVoltageBases
            ctx.Text.Command = "CalcVoltageBases"
            circuit.Solution.Solve()
    except DSSException as exc:
        raise FeederError(f"{path}: OpenDSS cannot solve the circuit: {_engine_message(exc)}") from None
    if not circuit.Solution.Converged:
        raise FeederError(
            f"{path}: OpenDSS does not solve this circuit in snapshot mode (no convergence in "
            f"{_MAX_ITERATIONS} iterations), so openg2g cannot use it"
        )


def _bus_coordinates(ctx: Any, path: Path) -> None:
    """When the file gives no bus coordinates, let the engine read a coordinates file beside it
    (``*BusXY*.csv`` or ``BusCoords.dat``, as the IEEE feeders ship them)."""
    if any(b.Coorddefined for b in _buses(ctx.ActiveCircuit)):
        return
    for cand in sorted(path.parent.iterdir()):
        low = cand.name.lower()
        if ("busxy" in low and low.endswith(".csv")) or low == "buscoords.dat":
            ctx.Text.Command = f'BusCoords "{_engine_text(ctx, cand)}"'
            return


def _buses(circuit: Any) -> Iterator[Any]:
    for i in range(circuit.NumBuses):
        circuit.SetActiveBusi(i)
        yield circuit.ActiveBus


def _elements(circuit: Any, cls: str) -> Iterator[str]:
    """Names (without class) of the enabled elements of class ``cls``, each made active in turn."""
    prefix = cls + "."
    for full in circuit.AllElementNames:
        if full.lower().startswith(prefix):
            circuit.SetActiveElement(full)
            if circuit.ActiveCktElement.Enabled:
                yield full.split(".", 1)[1].lower()


def _prop(circuit: Any, name: str) -> str:
    """A property of the active element as the engine writes it."""
    return str(circuit.ActiveCktElement.Properties(name).Val)


def _float_prop(circuit: Any, name: str) -> float:
    text = _prop(circuit, name).strip().strip("[]()\"'")
    return float(text.split()[0].rstrip(",")) if text else 0.0


def _terminals(circuit: Any) -> list[tuple[str, tuple[int, ...]]]:
    """``(bus, node of each conductor)`` per terminal of the active element."""
    e = circuit.ActiveCktElement
    order = [int(n) for n in e.NodeOrder]
    n_cond = e.NumConductors
    buses = [b.split(".", 1)[0].lower() for b in e.BusNames]
    return [(bus, tuple(order[k * n_cond : (k + 1) * n_cond])) for k, bus in enumerate(buses)]


def _labels(nodes: tuple[int, ...]) -> tuple[str | None, ...]:
    return tuple(node_label(n) for n in nodes)


def _yprim(circuit: Any) -> np.ndarray:
    """The active element's primitive admittance (S), complex, conductors of all terminals."""
    y = np.asarray(circuit.ActiveCktElement.Yprim, dtype=float).view(complex)
    n = math.isqrt(y.size)
    return y.reshape(n, n)


# ----------------------------------------------------------------------------------- checks
class _Local:
    """The nodes one element touches, numbered locally, to compare its admittance with ``Yprim``."""

    def __init__(self, terminals: list[tuple[str, tuple[int, ...]]]) -> None:
        index: dict[tuple[str, str], int] = {}
        for bus, nodes in terminals:
            for n in nodes:
                label = node_label(n)
                if label is not None and (bus, label) not in index:
                    index[(bus, label)] = len(index)
        self.nodes = NodeIndex(tuple(f"{b}.{p}" for b, p in index), index, np.ones(len(index)))
        self.conductors = [
            index[(bus, label)] if (label := node_label(n)) is not None else -1 for bus, ns in terminals for n in ns
        ]

    def of_yprim(self, y: np.ndarray) -> np.ndarray:
        """``Yprim`` folded onto the local nodes (conductors on one node added, ground dropped)."""
        stamps = Stamps()
        stamps.add(self.conductors, y)
        return stamps.dense(len(self.nodes))

    def of(self, stamp: Callable[..., None], *element: Any) -> np.ndarray:
        """What ``stamp(stamps, *element, nodes)`` adds, on the local nodes."""
        stamps = Stamps()
        stamp(stamps, *element, self.nodes)
        return stamps.dense(len(self.nodes))


def _source_emf(v_pu: float, base_kv: float, angle_deg: float, n_phases: int, sequence: str) -> np.ndarray:
    """The voltage behind each phase of a ``Vsource`` (V), as OpenDSS makes it: of ``base_kv`` line
    to line (across the source for a one-phase one), the phases ``360 / n`` degrees apart, lagging
    in positive sequence, leading in negative, together in zero."""
    if n_phases == 3 and sequence.startswith("pos"):
        return v_pu * base_kv * 1000.0 / _SQRT3 * np.exp(1j * np.radians(angle_deg + np.array([0.0, -120.0, 120.0])))
    magnitude = v_pu * base_kv * 1000.0 / (1.0 if n_phases == 1 else 2.0 * math.sin(math.pi / n_phases))
    step = {"pos": -360.0, "neg": 360.0}.get(sequence[:3], 0.0) / n_phases
    return magnitude * np.exp(1j * np.radians(angle_deg + step * np.arange(n_phases)))


def _mismatch(ours: np.ndarray, engine: np.ndarray) -> float:
    """Largest entry of ``ours - engine`` relative to the largest of ``engine`` (0 for two zeros)."""
    scale = float(np.abs(engine).max(initial=0.0))
    return float(np.abs(ours - engine).max(initial=0.0)) / scale if scale > 0 else float(np.abs(ours).max(initial=0.0))


# ----------------------------------------------------------------------------------- refusals
class _Refused(Exception):
    """An element openg2g cannot model: the reading goes on to the next element, and every refusal
    is reported at the end (:func:`_refusal`)."""

    def __init__(self, element: str, why: str) -> None:
        super().__init__(f"{element}: {why}")
        self.element = element
        self.why = why


def _refusal(
    path: Path, refused: list[tuple[str, str]], definitions: dict[str, Definition] | None, before: bool = False
) -> FeederError:
    """The error that names every element of ``refused`` (``(class.name, why)``), each with the file
    and line that define it where ``definitions`` know them; ``before`` when the engine has not
    run the file."""
    when = " (found before OpenDSS ran the file, whose reading may show more)" if before else ""
    head = f"{path}: openg2g cannot model {len(refused)} element{'s' if len(refused) > 1 else ''} of this circuit{when}"
    known = definitions or {}
    order = {element: k for k, element in enumerate(known)}  # the order the files define them in
    refused = sorted(refused, key=lambda r: order.get(r[0], len(order)))
    lines = []
    for element, why in refused[:_REFUSALS_SHOWN]:
        where = known.get(element)
        at = f"{shown(where.file, path.parent)} line {where.line}: " if where is not None else ""
        lines.append(f"  {at}{element}: {why}")
    if len(refused) > _REFUSALS_SHOWN:
        lines.append(f"  ... and {len(refused) - _REFUSALS_SHOWN} more")
    return FeederError("\n".join([f"{head}; disable them (enabled=no) or remove them:", *lines]))


def _load_model_refusal(model: int) -> str | None:
    """Why a load of ``model`` is refused, None when openg2g solves it."""
    if model in _LOAD_MODELS:
        return None
    return f"load model {model} is not supported ({', '.join(map(str, _LOAD_MODELS))} are)"


def _generator_model_refusal(model: int) -> str | None:
    """Why a generator of ``model`` is refused, None when openg2g solves it."""
    if model not in _GENERATOR_MODELS:
        return None
    return f"{_GENERATOR_MODELS[model]} is not supported (models 1, 2 and 3 are)"


def _inverter_refusal(model: int, balanced: bool, limited: bool, grid_forming: bool) -> str | None:
    """Why a PV system or storage element is refused (its model, its current from the positive
    sequence, its current limit, grid forming), None when openg2g solves it."""
    if model not in (1, 2):
        return f"model {model} is not supported (1, constant kW and kvar, and 2, constant impedance, are)"
    if balanced:
        return "Balanced=Yes (its current from the positive sequence of its voltages) is not supported"
    if limited:
        return "LimitCurrent=Yes (its current limited) is not supported"
    if grid_forming:
        return "grid-forming control (ControlMode=GFM) is not supported"
    return None


def _user_model_refusal(prop: str, value: str) -> str:
    return f"a user-written model ({prop}={value}), code openg2g does not run"


_PROPERTY = re.compile(r"(\w+)\s*=\s*(\"[^\"]*\"|'[^']*'|\([^)]*\)|\[[^\]]*\]|\S+)")
"""A ``name=value`` property of a command (its value quoted, bracketed or a word)."""


def _yes(value: str | None) -> bool:
    return value is not None and value.strip("\"'").lower()[:1] in ("y", "t")


def _refused_before_reading(definitions: dict[str, Definition]) -> list[tuple[str, str]]:
    """The elements the files define that openg2g refuses whatever the engine makes of them: of a
    class it cannot model, running a user-written model, or of a model or mode it does not solve,
    given as a ``name=value`` of the element's own ``New`` (not through ``like=``); only settled
    ones (nothing later in the files may change them)."""
    out = []
    for element, d in definitions.items():
        if not d.settled:
            continue
        cls = element.split(".", 1)[0]
        props = dict(_PROPERTY.findall(d.properties))  # the last value of a property wins, as in OpenDSS
        if cls in REFUSED_CLASSES:
            out.append((element, REFUSED_CLASSES[cls]))
            continue
        if "like" in props:
            continue
        why: str | None = None
        user = next(((k, props[k]) for k in ("usermodel", "dynadll") if props.get(k, "").strip("\"'")), None)
        model = props.get("model", "")
        number = int(model) if model.isdigit() else None
        if cls in _USER_MODEL_CLASSES and user is not None:
            why = _user_model_refusal(*user)
        elif cls == "load" and number is not None:
            why = _load_model_refusal(number)
        elif cls == "generator" and number is not None:
            why = _generator_model_refusal(number)
        elif cls in ("pvsystem", "storage"):
            gfm = cls == "storage" and props.get("controlmode", "").lower() == "gfm"
            why = _inverter_refusal(
                1 if number is None else number, _yes(props.get("balanced")), _yes(props.get("limitcurrent")), gfm
            )
        if why is not None:
            out.append((element, why))
    return out


# ----------------------------------------------------------------------------------- reader
class _Reader:
    """Takes the model out of a compiled, solved circuit (see the module docstring)."""

    def __init__(self, ctx: Any, path: Path, definitions: dict[str, Definition]) -> None:
        self.ctx = ctx
        self.circuit = ctx.ActiveCircuit
        self.path = path
        self.definitions = definitions
        self.frequency_hz = float(self.circuit.Solution.Frequency)
        self.primitives: list[PrimitiveModel] = []
        self.refused: list[tuple[str, str]] = []
        """``(element, why)`` of every element refused so far."""
        self.node_names: list[list[str]] | None = None
        """``[bus, node]`` of every node of the circuit in the engine's numbering (read once, when needed)."""

    def refuse(self, element: str, why: str) -> _Refused:
        """The refusal of ``element`` (raised inside :meth:`reading`)."""
        return _Refused(element, why)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Read one element: a refusal is noted and the reading goes on with the next one."""
        try:
            yield
        except _Refused as refusal:
            self.refused.append((refusal.element, refusal.why))

    def report(self) -> FeederError | None:
        """Every refusal so far as one error (:func:`_refusal`), None when there is none."""
        if not self.refused:
            return None
        return _refusal(self.path, self.refused, self.definitions)

    def check(self, element: str, local: _Local, ours: np.ndarray, what: str) -> None:
        """Refuse ``element`` when ``ours`` is not the engine's ``Yprim`` (folded on ``local``)."""
        err = _mismatch(ours, local.of_yprim(_yprim(self.circuit)))
        if err > YPRIM_RTOL:
            raise self.refuse(element, f"its {what} differs from OpenDSS's by {err:.1e} (relative): not read")

    def static(
        self,
        element: str,
        norm_amps: list[float] | None = None,
        emerg_amps: list[float] | None = None,
        i_source: np.ndarray | None = None,
    ) -> None:
        """Keep the active element as a static element by its ``Yprim``."""
        y = _yprim(self.circuit)
        terms = self.conductor_terminals()
        self.primitives.append(
            PrimitiveModel(
                name=element,
                terminals=terms,
                g_s=y.real.tolist(),
                b_s=y.imag.tolist(),
                i_source_a=None if i_source is None else np.column_stack([i_source.real, i_source.imag]).tolist(),
                norm_amps=norm_amps,
                emerg_amps=emerg_amps,
            )
        )

    def conductor_terminals(self) -> list[tuple[str, tuple[str | None, ...]]]:
        """``(bus, node label of each conductor)`` of the active element, terminal by terminal, a
        terminal split where its conductors change bus: an autotransformer's first terminal holds
        its series winding's two ends, on both buses (the engine's ``NodeRef``; a grounded
        conductor stays with the bus before it)."""
        if self.node_names is None:
            self.node_names = [n.lower().rsplit(".", 1) for n in self.circuit.YNodeOrder]
        refs = [int(r) for r in self.circuit.ActiveCktElement.NodeRef]
        out: list[tuple[str, tuple[str | None, ...]]] = []
        k = 0
        for bus, nodes in _terminals(self.circuit):
            run_bus, run = bus, list[str | None]()
            for node, ref in zip(nodes, refs[k : k + len(nodes)]):
                on = self.node_names[ref - 1][0] if ref > 0 else run_bus
                if on != run_bus and run:
                    out.append((run_bus, tuple(run)))
                    run = []
                run_bus = on
                run.append(node_label(node))
            out.append((run_bus, tuple(run)))
            k += len(nodes)
        return out

    # -- buses ---------------------------------------------------------------------------
    def buses(self) -> tuple[dict[str, float], dict[str, tuple[str, ...]], dict[str, tuple[float, float]]]:
        bus_kv: dict[str, float] = {}
        bus_nodes: dict[str, tuple[str, ...]] = {}
        coords: dict[str, tuple[float, float]] = {}
        for bus in _buses(self.circuit):
            name = bus.Name.lower()
            if bus.kVBase <= 0:
                raise self.refuse(f"bus {name}", "no voltage base (give Set VoltageBases=[...] and CalcVoltageBases)")
            bus_kv[name] = float(bus.kVBase) * _SQRT3
            nodes = sorted(int(n) for n in bus.Nodes)
            if nodes and nodes[0] < 0:
                raise self.refuse(f"bus {name}", f"node number {nodes[0]} is out of range")
            labels = [node_label(n) for n in nodes]
            bus_nodes[name] = tuple(lb for lb in labels if lb is not None)
            if bus.Coorddefined:
                coords[name] = (float(bus.x), float(bus.y))
        return bus_kv, bus_nodes, coords

    # -- sources -------------------------------------------------------------------------
    def sources(self) -> SourceModel:
        main: SourceModel | None = None
        for name in _elements(self.circuit, "vsource"):
            self.circuit.Vsources.Name = name
            with self.reading():
                source = self.source(f"vsource.{name}", main is None)
                if source is not None:
                    main = source
        if main is None:
            raise self.report() or FeederError(
                f"{self.path}: no voltage source grounded at its second terminal, three-phase on nodes 1.2.3 "
                "(positive sequence) or single-phase"
            )
        return main

    def source(self, element: str, first: bool) -> SourceModel | None:
        """The active ``Vsource`` as the circuit's source, when it is the first that can be one
        (grounded at its second terminal; three-phase on nodes 1.2.3 in positive sequence, or
        single-phase), else None, kept as a static element with its Norton current."""
        vs = self.circuit.Vsources
        (bus1, nodes1), (_, nodes2) = _terminals(self.circuit)
        n = int(vs.Phases)
        y = _yprim(self.circuit)
        y_src = y[:n, :n]
        sequence = _prop(self.circuit, "Sequence").strip().lower()
        e = _source_emf(float(vs.pu), float(vs.BasekV), float(vs.AngleDeg), n, sequence)
        three = n == 3 and nodes1 == (1, 2, 3) and sequence.startswith("pos")
        single = n == 1 and nodes1[0] in (1, 2, 3)
        if not (first and not any(nodes2) and (three or single)):
            self.static(element, i_source=np.concatenate([y_src @ e, -(y_src @ e)]))
            return None
        if single:  # its impedance is what the engine makes of its sequence values: Yprim's
            z = complex(1.0 / y_src[0, 0])
            z1_ohm = z0_ohm = [z.real, z.imag]
            z2_ohm = None
        else:
            z_seq = np.linalg.inv(FORTESCUE) @ np.linalg.inv(y_src) @ FORTESCUE
            z0, z1, z2 = (complex(z_seq[k, k]) for k in range(3))
            z1_ohm, z0_ohm = [z1.real, z1.imag], [z0.real, z0.imag]
            z2_ohm = None if abs(z2 - z1) <= 1e-12 * abs(z1) else [z2.real, z2.imag]
        source = SourceModel(
            bus=bus1,
            base_kv=float(vs.BasekV),
            v_pu=float(vs.pu),
            angle_deg=float(vs.AngleDeg),
            z1_ohm=z1_ohm,
            z0_ohm=z0_ohm,
            z2_ohm=z2_ohm,
            phase=node_label(nodes1[0]) if single else None,
        )
        err = _mismatch(source_admittance(FeederModel(name="", source=source, bus_kv={}, bus_phases={})), y_src)
        if err > YPRIM_RTOL:
            raise self.refuse(element, f"its impedance is not symmetrical in the sequences ({err:.1e}): not read")
        return source

    # -- lines ---------------------------------------------------------------------------
    def lines(self) -> list[LineModel]:
        out: list[LineModel] = []
        lines = self.circuit.Lines
        i = lines.First
        while i:
            with self.reading():
                out.append(self.line())
            i = lines.Next
        return out

    def line(self) -> LineModel:
        """The active line."""
        lines = self.circuit.Lines
        w = 2 * math.pi * self.frequency_hz
        name = lines.Name.lower()
        element = f"line.{name}"
        e = self.circuit.ActiveCktElement
        (bus1, nodes1), (bus2, nodes2) = _terminals(self.circuit)
        n = e.NumConductors
        opened = [e.IsOpen(t, 0) for t in (1, 2)]
        partly = [any(e.IsOpen(t, k) for k in range(1, n + 1)) for t in (1, 2)]
        if partly != opened:
            raise self.refuse(element, "some of its conductors are open and others not (only a whole terminal opens)")
        length = float(lines.Length)
        r = np.asarray(lines.Rmatrix, dtype=float).reshape(n, n) * length
        if n and np.linalg.eigvalsh(r).min() < -_PASSIVE_RTOL * np.abs(r).max():
            raise self.refuse(
                element,
                "its resistance matrix has a negative eigenvalue (a negative sequence resistance): it describes no network",
            )
        x = np.asarray(lines.Xmatrix, dtype=float).reshape(n, n) * length
        b_us = w * np.asarray(lines.Cmatrix, dtype=float).reshape(n, n) * 1e-3 * length
        norm, emerg = float(lines.NormAmps), float(lines.EmergAmps)
        units = int(lines.Units)
        line = LineModel(
            name=name,
            bus1=bus1,
            bus2=bus2,
            phases1=tuple(self.phase_labels(element, nodes1)),
            phases2=tuple(self.phase_labels(element, nodes2)),
            r_ohm=r.tolist(),
            x_ohm=x.tolist(),
            b_us=b_us.tolist(),
            length_km=length * _UNIT_M.get(units, math.nan) / 1000.0,
            switch=bool(lines.IsSwitch),
            in_service=bool(e.Enabled) and not any(opened),
            norm_amps=None if norm == DEFAULT_NORM_AMPS or norm <= 0 else norm,
            emerg_amps=None if emerg == DEFAULT_EMERG_AMPS or emerg <= 0 else emerg,
            length_unitless=length if units == 0 else None,
        )
        if line.in_service:
            local = _Local(_terminals(self.circuit))
            self.check(element, local, local.of(stamp_line, line), "series impedance")
        return line

    def phase_labels(self, element: str, nodes: tuple[int, ...]) -> list[str]:
        """Labels of conductors that must not be grounded."""
        if 0 in nodes:
            raise self.refuse(element, f"a conductor on node 0 (ground) in {nodes}: not read")
        return [str(node_label(n)) for n in nodes]

    # -- transformers ----------------------------------------------------------------------
    def transformers(self, regulated: set[str]) -> list[TransformerModel]:
        out: list[TransformerModel] = []
        tr = self.circuit.Transformers
        for name in _elements(self.circuit, "transformer"):
            with self.reading():
                tr.Name = name
                element = f"transformer.{name}"
                typed = self.two_winding(name)
                if typed is not None:
                    local = _Local(_terminals(self.circuit))
                    taps = np.full(typed.n_phases, typed.windings[1].tap)
                    ours = local.of(stamp_transformer, typed, taps)
                    if _mismatch(ours, local.of_yprim(_yprim(self.circuit))) <= YPRIM_RTOL:
                        out.append(typed)
                        continue
                if name in regulated:
                    raise self.refuse(
                        element,
                        "it has a regulator control, but it is not a two-winding transformer whose admittance openg2g "
                        "computes at every tap (a magnetizing branch, a neutral impedance, more windings...)",
                    )
                self.static(element, *self.transformer_ratings())
        return out

    def two_winding(self, name: str) -> TransformerModel | None:
        """The active transformer as a two-winding model, or None when it is not of that shape."""
        tr = self.circuit.Transformers
        e = self.circuit.ActiveCktElement
        n_ph = e.NumPhases
        if tr.NumWindings != 2 or n_ph not in (1, 3):
            return None
        windings = []
        for w, (bus, nodes) in enumerate(_terminals(self.circuit), start=1):
            tr.Wdg = w
            # a one-phase delta winding spans its two conductors (phase k minus phase k-1, k = 0)
            phase_nodes = nodes[: 2 if tr.IsDelta and n_ph == 1 else n_ph]
            neutral = 0 if tr.IsDelta else nodes[n_ph]
            if 0 in phase_nodes:
                return None
            windings.append(
                WindingModel(
                    bus=bus,
                    phases=tuple(str(node_label(n)) for n in phase_nodes),
                    conn="delta" if tr.IsDelta else "wye",
                    kv=float(tr.kV),
                    kva=float(tr.kVA),
                    r_pct=float(tr.R),
                    tap=float(tr.Tap),
                    neutral=node_label(neutral),
                    rneut_ohm=float(tr.Rneut),
                    xneut_ohm=float(tr.Xneut),
                )
            )
        tr.Wdg = 2
        kva = windings[0].kva
        norm, emerg = _float_prop(self.circuit, "NormHkVA"), _float_prop(self.circuit, "EmergHkVA")
        return TransformerModel(
            name=name,
            n_phases=n_ph,
            windings=windings,
            x_pct=float(tr.Xhl),
            ppm_antifloat=_float_prop(self.circuit, "ppm_Antifloat"),
            bank=_prop(self.circuit, "Bank").strip().lower() or None,
            min_tap_pu=float(tr.MinTap),
            max_tap_pu=float(tr.MaxTap),
            num_taps=int(tr.NumTaps),
            norm_kva=None if math.isclose(norm, 1.1 * kva) else norm,
            emerg_kva=None if math.isclose(emerg, DEFAULT_EMERG_KVA_FACTOR * kva) else emerg,
            noloadloss_pct=_float_prop(self.circuit, "%NoLoadLoss"),
            imag_pct=_float_prop(self.circuit, "%IMag"),
        )

    def transformer_ratings(self) -> tuple[list[float], list[float]]:
        """Rated and emergency current of each winding (A per conductor) of the active transformer,
        at its ``NormHkVA``/``EmergHkVA`` shared by the windings in proportion of their kVA."""
        tr = self.circuit.Transformers
        n_ph = self.circuit.ActiveCktElement.NumPhases
        tr.Wdg = 1
        kva1 = float(tr.kVA)
        norm_kva, emerg_kva = _float_prop(self.circuit, "NormHkVA"), _float_prop(self.circuit, "EmergHkVA")
        norm, emerg = [], []
        for w in range(1, tr.NumWindings + 1):
            tr.Wdg = w
            v_phase_kv = tr.kV / _SQRT3 if n_ph == 3 else tr.kV
            share = tr.kVA / kva1
            norm.append(norm_kva * share / n_ph / v_phase_kv)
            emerg.append(emerg_kva * share / n_ph / v_phase_kv)
        return norm, emerg

    # -- controls ----------------------------------------------------------------------------
    def regcontrols(self) -> list[RegControlModel]:
        out: list[RegControlModel] = []
        rc = self.circuit.RegControls
        for name in _elements(self.circuit, "regcontrol"):
            with self.reading():
                rc.Name = name
                element = f"regcontrol.{name}"
                if rc.Winding != 2 or rc.TapWinding != 2:
                    raise self.refuse(
                        element,
                        f"it watches winding {rc.Winding} and taps winding {rc.TapWinding}; openg2g regulates winding 2 "
                        "from winding 2",
                    )
                ptphase = _prop(self.circuit, "PTphase").strip().lower()
                if ptphase not in ("1", "2", "3", "max", "min"):
                    raise self.refuse(element, f"PTphase={ptphase} (1, 2, 3, MAX or MIN)")
                for prop in ("Cogen", "RevNeutral"):  # modes of the control the model has no place for
                    if _prop(self.circuit, prop).strip().lower() in ("yes", "true"):
                        raise self.refuse(element, f"{prop}=Yes is not supported")
                for prop in ("LDC_Z", "Rev_Z"):  # Beckwith's magnitude-only line-drop compensation
                    if _float_prop(self.circuit, prop) != 0.0:
                        raise self.refuse(element, f"{prop} (Beckwith line-drop compensation) is not supported")
                remote = rc.MonitoredBus.strip().lower()
                remote_bus, _, remote_node = remote.partition(".")
                remote_ptratio = _float_prop(self.circuit, "RemotePTRatio")
                out.append(
                    RegControlModel(
                        name=name,
                        transformer=rc.Transformer.lower(),
                        winding=2,
                        vreg_v=float(rc.ForwardVreg),
                        band_v=float(rc.ForwardBand),
                        ptratio=float(rc.PTratio),
                        ctprim_a=float(rc.CTPrimary),
                        r_v=float(rc.ForwardR),
                        x_v=float(rc.ForwardX),
                        delay_s=float(rc.Delay),
                        ptphase=int(ptphase) if ptphase.isdigit() else ptphase,
                        tapdelay_s=float(rc.TapDelay),
                        maxtapchange=int(rc.MaxTapChange),
                        reversible=bool(rc.IsReversible),
                        revvreg_v=float(rc.ReverseVreg),
                        revband_v=float(rc.ReverseBand),
                        revr_v=float(rc.ReverseR),
                        revx_v=float(rc.ReverseX),
                        revthreshold_kw=_float_prop(self.circuit, "revThreshold"),
                        revdelay_s=_float_prop(self.circuit, "revDelay"),
                        vlimit_v=float(rc.VoltageLimit),
                        monitored_bus=remote_bus or None,
                        monitored_node=str(node_label(int(remote_node.split(".")[0] or "1"))),
                        inverse_time=bool(rc.IsInverseTime),
                        remote_ptratio=remote_ptratio if remote_bus and remote_ptratio != rc.PTratio else None,
                    )
                )
        return out

    def capacitors(self, controlled: set[str]) -> list[CapacitorModel]:
        out: list[CapacitorModel] = []
        caps = self.circuit.Capacitors
        for name in _elements(self.circuit, "capacitor"):
            with self.reading():
                caps.Name = name
                element = f"capacitor.{name}"
                (bus1, nodes1), (bus2, nodes2) = _terminals(self.circuit)
                delta = bool(caps.IsDelta)
                shunt = bus2 == bus1 and (delta or len(set(nodes2)) == 1)
                if caps.NumSteps != 1 or not shunt or 0 in nodes1:
                    if name in controlled:
                        raise self.refuse(element, "it has a capacitor control, but it is not a one-step shunt bank")
                    self.static(element)
                    continue
                states = list(caps.States)
                opened = bool(self.circuit.ActiveCktElement.IsOpen(1, 0))  # as a CapControl's own solve leaves it
                cap = CapacitorModel(
                    name=name,
                    bus=bus1,
                    phases=tuple(str(node_label(n)) for n in nodes1),
                    conn="delta" if delta else "wye",
                    kvar=float(caps.kvar),
                    kv=float(caps.kV),
                    closed=bool(states[0]) and not opened,
                    neutral=None if delta else node_label(nodes2[0]),
                )
                local = _Local(_terminals(self.circuit))
                if not cap.closed:  # the admittance is compared closed: close it, rebuild its Yprim
                    caps.States = [1]
                    if opened:
                        self.circuit.ActiveCktElement.Close(1, 0)
                    self.circuit.Solution.BuildYMatrix(_WHOLE_MATRIX, False)
                    self.circuit.SetActiveElement(element)
                try:
                    self.check(element, local, local.of(stamp_capacitor, cap), "admittance")
                finally:
                    if not cap.closed:
                        caps.States = states
                        if opened:
                            self.circuit.ActiveCktElement.Open(1, 0)
                        self.circuit.Solution.BuildYMatrix(_WHOLE_MATRIX, False)
                out.append(cap)
        return out

    def capcontrols(self) -> list[CapControlModel]:
        out: list[CapControlModel] = []
        cc = self.circuit.CapControls
        kinds = {0: "current", 1: "voltage", 2: "kvar", 4: "pf"}
        for name in _elements(self.circuit, "capcontrol"):
            with self.reading():
                cc.Name = name
                element = f"capcontrol.{name}"
                mode = int(cc.Mode)
                if mode not in kinds:
                    raise self.refuse(
                        element,
                        f"control type {_prop(self.circuit, 'type')} is not supported (current, voltage, kvar, pf are)",
                    )
                if _prop(self.circuit, "VBus").strip():
                    raise self.refuse(element, "VBus (a voltage override watching another bus) is not supported")
                out.append(
                    CapControlModel(
                        name=name,
                        capacitor=cc.Capacitor.lower(),
                        kind=kinds[mode],
                        element=cc.MonitoredObj.lower(),
                        terminal=int(cc.MonitoredTerm),
                        on_setting=float(cc.ONSetting),
                        off_setting=float(cc.OFFSetting),
                        delay_s=float(cc.Delay),
                        delayoff_s=float(cc.DelayOff),
                        deadtime_s=float(cc.DeadTime),
                        voltoverride=bool(cc.UseVoltOverride),
                        vmin_v=float(cc.Vmin),
                        vmax_v=float(cc.Vmax),
                        ptratio=float(cc.PTratio),
                        ctratio=float(cc.CTratio),
                        ptphase=self.phase_setting(element, "PTPhase"),
                        ctphase=self.phase_setting(element, "CTPhase"),
                        pctminkvar=_float_prop(self.circuit, "pctMinkvar"),
                    )
                )
        return out

    def swtcontrols(self) -> list[SwtControlModel]:
        out: list[SwtControlModel] = []
        sc = self.circuit.SwtControls
        for name in _elements(self.circuit, "swtcontrol"):
            with self.reading():
                sc.Name = name
                element, terminal = str(sc.SwitchedObj).lower(), int(sc.SwitchedTerm)
                action, state, normal = int(sc.Action), int(sc.State), int(sc.NormalState)
                if action not in _SWITCH_ACTIONS or state not in _SWITCH_STATES:
                    raise self.refuse(f"swtcontrol.{name}", f"action code {action}, state code {state} (open or close)")
                if element.startswith("line."):
                    self.circuit.SetActiveElement(element)
                    e = self.circuit.ActiveCktElement
                    if any(e.IsOpen(t, 0) for t in range(1, e.NumTerminals + 1) if t != terminal):
                        raise self.refuse(
                            f"swtcontrol.{name}",
                            f"it switches terminal {terminal} of {element}, which the file opens at another terminal",
                        )
                out.append(
                    SwtControlModel(
                        name=name,
                        element=element,
                        terminal=terminal,
                        action=_SWITCH_ACTIONS[action],
                        state=_SWITCH_STATES[state],
                        normal=_SWITCH_STATES.get(normal),
                        locked=bool(sc.IsLocked),
                        delay_s=float(sc.Delay),
                    )
                )
        return out

    def phase_setting(self, element: str, prop: str) -> int | str:
        value = _prop(self.circuit, prop).strip().lower()
        if value in ("1", "2", "3"):
            return int(value)
        if value in ("avg", "max", "min"):
            return value
        raise self.refuse(element, f"{prop}={value} (1, 2, 3, AVG, MAX or MIN)")

    # -- loads and generation ----------------------------------------------------------------
    def loads(self) -> list[LoadModel]:
        out: list[LoadModel] = []
        loads = self.circuit.Loads
        mult = float(self.circuit.Solution.LoadMult)
        for name in _elements(self.circuit, "load"):
            with self.reading():
                loads.Name = name
                element = f"load.{name}"
                model = int(loads.Model)
                why = _load_model_refusal(model)
                if why is not None:
                    raise self.refuse(element, why)
                phases, neutral, n_ph, delta = self.load_connection(element)
                fixed = int(loads.Status) != _LOAD_VARIABLE
                scale = 1.0 if fixed else mult
                out.append(
                    LoadModel(
                        name=name,
                        bus=_terminals(self.circuit)[0][0],
                        phases=phases,
                        conn="delta" if delta else "wye",
                        model=model,
                        kv=float(loads.kV),
                        kw=float(loads.kW) * scale,
                        kvar=float(loads.kvar) * scale,
                        n_phases=n_ph,
                        vminpu=float(loads.Vminpu),
                        vmaxpu=float(loads.Vmaxpu),
                        vlowpu=_float_prop(self.circuit, "VLowpu"),
                        cvrwatts=float(loads.CVRwatts),
                        cvrvars=float(loads.CVRvars),
                        neutral=neutral,
                        fixed=fixed,
                    )
                )
        return out

    def load_connection(self, element: str) -> tuple[tuple[str | None, ...], str | None, int, bool]:
        """Conductor nodes, neutral, phase count and delta flag of the active load-like element."""
        e = self.circuit.ActiveCktElement
        n_ph = int(e.NumPhases)
        ((_, nodes),) = _terminals(self.circuit)
        delta = "delta" in _prop(self.circuit, "conn").lower() or _prop(self.circuit, "conn").lower() in ("d", "ll")
        if delta:
            return _labels(nodes[: max(n_ph, 2) if n_ph < 3 else 3]), None, n_ph, True
        if 0 in nodes[:n_ph]:
            raise self.refuse(element, f"a phase conductor on node 0 (ground) in {nodes}: not read")
        return _labels(nodes[:n_ph]), node_label(nodes[n_ph]) if len(nodes) > n_ph else None, n_ph, False

    def generators(self) -> tuple[list[GeneratorModel], list[RegulatedGeneratorModel]]:
        """The generation of the file (see the module docstring): the generators, PV systems and
        storage elements at their snapshot output, and the generators that hold their voltage."""
        out: list[GeneratorModel] = []
        regulated: list[RegulatedGeneratorModel] = []
        gens = self.circuit.Generators
        for name in _elements(self.circuit, "generator"):
            gens.Name = name
            element = f"generator.{name}"
            with self.reading():
                self.no_user_model(element)
                model = int(gens.Model)
                why = _generator_model_refusal(model)
                if why is not None:
                    raise self.refuse(element, why)
                if model == 3:
                    regulated.append(self.regulated_generator(element))
                    continue
                band = (float(gens.Vminpu), float(gens.Vmaxpu)) if model == 1 else _CONSTANT_IMPEDANCE
                out.append(self.generator(element, float(gens.kW), float(gens.kvar), float(gens.kV), *band))
        pvs = self.circuit.PVSystems
        for name in _elements(self.circuit, "pvsystem"):
            pvs.Name = name
            element = f"pvsystem.{name}"
            with self.reading():
                band = self.inverter_band(element)
                out.append(
                    self.generator(element, float(pvs.kW), float(pvs.kvar), _float_prop(self.circuit, "kV"), *band)
                )
        for name in _elements(self.circuit, "storage"):
            element = f"storage.{name}"
            with self.reading():
                band = self.inverter_band(
                    element, grid_forming=_prop(self.circuit, "ControlMode").strip().lower() == "gfm"
                )
                kw, kvar = _float_prop(self.circuit, "kW"), _float_prop(self.circuit, "kvar")  # what it delivers now
                out.append(self.generator(element, kw, kvar, _float_prop(self.circuit, "kV"), *band))
        return out, regulated

    def no_user_model(self, element: str) -> None:
        """Refuse the active element when it runs a user-written model."""
        for prop in ("UserModel", "DynaDLL"):
            if prop in self.circuit.ActiveCktElement.AllPropertyNames:
                value = _prop(self.circuit, prop).strip()
                if value:
                    raise self.refuse(element, _user_model_refusal(prop, value))

    def inverter_band(self, element: str, grid_forming: bool = False) -> tuple[float, float]:
        """``(vminpu, vmaxpu)`` of the active PV system or storage element (model 1; model 2, constant
        impedance, as :data:`_CONSTANT_IMPEDANCE`), refused when its model has more to it
        (:func:`_inverter_refusal`)."""
        self.no_user_model(element)
        model = int(_float_prop(self.circuit, "Model"))
        balanced, limited = (_yes(_prop(self.circuit, prop)) for prop in ("Balanced", "LimitCurrent"))
        why = _inverter_refusal(model, balanced, limited, grid_forming)
        if why is not None:
            raise self.refuse(element, why)
        if model == 2:
            return _CONSTANT_IMPEDANCE
        return _float_prop(self.circuit, "VMinpu"), _float_prop(self.circuit, "VMaxpu")

    def generator(
        self, element: str, kw: float, kvar: float, kv: float, vminpu: float, vmaxpu: float
    ) -> GeneratorModel:
        phases, neutral, n_ph, delta = self.load_connection(element)
        return GeneratorModel(
            name=element,
            bus=_terminals(self.circuit)[0][0],
            phases=phases,
            conn="delta" if delta else "wye",
            kv=kv,
            kw=kw,
            kvar=kvar,
            n_phases=n_ph,
            vminpu=vminpu,
            vmaxpu=vmaxpu,
            neutral=neutral,
        )

    def regulated_generator(self, element: str) -> RegulatedGeneratorModel:
        """The active generator of model 3 (constant kW, holding its voltage within its kvar limits)."""
        gens = self.circuit.Generators
        phases, neutral, n_ph, delta = self.load_connection(element)
        return RegulatedGeneratorModel(
            name=element,
            bus=_terminals(self.circuit)[0][0],
            phases=phases,
            conn="delta" if delta else "wye",
            kv=float(gens.kV),
            kw=float(gens.kW),
            n_phases=n_ph,
            v_pu=_float_prop(self.circuit, "Vpu"),
            kvar_min=_float_prop(self.circuit, "Minkvar"),
            kvar_max=_float_prop(self.circuit, "Maxkvar"),
            kvar=float(gens.kvar),
            neutral=neutral,
        )

    def others(self, read: set[str]) -> None:
        """Keep the classes of :data:`_STATIC_CLASSES` as static elements; refuse any other class
        that changes a snapshot."""
        for full in self.circuit.AllElementNames:
            cls, name = full.lower().split(".", 1)
            if cls in read or cls in _NOT_ELECTRICAL:
                continue
            self.circuit.SetActiveElement(full)
            if not self.circuit.ActiveCktElement.Enabled:
                continue
            element = f"{cls}.{name}"
            with self.reading():
                if cls == "isource":  # a current source: no admittance, its current into the network
                    current = np.asarray(self.circuit.ActiveCktElement.Currents, dtype=float).view(complex)
                    self.static(element, i_source=-current)
                elif cls in _STATIC_CLASSES:
                    self.static(element)
                else:
                    raise self.refuse(element, REFUSED_CLASSES.get(cls, "an element openg2g does not model"))


def _bank_names(transformers: list[TransformerModel], controlled: set[str]) -> None:
    """Give every regulator (a transformer with a RegControl) a bank: its ``bank=`` or, when the
    file names none, the group of regulators between the same two buses, named after the first
    (lower case, a trailing phase letter after a digit dropped: ``Reg1`` -> ``reg1``, ``reg1a``
    -> ``reg1``); a transformer without a control has none."""
    groups: dict[tuple[str, str], str] = {}
    for t in transformers:
        if t.name not in controlled:
            t.bank = None
            continue
        if t.bank is not None:
            continue
        key = (t.windings[0].bus, t.windings[1].bus)
        if key not in groups:
            groups[key] = re.sub(r"(?<=\d)[abc]$", "", t.name)
        t.bank = groups[key]


def _bus_order(
    source: str,
    lines: list[LineModel],
    transformers: list[TransformerModel],
    primitives: list[PrimitiveModel],
    buses: dict[str, float],
) -> list[str]:
    """Buses in the order a depth-first walk from the source finds them through lines, then
    transformers, then static elements (each in file order), the buses it does not reach after,
    in the engine's order. The node numbering follows it, so a feeder numbers its nodes the same
    way whatever order its file defines them in."""
    adj: dict[str, list[str]] = {}

    def link(a: str, b: str) -> None:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)

    for ln in lines:
        link(ln.bus1, ln.bus2)
    for t in transformers:
        link(t.windings[0].bus, t.windings[1].bus)
    for prim in primitives:
        for bus, _ in prim.terminals[1:]:
            link(prim.terminals[0][0], bus)
    seen = {source: None}
    stack = [source]
    while stack:
        for nb in adj.get(stack.pop(), []):
            if nb not in seen:
                seen[nb] = None
                stack.append(nb)
    return [*seen, *(b for b in buses if b not in seen)]


def _read(path: Path, name: str | None) -> dict[str, Any]:
    """:func:`read_opendss` in this process (what its worker process runs): ``{"model": the model as
    a dict, "warnings": OpenDSS's warnings}``.

    :raises FeederError: as :func:`read_opendss`.
    """
    from dss import DSSException

    found = scan(path)
    refused = _refused_before_reading(found.definitions)
    if refused or found.refused:
        raise _before_reading(path, refused, found)
    warnings: list[str] = []
    try:
        model = _read_circuit(path, name, warnings, found)
    except DSSException as exc:
        raise FeederError(f"{path}: OpenDSS: {_engine_message(exc)}") from None
    return {"model": model.to_dict(), "warnings": warnings}


def _before_reading(path: Path, elements: list[tuple[str, str]], found: Scan) -> FeederError:
    """The refusal of what the scan refuses before the engine runs: the elements openg2g cannot
    model (:func:`_refusal`), then the commands, but those on an element's line already named."""
    if not elements:
        return FeederError(_commands_refusal(path, found.refused))
    named = {(d.file, d.line) for element, d in found.definitions.items() if element in dict(elements)}
    commands = [r for r in found.refused if (r.file, r.line) not in named]
    text = str(_refusal(path, elements, found.definitions, before=True))
    return FeederError("\n".join([text, _commands_refusal(path, commands)]) if commands else text)


def _read_circuit(path: Path, name: str | None, warnings: list[str], found: Scan) -> FeederModel:
    with engine(path, warnings, found) as ctx:
        _check_values(ctx.ActiveCircuit, path)
        _solve_snapshot(ctx, path)
        _bus_coordinates(ctx, path)
        reader = _Reader(ctx, path, found.definitions)
        circuit = ctx.ActiveCircuit
        bus_kv, bus_nodes, coords = reader.buses()
        source = reader.sources()
        regcontrols = reader.regcontrols()
        regulated = {r.transformer for r in regcontrols}
        capcontrols = reader.capcontrols()
        transformers = reader.transformers(regulated)
        known = {t.name for t in transformers}
        for rc in regcontrols:
            if rc.transformer not in known:
                reader.refused.append(
                    (f"regcontrol.{rc.name}", f"its transformer {rc.transformer!r} is not in service")
                )
        _bank_names(transformers, regulated)
        lines = reader.lines()
        order = _bus_order(source.bus, lines, transformers, reader.primitives, bus_kv)
        generators, regulated_generators = reader.generators()
        model = FeederModel(
            name=name or circuit.Name.lower(),
            source=source,
            bus_kv={b: bus_kv[b] for b in order},
            bus_phases={b: bus_nodes[b] for b in order},
            lines=lines,
            transformers=transformers,
            regcontrols=regcontrols,
            loads=reader.loads(),
            capacitors=reader.capacitors({c.capacitor for c in capcontrols}),
            capcontrols=capcontrols,
            generators=generators,
            regulated_generators=regulated_generators,
            coords=coords,
            frequency_hz=reader.frequency_hz,
            swtcontrols=reader.swtcontrols(),
            max_control_iterations=int(circuit.Solution.MaxControlIterations),
        )
        reader.others(
            {
                *("vsource", "line", "transformer", "regcontrol", "capacitor", "capcontrol", "swtcontrol", "load"),
                *("generator", "pvsystem", "storage"),
            }
        )
        refusal = reader.report()
        if refusal is not None:
            raise refusal
        model.primitives = reader.primitives
    return model


def read_opendss(path: str | Path, name: str | None = None, timeout_s: float = READ_TIMEOUT_S) -> FeederModel:
    """Compile an OpenDSS file (a master and everything it redirects to) with OpenDSS's engine and
    read the circuit into a :class:`FeederModel` (see the module docstring).

    The engine runs in a process of its own (:func:`run_in_worker`), under a memory cap and
    ``timeout_s``: a file that makes it crash or loop is an error here, never a crash of the
    caller, and what it writes stays in the worker's scratch folder. Before it runs, the files are
    scanned (:func:`~openg2g.grid.feeder.dss_includes.scan`): the commands that would write a file,
    move OpenDSS's folders or run code, and the elements openg2g refuses whatever the engine makes
    of them, are named then, the engine not started. OpenDSS's warnings are logged (this module's
    logger), each once.

    :param path: the ``.dss`` file OpenDSS would compile.
    :param name: feeder name; defaults to the circuit's.
    :param timeout_s: longest the reading may take (s).
    :raises FeederError: the scan refuses the files (a redirect cycle, the chain named; commands
        and elements, each with its file and line), the engine refuses the file (its message),
        OpenDSS does not solve the circuit, elements openg2g cannot model or whose admittance it
        would not reproduce to :data:`YPRIM_RTOL` (all of them named, with the file and line that
        define them), or the engine crashed or timed out.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FeederError(f"OpenDSS file not found: {path}")
    read = run_in_worker(path, _read, (path, name), timeout_s)
    for warning in read["warnings"]:
        _log.warning("%s: OpenDSS warning, read on past it: %s", path, warning)
    return FeederModel.from_dict(read["model"])


def run_in_worker(
    path: Path, task: Callable[..., Any], args: tuple[Any, ...], timeout_s: float = READ_TIMEOUT_S
) -> Any:
    """``task(*args)`` in a worker process of its own (:func:`main`), for a task that runs OpenDSS's
    engine on ``path``; its result, which must be JSON, is returned.

    The worker's working folder, and the folder its temporary files go to (``TMPDIR``), is a
    private scratch folder, removed however the call ends (done, refused, timed out, the worker
    killed by a signal, a ``KeyboardInterrupt``): nothing the engine writes outlives it. Its
    address space is at most :data:`READ_MEMORY_BYTES` (or the lower limit the caller already has)
    and it leaves no core dump; it is killed after ``timeout_s``.

    :raises FeederError: the task's own refusal (its message), the worker did not finish in
        ``timeout_s``, or it crashed (its exit status or signal, and its last line).
    """
    root = str(Path(__file__).resolve().parents[3])  # the folder this openg2g is imported from
    with tempfile.TemporaryDirectory(prefix="openg2g-opendss-", ignore_cleanup_errors=True) as scratch:
        env = {**os.environ, "TMPDIR": scratch}
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            done = subprocess.run(
                [sys.executable, "-c", _WORKER],
                input=pickle.dumps((task, args)),
                capture_output=True,
                timeout=timeout_s,
                cwd=scratch,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise FeederError(f"{path}: OpenDSS's engine did not finish reading the file in {timeout_s:g} s") from None
    if done.returncode == 0:
        return json.loads(done.stdout)
    message = done.stderr.decode(errors="replace").strip()
    if done.returncode == _REFUSED:
        raise FeederError(message)
    cause = f"signal {signal.Signals(-done.returncode).name}" if done.returncode < 0 else f"exit {done.returncode}"
    detail = f": {message.splitlines()[-1]}" if message else ""
    raise FeederError(
        f"{path}: OpenDSS's engine crashed reading the file ({cause}{detail}); the file is likely malformed "
        f"(an element of absurd size, past the {READ_MEMORY_BYTES / 1024**3:g} GiB of memory the reading may use)"
    )


def main() -> int:
    """The worker of :func:`run_in_worker`: the task and its arguments, pickled, on stdin; its JSON
    result on stdout (exit 0), or its refusal on stderr (exit :data:`_REFUSED`)."""
    lower_limit(resource.RLIMIT_AS, READ_MEMORY_BYTES)
    lower_limit(resource.RLIMIT_CORE, 0)
    task, args = pickle.loads(sys.stdin.buffer.read())  # written by run_in_worker, in this package
    try:
        result = task(*args)
    except FeederError as exc:
        print(exc, file=sys.stderr)
        return _REFUSED
    json.dump(result, sys.stdout)
    return 0
