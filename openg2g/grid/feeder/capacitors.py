"""Capacitor controls: OpenDSS's ``CapControl`` in time mode, switching the feeder's capacitors.

A control watches one terminal of a line or transformer (``element``, ``terminal``) through a
potential transformer (``ptratio``) and a current transformer (``ctratio``) and switches its
capacitor (a single-step bank). As OpenDSS's time mode (``controlmode=time``) does, after each
solve at time t the grid backend *samples* every control (:meth:`CapacitorControls.sample`), then
carries out the switching due by t (:meth:`CapacitorControls.act`), solves again at t if a
capacitor switched, and samples again. A sample reads the capacitor's present state and asks for
a switch when:

- ``voltage``: open and the control voltage is below ``on_setting``, closed and above ``off_setting``;
- ``current``: open and the control current is above ``on_setting``, closed and below ``off_setting``;
- ``kvar``: the same with the reactive power into the terminal, all conductors (kvar);
- ``pf``: open and the power factor at the terminal is below ``on_setting`` while the reactive power
  into it exceeds ``pctminkvar`` % of the bank's rating; closed and above ``off_setting``. Power
  factors run from -1 to 1 as in OpenDSS (negative = leading) and compare on OpenDSS's 0..2 scale
  (a leading ``x`` counts as ``2 + x``, past unity);
- ``voltoverride`` (not for ``voltage``): first of all, open and the control voltage below ``vmin_v``,
  closed and above ``vmax_v``, whatever the main setting says.

A switch asked for arms the control, unless it is armed already, to act after ``delay_s`` (closing)
or ``delayoff_s`` (opening); a closing armed within ``deadtime_s`` of the control's last opening waits
``max(delay, deadtime + delay - time since opening)``. A sample that asks for nothing disarms it.
The action does what the last sample asked (if the capacitor is not in that state already).

Measurements, as OpenDSS reads them: the control voltage is the watched conductor's voltage to
ground over ``ptratio`` (``ptphase`` a number; for a delta capacitor the voltage between that
conductor and the next), or the average, highest or lowest over the terminal's phases
(``avg``/``max``/``min``). The control current is a conductor's current over ``ctratio``; a numbered
``ctphase`` reads that conductor of the element's *first* terminal whatever ``terminal`` says, while
``avg``/``max``/``min`` run over the watched terminal's first conductors, as many as the capacitor has
phases.

Refused (by name, :func:`unsupported_capcontrol`): control types other than the four above
(``time``, ``follow``, user models), a watched element that is not a line or transformer of the
feeder, phases or settings OpenDSS could not read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.branches import TerminalMeter
from openg2g.grid.feeder.model import CapacitorModel, CapControlModel, FeederModel
from openg2g.grid.feeder.network import NodeIndex, Switching
from openg2g.grid.feeder.regulators import TIME_TOL_S

__all__ = ["KINDS", "CapacitorControl", "CapacitorControls", "unsupported_capcontrol"]

KINDS = ("voltage", "current", "kvar", "pf")
"""The control types modelled."""

_ALL_PHASES = ("avg", "max", "min")


def _terminal_phases(model: FeederModel, element: str, terminal: int) -> int | None:
    """Number of phase conductors at ``terminal`` of ``element`` (``line.x``/``transformer.x``),
    None when the feeder has no such line or transformer terminal."""
    kind, _, name = element.lower().partition(".")
    if terminal not in (1, 2):
        return None
    if kind == "line":
        ln = next((x for x in model.lines if x.name.lower() == name), None)
        return None if ln is None else len(ln.phases1 if terminal == 1 else ln.phases2)
    if kind == "transformer":
        t = next((x for x in model.transformers if x.name.lower() == name), None)
        return None if t is None else len(t.windings[terminal - 1].phases)
    return None


def unsupported_capcontrol(cc: CapControlModel, model: FeederModel) -> str | None:
    """Why ``cc`` cannot run on ``model`` as an automatic control, or None when it can."""
    where = f"capcontrol {cc.name}"
    if cc.kind not in KINDS:
        return f"{where}: type {cc.kind!r} is not modelled (types: {', '.join(KINDS)})"
    cap = next((c for c in model.capacitors if c.name.lower() == cc.capacitor.lower()), None)
    if cap is None:
        return f"{where}: unknown capacitor {cc.capacitor!r}"
    n = _terminal_phases(model, cc.element, cc.terminal)
    if n is None:
        return (
            f"{where}: watches {cc.element!r} terminal {cc.terminal}, not a line or transformer terminal of the feeder"
        )
    for name, phase in (("ptphase", cc.ptphase), ("ctphase", cc.ctphase)):
        if isinstance(phase, str):
            if phase not in _ALL_PHASES:
                return f"{where}: {name} {phase!r} (a conductor number, avg, max or min)"
        elif not 1 <= phase <= n:
            return f"{where}: {name} {phase}, but {cc.element} terminal {cc.terminal} has {n} phase conductor(s)"
    if len(cap.phases) > n:  # OpenDSS would read conductors past the terminal's
        return (
            f"{where}: capacitor {cap.name} has {len(cap.phases)} phases, "
            f"more than {cc.element} terminal {cc.terminal} ({n})"
        )
    if cc.kind == "pf" and not (abs(cc.on_setting) <= 1 and abs(cc.off_setting) <= 1):
        return f"{where}: a pf control's settings lie in [-1, 1], got on {cc.on_setting:g}, off {cc.off_setting:g}"
    numbers = {
        "ptratio": cc.ptratio,
        "ctratio": cc.ctratio,
        "delay": cc.delay_s,
        "delayoff": cc.delayoff_s,
        "deadtime": cc.deadtime_s,
    }
    bad = [f"{k}={x:g}" for k, x in numbers.items() if not (math.isfinite(x) and (x > 0 if "ratio" in k else x >= 0))]
    if bad:
        return f"{where}: {', '.join(bad)} (ratios must be > 0, times >= 0)"
    return None


def _over_phases(how: str, magnitudes: np.ndarray) -> float:
    """The ``avg``, ``max`` or ``min`` of per-phase magnitudes."""
    if how == "avg":
        return float(np.mean(magnitudes))
    return float(np.max(magnitudes) if how == "max" else np.min(magnitudes))


def _pf_scale(pf: float) -> float:
    """A power factor in [-1, 1] (negative = leading) on OpenDSS's 0..2 scale (leading past 1)."""
    return 2.0 + pf if pf < 0 else pf


