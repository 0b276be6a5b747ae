"""One circuit run second by second in OpenDSS's time mode (``controlmode=time``) and in
FeederGrid with automatic controls, for the control tests: the same .dss file, RegControls and
CapControls included (openg2g reads it with :func:`~openg2g.grid.feeder.opendss.read_opendss`, so
every case also checks how the reader takes the controls' settings), the same load steps and
manual switchings.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openg2g.core.commands import Command, SetCapacitor, SetLoadScale
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import feeder_from_model
from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.opendss import read_opendss
from openg2g.scenario.schema import GridSpec, RegulatorSpec


@dataclass(frozen=True)
class Control:
    """An OpenDSS control: ``cls`` ``"regcontrol"`` or ``"capcontrol"``, its name and its properties
    as OpenDSS spells them (a CapControl's ``type`` first, as OpenDSS needs it before a pf setting)."""

    cls: str
    name: str
    props: Mapping[str, Any]

    def command(self) -> str:
        """The OpenDSS ``New`` command."""
        words = [f"{k}={'yes' if v is True else 'no' if v is False else v}" for k, v in self.props.items()]
        return f"new {self.cls}.{self.name} {' '.join(words)}"


@dataclass(frozen=True)
class LoadStep:
    """From step ``t_s`` on, load ``load`` draws ``scale`` times its file's kW and kvar."""

    load: str
    scale: float


@dataclass(frozen=True)
class Switch:
    """At step ``t_s``, capacitor ``capacitor`` is switched by hand (a script, a ``set_capacitor``)."""

    capacitor: str
    closed: bool


Event = LoadStep | Switch


@dataclass
class Step:
    """The state after the solve (and control actions) at ``t_s``.

    :param t_s: time (s).
    :param taps: regulating transformer -> tap step.
    :param caps: capacitor -> closed.
    :param v_pu: ``"<bus>.<phase>"`` -> voltage (pu), monitored bus-phases only.
    """

    t_s: float
    taps: dict[str, int]
    caps: dict[str, bool]
    v_pu: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """A circuit, its controls and what happens to it.

    :param dss: the circuit's OpenDSS text (no controls).
    :param controls: the controls.
    :param events: step time (s) -> what happens just before its solve.
    :param steps: number of 1 s steps (times 1 .. steps).
    """

    dss: str
    controls: Sequence[Control]
    events: Mapping[int, Sequence[Event]] = field(default_factory=dict)
    steps: int = 60

    def write(self, folder: Path) -> Path:
        """The circuit file with its controls."""
        path = folder / "circuit.dss"
        path.write_text(self.dss + "".join(f"{c.command()}\n" for c in self.controls))
        return path

    def model(self, folder: Path) -> FeederModel:
        """The circuit with its controls as openg2g's reader makes it."""
        return read_opendss(self.write(folder), name="case")


def run_opendss(case: Case, folder: Path) -> list[Step]:
    """The case in OpenDSS's time mode, 1 s steps."""
    dss = pytest.importorskip("opendssdirect", reason="opendssdirect.py (test extra) is not installed")
    path = case.write(folder)
    dss.Text.Command("clear")
    dss.Text.Command(f'redirect "{path}"')
    loads = {}  # the file's kW and kvar of every load
    for name in dss.Loads.AllNames():
        dss.Loads.Name(name)
        loads[name] = (dss.Loads.kW(), dss.Loads.kvar())
    regulated = [str(c.props["transformer"]) for c in case.controls if c.cls == "regcontrol"]
    steps_pu = {}
    for name in regulated:
        dss.Transformers.Name(name)
        steps_pu[name] = (dss.Transformers.MaxTap() - dss.Transformers.MinTap()) / dss.Transformers.NumTaps()
    dss.Text.Command("set tolerance=1e-9")
    dss.Text.Command("set maxiterations=1000")
    dss.Text.Command("set mode=time controlmode=time stepsize=1s number=1")
    out = []
    for t in range(1, case.steps + 1):
        for e in case.events.get(t, ()):
            if isinstance(e, LoadStep):
                kw, kvar = loads[e.load]
                dss.Text.Command(f"load.{e.load}.kw={kw * e.scale!r} kvar={kvar * e.scale!r}")
            else:
                dss.Capacitors.Name(e.capacitor)
                dss.Capacitors.States([int(e.closed)])
        dss.Solution.Solve()
        assert dss.Solution.Converged() and dss.Solution.Seconds() == t
        taps = {}
        for name in regulated:
            dss.Transformers.Name(name)
            dss.Transformers.Wdg(2)
            taps[name] = round((dss.Transformers.Tap() - 1.0) / steps_pu[name])
        caps = {}
        for name in dss.Capacitors.AllNames():
            dss.Capacitors.Name(name)
            caps[name] = bool(dss.Capacitors.States()[0])
        v = {}
        for node, v_pu in zip(dss.Circuit.AllNodeNames(), dss.Circuit.AllBusMagPu()):
            bus, k = node.rsplit(".", 1)
            v[f"{bus}.{'abc'[int(k) - 1]}"] = v_pu
        out.append(Step(float(t), taps, caps, v))
    return out


def run_openg2g(case: Case, folder: Path, **spec: Any) -> list[Step]:
    """The case in FeederGrid with its regulators in auto mode and, when the case has capacitor
    controls, ``capacitor_control: auto``; 1 s steps. ``spec`` adds GridSpec fields."""
    feeder = feeder_from_model(case.model(folder))
    regulators = {bank: RegulatorSpec(mode="auto") for bank in feeder.regulators}
    control = "auto" if feeder.model.capcontrols else "fixed"
    grid_spec = GridSpec(feeder="case", regulators=regulators, capacitor_control=control, **spec)
    grid = FeederGrid(feeder, grid_spec, [], folder)
    out = []
    for t in range(1, case.steps + 1):
        for e in case.events.get(t, ()):
            command: Command = (
                SetLoadScale(e.scale, e.load) if isinstance(e, LoadStep) else SetCapacitor(e.capacitor, e.closed)
            )
            grid.apply(command, float(t))
        state = grid.solve(float(t), {}, 1.0)
        taps = {
            transformer: step
            for bank, steps in state.taps.items()
            for (transformer, _), step in zip(feeder.bank_units[bank], steps)
        }
        v = {bp: float(x) for bp, x in zip(state.bus_phases, state.v_pu)}
        out.append(Step(float(t), taps, dict(state.capacitors), v))
    return out


def compare(case: Case, folder: Path, **spec: Any) -> tuple[list[Step], list[Step]]:
    """Run the case in both and check them step by step: the same taps and capacitor states at
    every step, voltages within 1e-6 pu; return both runs."""
    ours = run_openg2g(case, folder, **spec)
    ref = run_opendss(case, folder)
    for mine, theirs in zip(ours, ref):
        assert (mine.taps, mine.caps) == (theirs.taps, {k: theirs.caps[k] for k in mine.caps}), (
            f"t={mine.t_s} s: openg2g taps {mine.taps} capacitors {mine.caps}, "
            f"OpenDSS taps {theirs.taps} capacitors {theirs.caps}"
        )
        dv = max(abs(x - theirs.v_pu[bp]) for bp, x in mine.v_pu.items())
        assert dv < 1e-6, f"t={mine.t_s} s: |dV| {dv:.2e} pu"
    return ours, ref


def times(run: Sequence[Step], what: str) -> list[float]:
    """The times a tap (``what`` a transformer) or capacitor (``what`` a capacitor) changed."""
    return [
        after.t_s
        for before, after in itertools.pairwise(run)
        if before.taps.get(what) != after.taps.get(what) or before.caps.get(what) != after.caps.get(what)
    ]
