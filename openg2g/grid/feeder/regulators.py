"""Voltage regulators: banks, their units, tap positions, and OpenDSS's regulator control.

A bank is one regulator as the feeder names it (``reg1``); it regulates one or more phases, each
a *unit* (a single-phase transformer, or one phase of a three-phase one) with its own OpenDSS
``RegControl``. A ganged bank (one three-phase transformer) has one tap for all its phases and one
control, which watches the phase its ``ptphase`` names.

Tap positions are integer *tap steps*; the ratio in force, in pu, lives in the network's
:class:`~openg2g.grid.feeder.network.Switching` (``1 + step * step_pu``), which the grid backend owns
because a tap change also updates the compiled network. This module decides steps; the backend
puts them in force.

Automatic control (``mode: auto``) is OpenDSS's ``RegControl`` in time mode (``controlmode=time``).
After each solve at time t the backend *samples* every control (:meth:`Regulators.sample`), then
carries out the actions due by t (:meth:`Regulators.act`), solves again at t if a tap moved, and
samples again, as OpenDSS's control iterations do. A sample:

- reads the regulated winding's voltage of the monitored phase (``ptphase``; ``max``/``min``: the
  phase whose winding voltage is highest/lowest at this sample) over ``ptratio``, V on the 120 V
  base; when ``R`` or ``X`` is set, adds the line-drop compensation ``(R + jX) I / ctprim`` with
  ``I`` the current into the transformer at that phase's conductor of the winding;
- is *out of band* when ``|vreg - V| > band / 2``, or when ``vlimit`` is set and the
  uncompensated voltage exceeds it. Out of band, it computes the steps the boost needs,
  ``round((vreg - V) ptratio / V_base / step)`` (``vlimit - V`` when over the limit; ``V_base``
  the rated voltage across one phase of the winding), and, unless an action is armed already, arms one at
  ``t + delay`` when the tap can still move that way (with ``inverse_time``, the delay over
  ``min(10, 2 |vreg - V| / band)``). Back in band it disarms.

An action that falls due moves the tap one step towards the steps asked for at the last sample;
while steps remain it queues the next action at ``t + tapdelay``, otherwise the control disarms and
the next move waits a full ``delay`` again. So a drop needing n steps is corrected after
``delay + (n - 1) tapdelay`` (15 s + 3 x 2 s = 21 s for four steps at OpenDSS's defaults). As in
OpenDSS, a return to band cancels only the action the control armed: an action queued after a move
stays queued, and when it falls due it moves the tap if the last sample asked for steps again: a
control back in band that a load step throws out again before then moves at that action's time,
and the action its new arming queues follows its own delay beside it. ``maxtapchange`` 0 holds the tap;
any other value limits OpenDSS's *static* mode only, never its time mode's one step per action.

A ``reversible`` control watches the active power through the regulated winding: flowing
backwards above ``revthreshold`` for ``revdelay`` turns it to reverse mode, forwards above the
threshold for ``revdelay`` turns it back. In reverse mode it regulates the other side as OpenDSS
does: the compensated voltage with ``revR``/``revX`` in place of ``R``/``X`` (compensation is on
only when ``R`` or ``X`` is set) divided by the tap ratio, against ``revvreg`` and ``revband``,
moving the tap the opposite way.

A control regulating a remote bus (OpenDSS's ``bus=``) reads that bus's node to ground over
``remoteptratio`` instead (``ptratio`` unless the file sets one), without line-drop compensation
and never turning to reverse mode, as OpenDSS does; ``vlimit`` then watches the winding's first
phase.

The scenario may override ``vreg``, ``band``, ``delay`` and ``tapdelay`` per bank (forward
settings only). A bank runs in auto mode only when every phase has a RegControl this module models:
one monitoring winding 2 with a ``ptphase`` the transformer has, regulating a remote bus only from
a wye winding and at one node (:func:`bank_auto_problem` says why not, by name).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from openg2g.core.errors import CommandError, FeederError
from openg2g.core.interfaces import RegulatorInfo
from openg2g.core.state import PHASES
from openg2g.grid.config import RegulatorSpec
from openg2g.grid.feeder.branches import TerminalMeter
from openg2g.grid.feeder.library import Feeder
from openg2g.grid.feeder.model import RegControlModel, TransformerModel
from openg2g.grid.feeder.network import NodeIndex, Switching, winding_kv, winding_voltage

__all__ = [
    "TIME_TOL_S",
    "ControlReading",
    "RegulatorBank",
    "RegulatorUnit",
    "Regulators",
    "UnitKey",
    "bank_auto_problem",
    "unsupported_regcontrol",
]

UnitKey = tuple[str, int]
"""A regulated phase: ``(transformer name, phase index within the transformer)``."""

TIME_TOL_S = 1e-9
"""Slack when comparing an action's due time with the solve time (s): a simulation time is an exact
fraction rounded to a float, so ``t + delay`` may land a rounding error past the step it is due at."""


def unsupported_regcontrol(rc: RegControlModel, t: TransformerModel) -> str | None:
    """Why the automatic control cannot run ``rc`` on its transformer ``t``, or None when it can."""
    if rc.winding != 2:
        return f"regcontrol {rc.name} monitors winding {rc.winding}; only winding 2 (the tapped one) is modelled"
    if rc.monitored_bus is not None:
        where = f"regcontrol {rc.name} regulates the remote bus {rc.monitored_bus} (OpenDSS's bus=)"
        if t.windings[1].conn != "wye":
            return (
                f"{where} from a delta winding (the voltage between two of its nodes); only a wye winding's is modelled"
            )
        if rc.ptphase not in (1, "max", "min"):
            return f"{where} with ptphase {rc.ptphase}: OpenDSS samples one node there, as phase 1"
        if not (rc.monitored_node in PHASES or rc.monitored_node.isdigit()):
            return f"{where} at node {rc.monitored_node}: not a node of a bus"
        return None
    if isinstance(rc.ptphase, str):
        if rc.ptphase not in ("max", "min"):
            return f"regcontrol {rc.name}: ptphase {rc.ptphase!r} (a phase number, max or min)"
    elif not 1 <= rc.ptphase <= t.n_phases:
        return f"regcontrol {rc.name}: ptphase {rc.ptphase}, but transformer {t.name} has {t.n_phases} phase(s)"
    return None


def bank_auto_problem(feeder: Feeder, bank: str) -> str | None:
    """Why bank ``bank`` of ``feeder`` cannot run in auto mode, or None when it can: a phase
    without a RegControl, or a RegControl :func:`unsupported_regcontrol` refuses."""
    controls = {rc.transformer: rc for rc in feeder.model.regcontrols}
    transformers = {t.name: t for t in feeder.model.transformers}
    for name in dict.fromkeys(t for t, _ in feeder.bank_units[bank]):
        rc = controls.get(name)
        if rc is None:
            return f"regulator bank {bank}: transformer {name} has no RegControl in the feeder file to run"
        why = unsupported_regcontrol(rc, transformers[name])
        if why is not None:
            return f"regulator bank {bank}: {why}"
    return None


@dataclass(frozen=True)
class ControlReading:
    """What a regulator's control reads at one solution (:meth:`Regulators.read`).

    :param in_band: True when the control voltage is within the band (and under ``vlimit``).
    :param boost_pu: the ratio change that would bring it to the set point (``vlimit`` when over
        it), pu of the winding's rated voltage, before the sign of reverse mode.
    :param delay_s: the delay an action armed now would wait (s): ``delay``, or out of band its
        inverse-time share.
    """

    in_band: bool
    boost_pu: float
    delay_s: float


@dataclass
class RegulatorUnit:
    """One regulated phase: its transformer and phase index, its control (the feeder file's, with the
    scenario's overrides), and the control's time-mode state.

    :param transformer: transformer name.
    :param k: phase index within the transformer.
    :param control: the unit's control, None when the file gives none.
    :param meter: the regulated winding's terminal (voltages, currents, power), for a unit with a control.
    :param armed: True from the sample that arms a tap action until the control disarms (back in
        band, or an action finding nothing left to do).
    :param actions: the control's queued tap actions: due time (s) and a number naming each.
    :param armed_action: the number of the action the last arming queued, the one a return to band
        cancels.
    :param pending_steps: tap steps the last sample asked for (> 0 raises the ratio).
    :param reverse: True while regulating in reverse mode.
    :param reverse_due_s: time a pending change of direction falls due (s), None when none is pending.
    """

    transformer: str
    k: int
    control: RegControlModel | None
    meter: TerminalMeter | None = None
    armed: bool = False
    actions: list[tuple[float, int]] = field(default_factory=list)
    armed_action: int = 0
    pending_steps: int = 0
    reverse: bool = False
    reverse_due_s: float | None = None

    def reset_control(self) -> None:
        """Disarm, drop the queued actions, forget the steps asked for, look forward."""
        self.armed = False
        self.actions.clear()
        self.reverse_due_s = None
        self.pending_steps = 0
        self.reverse = False


@dataclass
class RegulatorBank:
    """One regulator bank: its facts, its units, its mode and initial taps."""

    info: RegulatorInfo
    units: list[RegulatorUnit]
    mode: str = "fixed"
    ganged: bool = False
    initial_taps: tuple[int, ...] = field(default_factory=tuple)
    initial_mode: str = "fixed"

    @property
    def controlled(self) -> list[RegulatorUnit]:
        """The units whose control acts: the first of a ganged bank (its one control moves the
        common tap), every unit otherwise; units without a control left out."""
        units = self.units[:1] if self.ganged else self.units
        return [u for u in units if u.control is not None]

    def reset_controls(self) -> None:
        """Reset every unit's control (a mode switch or a reset starts anew)."""
        for u in self.units:
            u.reset_control()


def _with_overrides(rc: RegControlModel, spec: RegulatorSpec | None) -> RegControlModel:
    """``rc`` with the scenario's vreg/band/delay/tapdelay overrides."""
    if spec is None:
        return rc
    return dataclasses.replace(
        rc,
        vreg_v=rc.vreg_v if spec.vreg_v is None else spec.vreg_v,
        band_v=rc.band_v if spec.band_v is None else spec.band_v,
        delay_s=rc.delay_s if spec.delay_s is None else spec.delay_s,
        tapdelay_s=rc.tapdelay_s if spec.tap_delay_s is None else spec.tap_delay_s,
    )


class Regulators:
    """The regulator banks of a feeder with the scenario's initial settings.

    :param feeder: the feeder.
    :param specs: the scenario's ``grid.regulators`` (bank name, any case -> settings).
    :param nodes: the feeder's node numbering (the rows of a solution).
    :raises FeederError: a bank's initial taps lie outside the scenario's tap range.
    """

    def __init__(self, feeder: Feeder, specs: Mapping[str, RegulatorSpec], nodes: NodeIndex) -> None:
        model = feeder.model
        controls = {rc.transformer: rc for rc in model.regcontrols}
        self._transformers = {t.name: t for t in model.transformers}
        self._nodes = nodes
        self._actions_queued = 0
        taps0 = Switching.initial(model).taps_pu
        self.banks: dict[str, RegulatorBank] = {}
        for name, info in feeder.regulators.items():
            spec = specs.get(name) or next((v for k, v in specs.items() if k.lower() == name), None)
            units = []
            for t, k in feeder.bank_units[name]:
                rc = controls.get(t)
                meter = None if rc is None else TerminalMeter(model, nodes, f"transformer.{t}", 2)
                units.append(RegulatorUnit(t, k, None if rc is None else _with_overrides(rc, spec), meter))
            ganged = feeder.is_ganged(name)
            bank = RegulatorBank(info=dataclasses.replace(info, ganged=ganged), units=units, ganged=ganged)
            taps = tuple(self.tap_step(u.transformer, float(taps0[u.transformer][u.k])) for u in units)
            if spec is not None:
                taps = self._configure(bank, spec, taps)
            bank.initial_taps = taps
            self.banks[name] = bank

    @staticmethod
    def _configure(bank: RegulatorBank, spec: RegulatorSpec, taps: tuple[int, ...]) -> tuple[int, ...]:
        """Apply a bank's scenario mode and tap range; return its initial taps."""
        if spec.taps is not None:
            taps = tuple(spec.taps)
        bank.initial_mode = spec.mode
        info = bank.info
        bank.info = dataclasses.replace(
            info,
            min_tap=info.min_tap if spec.min_tap is None else spec.min_tap,
            max_tap=info.max_tap if spec.max_tap is None else spec.max_tap,
        )
        outside = [x for x in taps if not bank.info.min_tap <= x <= bank.info.max_tap]
        if outside:
            raise FeederError(
                f"regulator bank {info.bank}: taps {list(taps)} lie outside the scenario's range "
                f"[{bank.info.min_tap}, {bank.info.max_tap}]"
            )
        return taps

    # ----------------------------------------------------------------------------- taps
    def transformer(self, name: str) -> TransformerModel:
        """The regulating transformer ``name``."""
        return self._transformers[name]

    def tap_step(self, transformer: str, tap_pu: float) -> int:
        """The integer tap step of ratio ``tap_pu`` (pu) on ``transformer``."""
        return round((tap_pu - 1.0) / self._transformers[transformer].step_pu)

    def tap_pu(self, transformer: str, step: int) -> float:
        """The ratio (pu) of tap step ``step`` on ``transformer``."""
        return 1.0 + step * self._transformers[transformer].step_pu

    def taps(self, switching: Switching) -> dict[str, tuple[int, ...]]:
        """Bank name -> per-phase tap steps in force in ``switching``."""
        return {name: tuple(self.unit_tap(u, switching) for u in b.units) for name, b in self.banks.items()}

    def unit_tap(self, u: RegulatorUnit, switching: Switching) -> int:
        """The tap step of unit ``u`` in ``switching``."""
        return self.tap_step(u.transformer, float(switching.taps_pu[u.transformer][u.k]))

    def info(self) -> dict[str, RegulatorInfo]:
        """Bank name -> its facts (phases, tap range after the scenario's overrides)."""
        return {name: b.info for name, b in self.banks.items()}

    def all_fixed(self) -> bool:
        """True when no bank is in auto mode (steps of a run are then independent)."""
        return all(b.mode == "fixed" for b in self.banks.values())

    def reset(self) -> dict[UnitKey, int]:
        """Initial modes, controls reset; return the initial tap step of every unit."""
        steps: dict[UnitKey, int] = {}
        for bank in self.banks.values():
            bank.mode = bank.initial_mode
            bank.reset_controls()
            steps.update(self.unit_steps(bank, bank.initial_taps))
        return steps

    @staticmethod
    def unit_steps(bank: RegulatorBank, taps: Sequence[int]) -> dict[UnitKey, int]:
        """Per-phase taps of ``bank`` as unit -> tap step."""
        return {(u.transformer, u.k): tap for u, tap in zip(bank.units, taps)}

    # ----------------------------------------------------------------------------- commands
    def bank(self, name: str) -> RegulatorBank:
        """The bank ``name`` (as given, or lower case).

        :raises CommandError: no such bank (the message lists the banks).
        """
        bank = self.banks.get(name) or self.banks.get(name.lower())
        if bank is None:
            raise CommandError(f"unknown regulator bank {name!r} (banks: {', '.join(self.banks) or 'none'})")
        return bank

    @staticmethod
    def check_taps(bank: RegulatorBank, taps: tuple[int, ...]) -> None:
        """Check taps commanded for ``bank``: one per phase, in range, equal on a ganged bank.

        :raises CommandError: naming the bank and what is wrong.
        """
        info = bank.info
        if len(taps) != len(info.phases):
            raise CommandError(
                f"set_taps {info.bank}: {len(taps)} taps given, the bank regulates phases {', '.join(info.phases)}"
            )
        bad = [x for x in taps if not info.min_tap <= x <= info.max_tap]
        if bad:
            raise CommandError(f"set_taps {info.bank}: taps {bad} outside [{info.min_tap}, {info.max_tap}]")
        if bank.ganged and len(set(taps)) > 1:
            raise CommandError(
                f"set_taps {info.bank}: taps {list(taps)} differ per phase, but the bank is one "
                f"{len(info.phases)}-phase (ganged) regulator with a single tap: give the same tap on every phase"
            )

    # ----------------------------------------------------------------------------- automatic control
    def _auto_units(self) -> list[tuple[RegulatorBank, RegulatorUnit]]:
        return [(b, u) for b in self.banks.values() if b.mode == "auto" for u in b.controlled]

    def sample(self, t_s: float, v: np.ndarray, switching: Switching) -> None:
        """Sample every control of the banks in auto mode at the solution ``v`` (complex node
        voltages, V, ``(n_nodes,)``) solved at ``t_s`` (s) and ``switching``: arm, re-aim or
        disarm tap actions and changes of direction (see the module docstring)."""
        for bank, u in self._auto_units():
            self._sample_unit(bank, u, t_s, v, switching)

    def _sample_unit(self, bank: RegulatorBank, u: RegulatorUnit, t_s: float, v: np.ndarray, sw: Switching) -> None:
        rc = u.control
        assert rc is not None and u.meter is not None
        if rc.maxtapchange == 0:
            u.pending_steps = 0
            return
        if rc.reversible and rc.monitored_bus is None:
            self._sample_direction(u, rc, t_s, self.forward_power_w(u, v, sw))
        reading = self.read(u, v, sw, u.reverse)
        if reading.in_band:
            u.pending_steps = 0
            if u.armed:  # cancels the action it armed, not one re-queued after a move
                u.actions = [a for a in u.actions if a[1] != u.armed_action]
                u.armed = False
            return
        steps = round(reading.boost_pu / self._transformers[u.transformer].step_pu)
        u.pending_steps = -steps if u.reverse else steps
        if u.pending_steps and not u.armed and self.can_move(bank, u, sw, u.pending_steps):
            u.armed_action = self._queue(u, t_s + reading.delay_s)
            u.armed = True

    def forward_power_w(self, u: RegulatorUnit, v: np.ndarray, sw: Switching) -> float:
        """Active power out of ``u``'s regulated winding towards the load side (W) at node voltages
        ``v`` and switching ``sw``: what a reversible control watches."""
        assert u.meter is not None
        return float(-u.meter.power_va(v, sw).real)

    def can_move(self, bank: RegulatorBank, u: RegulatorUnit, sw: Switching, steps: float) -> bool:
        """Whether ``u``'s tap can still move the way ``steps`` (> 0 up, < 0 down) asks, within
        ``bank``'s tap range at switching ``sw``: a control arms an action only then."""
        tap = self.unit_tap(u, sw)
        return (steps > 0 and tap < bank.info.max_tap) or (steps < 0 and tap > bank.info.min_tap)

    def read(self, u: RegulatorUnit, v: np.ndarray, sw: Switching, reverse: bool) -> ControlReading:
        """What the control of ``u`` reads at node voltages ``v`` and switching ``sw``, looking
        forward or, with ``reverse``, in reverse mode (see the module docstring)."""
        rc, meter = u.control, u.meter
        assert rc is not None and meter is not None
        t = self._transformers[u.transformer]
        winding_v = np.array([winding_voltage(t, 1, k, v, self._nodes) for k in range(t.n_phases)])
        if rc.ptphase == "max":
            ph = int(np.argmax(np.abs(winding_v)))
        elif rc.ptphase == "min":
            ph = int(np.argmin(np.abs(winding_v)))
        else:
            ph = int(rc.ptphase) - 1
        if rc.monitored_bus is not None:  # one node of the bus, no compensation, never reverse
            node = self._nodes.index[(rc.monitored_bus, rc.monitored_node)]
            v_remote = complex(v[node]) / (rc.ptratio if rc.remote_ptratio is None else rc.remote_ptratio)
            return self._reading(rc, t, abs(v_remote), abs(complex(winding_v[0]) / rc.ptratio), rc.vreg_v, rc.band_v)
        v_control = complex(winding_v[ph]) / rc.ptratio
        v_local = abs(v_control)
        if rc.r_v or rc.x_v:
            r, x = (rc.revr_v, rc.revx_v) if reverse else (rc.r_v, rc.x_v)
            # the current flows into the winding, so adding is OpenDSS's V - (R + jX) I_out
            v_control += complex(r, x) * complex(meter.currents(v, sw)[ph]) / rc.ctprim_a
        v_actual = abs(v_control)
        if reverse:
            v_actual /= float(sw.taps_pu[u.transformer][u.k])
            vreg, band = rc.revvreg_v, rc.revband_v
        else:
            vreg, band = rc.vreg_v, rc.band_v
        return self._reading(rc, t, v_actual, v_local, vreg, band)

    @staticmethod
    def _reading(
        rc: RegControlModel, t: TransformerModel, v_actual: float, v_local: float, vreg: float, band: float
    ) -> ControlReading:
        """The reading of control voltage ``v_actual`` (compensated) and ``v_local`` (not), V on the
        120 V base, against set point ``vreg`` and ``band``."""
        over_limit = rc.vlimit_v > 0 and v_local > rc.vlimit_v
        in_band = not (abs(vreg - v_actual) > band / 2.0 or over_limit)
        boost_v = rc.vlimit_v - v_local if over_limit else vreg - v_actual
        delay_s = rc.delay_s
        if rc.inverse_time and not in_band:  # OpenDSS takes the forward vreg and band here, even in reverse
            factor = min(10.0, 2.0 * abs(rc.vreg_v - v_actual) / rc.band_v)
            # at vreg exactly (armed by vlimit alone) OpenDSS's delay is infinite
            delay_s = delay_s / factor if factor > 0 else math.inf
        return ControlReading(in_band, boost_v * rc.ptratio / (winding_kv(t, 1) * 1000.0), delay_s)

    def _queue(self, u: RegulatorUnit, due_s: float) -> int:
        """Queue a tap action of ``u`` due at ``due_s`` (s); return its number."""
        self._actions_queued += 1
        u.actions.append((due_s, self._actions_queued))
        return self._actions_queued

    @staticmethod
    def _sample_direction(u: RegulatorUnit, rc: RegControlModel, t_s: float, forward_w: float) -> None:
        """Arm or cancel a change of direction from the forward power through the regulated
        winding (W, > 0 towards the load side)."""
        threshold_w = rc.revthreshold_kw * 1000.0
        turning = forward_w > threshold_w if u.reverse else forward_w < -threshold_w
        if u.reverse_due_s is None and turning:
            u.reverse_due_s = t_s + rc.revdelay_s
        elif u.reverse_due_s is not None and not turning:
            u.reverse_due_s = None

    def act(self, t_s: float, switching: Switching) -> tuple[dict[UnitKey, int], bool]:
        """Carry out the actions of the banks in auto mode due by ``t_s`` (s), as sampled last.

        :return: the tap moves (unit -> new tap step; empty when none), and whether any action was
            due (one that moves nothing, a change of direction or a tap already at its limit, also
            calls for another sample at ``t_s``, as in OpenDSS). An action re-armed at once
            (``tapdelay`` 0) is carried out in the same call, as OpenDSS's control queue does.
        """
        moves: dict[UnitKey, int] = {}
        acted = False
        for bank, u in self._auto_units():
            if u.reverse_due_s is not None and u.reverse_due_s <= t_s + TIME_TOL_S:
                u.reverse = not u.reverse
                u.reverse_due_s = None
                acted = True
            tap = start = self.unit_tap(u, switching)
            # every action of the unit does the same, so their order among themselves is free
            while due := [a for a in u.actions if a[0] <= t_s + TIME_TOL_S]:
                u.actions.remove(due[0])
                acted = True
                if u.pending_steps == 0:  # the last sample asked for nothing
                    u.armed = False
                    continue
                step = 1 if u.pending_steps > 0 else -1
                u.pending_steps -= step
                tap = min(max(tap + step, bank.info.min_tap), bank.info.max_tap)
                assert u.control is not None
                if u.pending_steps:
                    self._queue(u, t_s + u.control.tapdelay_s)
                else:
                    u.armed = False
            if tap != start:
                for tu in bank.units if bank.ganged else [u]:
                    moves[(tu.transformer, tu.k)] = tap
        return moves, acted

    def armed(self) -> list[str]:
        """Banks in auto mode with an action armed (for a message when actions never settle)."""
        return [
            b.info.bank
            for b in self.banks.values()
            if b.mode == "auto" and any(u.actions or u.reverse_due_s is not None for u in b.controlled)
        ]