def _pf_of(s_va: complex) -> float:
    """Power factor of complex power ``s_va`` on OpenDSS's 0..2 scale: ``|P| / |S|`` drawing
    reactive power, ``2 - |P| / |S|`` delivering it, 1 at no power."""
    s_abs = abs(s_va)
    pf = abs(s_va.real) / s_abs if s_abs else 1.0
    return 2.0 - pf if s_va.imag < 0 else pf


@dataclass
class CapacitorControl:
    """One control with its capacitor, its meters and its time-mode state.

    :param model: the control.
    :param capacitor: its capacitor.
    :param meter: the watched terminal.
    :param first: the element's first terminal, read by a numbered ``ctphase``.
    :param due_s: time the armed switching falls due (s), None when not armed.
    :param pending: what the last sample asked: True close, False open, None nothing.
    :param last_open_s: time the control last opened the capacitor (s).
    """

    model: CapControlModel
    capacitor: CapacitorModel
    meter: TerminalMeter
    first: TerminalMeter
    due_s: float | None = None
    pending: bool | None = None
    last_open_s: float = 0.0

    def reset(self) -> None:
        """Disarmed, asking nothing, last opened a dead time before the start (free to close)."""
        self.due_s = self.pending = None
        self.last_open_s = -self.model.deadtime_s

    def delay_s(self, t_s: float) -> float:
        """The delay (s) of a switching armed at ``t_s`` (s) for what the last sample asked (:attr:`pending`):
        ``delayoff`` to open; ``delay`` to close, or longer within ``deadtime`` of the last opening."""
        cc = self.model
        if not self.pending:
            return cc.delayoff_s
        since_open_s = t_s - self.last_open_s
        if since_open_s < cc.deadtime_s:
            return max(cc.delay_s, cc.deadtime_s + cc.delay_s - since_open_s)
        return cc.delay_s

    def voltage(self, v: np.ndarray) -> float:
        """Control voltage (V on the PT secondary) at node voltages ``v`` (V, complex)."""
        cc = self.model
        terminal_v = self.meter.voltages(v)
        if isinstance(cc.ptphase, str):
            return _over_phases(cc.ptphase, np.abs(terminal_v)) / cc.ptratio
        k = cc.ptphase - 1
        if self.capacitor.conn == "delta":
            return float(abs(terminal_v[k] - terminal_v[(k + 1) % len(self.capacitor.phases)])) / cc.ptratio
        return float(abs(terminal_v[k])) / cc.ptratio

    def current(self, v: np.ndarray, state: Switching) -> float:
        """Control current (A on the CT secondary) at node voltages ``v`` and switching ``state``."""
        cc = self.model
        if isinstance(cc.ctphase, str):
            mags = np.abs(self.meter.currents(v, state)[: len(self.capacitor.phases)])
            return _over_phases(cc.ctphase, mags) / cc.ctratio
        return float(abs(self.first.currents(v, state)[cc.ctphase - 1])) / cc.ctratio

    def asks(self, closed: bool, v: np.ndarray, state: Switching) -> bool | None:
        """What the control asks of its capacitor, ``closed`` or open, at node voltages ``v`` and
        switching ``state``: True close, False open, None nothing."""
        cc = self.model
        if cc.voltoverride and cc.kind != "voltage":
            v_control = self.voltage(v)
            if not closed and v_control < cc.vmin_v:
                return True
            if closed and v_control > cc.vmax_v:
                return False
        switch = self._wants_open(v, state) if closed else self._wants_closed(v, state)
        return (not closed) if switch else None

    def _wants_closed(self, v: np.ndarray, state: Switching) -> bool:
        cc = self.model
        if cc.kind == "voltage":
            return self.voltage(v) < cc.on_setting
        if cc.kind == "current":
            return self.current(v, state) > cc.on_setting
        s_va = self.meter.power_va(v, state)
        q_kvar = s_va.imag / 1000.0
        if cc.kind == "kvar":
            return q_kvar > cc.on_setting
        enough = q_kvar > self.capacitor.kvar * cc.pctminkvar / 100.0  # not so far as to lead
        return _pf_of(s_va) < _pf_scale(cc.on_setting) and enough

    def _wants_open(self, v: np.ndarray, state: Switching) -> bool:
        cc = self.model
        if cc.kind == "voltage":
            return self.voltage(v) > cc.off_setting
        if cc.kind == "current":
            return self.current(v, state) < cc.off_setting
        s_va = self.meter.power_va(v, state)
        if cc.kind == "kvar":
            return s_va.imag / 1000.0 < cc.off_setting
        return _pf_of(s_va) > _pf_scale(cc.off_setting)


class CapacitorControls:
    """Every capacitor control of a feeder, run as OpenDSS's time-mode ``CapControl``.

    :param model: the feeder.
    :param nodes: its node numbering.
    :raises FeederError: a control that cannot run (:func:`unsupported_capcontrol`).
    """

    def __init__(self, model: FeederModel, nodes: NodeIndex) -> None:
        caps = {c.name.lower(): c for c in model.capacitors}
        self.controls: list[CapacitorControl] = []
        for cc in model.capcontrols:
            why = unsupported_capcontrol(cc, model)
            if why is not None:
                raise FeederError(f"feeder {model.name}: {why}")
            meter = TerminalMeter(model, nodes, cc.element, cc.terminal)
            first = meter if cc.terminal == 1 else TerminalMeter(model, nodes, cc.element, 1)
            self.controls.append(CapacitorControl(cc, caps[cc.capacitor.lower()], meter, first))
        self.reset()

    def reset(self) -> None:
        """Every control disarmed and free to close."""
        for c in self.controls:
            c.reset()

    def sample(self, t_s: float, v: np.ndarray, switching: Switching) -> None:
        """Sample every control at the solution ``v`` (complex node voltages, V, ``(n_nodes,)``)
        solved at ``t_s`` (s) and ``switching``: arm or disarm (see the module docstring)."""
        for c in self.controls:
            c.pending = c.asks(switching.capacitors[c.capacitor.name], v, switching)
            if c.pending is None:
                c.due_s = None
            elif c.due_s is None:
                c.due_s = t_s + c.delay_s(t_s)

    def act(self, t_s: float, switching: Switching) -> tuple[dict[str, bool], bool]:
        """Carry out the switching due by ``t_s`` (s), as sampled last.

        :return: capacitor name -> closed for every capacitor that switches (empty when none), and
            whether any action was due (one that finds its capacitor switched already also calls for
            another sample at ``t_s``, as in OpenDSS).
        """
        switches: dict[str, bool] = {}
        acted = False
        for c in self.controls:
            if c.due_s is None or c.due_s > t_s + TIME_TOL_S:
                continue
            c.due_s = None
            acted = True
            name = c.capacitor.name
            closed = switches.get(name, switching.capacitors[name])
            if c.pending is not None and c.pending != closed:
                switches[name] = c.pending
                if not c.pending:
                    c.last_open_s = t_s
        return switches, acted

    def armed(self) -> list[str]:
        """Controls with a switching armed (for a message when actions never settle)."""
        return [c.model.name for c in self.controls if c.due_s is not None]
