"""OpenDSS's static control mode: one snapshot solve in which the feeder's controls settle.

OpenDSS's ``Solve`` of a snapshot with ``controlmode=static`` (its default) does not hold the
regulator taps, capacitor states and switches the file states: it lets the file's RegControls,
CapControls and SwtControls act until none does. :meth:`StaticControls.settle` does the same on
openg2g's own solution, so it applies to any feeder model (a bundled JSON feeder, a converted
pandapower net), not only to files OpenDSS reads. As OpenDSS's ``SolveSnap``:

1. solve; if this is the ``maxcontroliter``-th solve, stop: the controls have not settled (OpenDSS
   samples after every solve but the last it allows, and warns);
2. *sample* every control at that solution: each one that calls for an action queues it at its
   delay (the time never advances, so a delay only orders the actions), one back in band or
   asking nothing takes back the action it queued (:class:`ControlQueue`);
3. an empty queue means the controls have settled: the last solve is the answer; otherwise carry
   out the *nearest* actions, those due at the earliest time in the queue (later ones stay queued
   for the next round), and go back to 1.

The controls, as OpenDSS's static mode runs them (time-mode details in
:mod:`~openg2g.grid.feeder.regulators` and :mod:`~openg2g.grid.feeder.capacitors`):

- a **RegControl** reads its winding as in time mode (band, line-drop compensation, ``vlimit``,
  reverse mode, a remote bus; :meth:`~openg2g.grid.feeder.regulators.Regulators.read`) and, out of
  band, asks for ``round(boost / step)`` steps and arms an action at its ``delay`` (inverse-time:
  shorter) when the tap can still move that way. The action moves the tap 70 % of the steps the
  last sample asked for, truncated, at least one and at most ``maxtapchange`` (OpenDSS's
  ``AtLeastOneTap``, in its floating-point arithmetic: its step ``(maxtap - mintap) / numtaps`` is
  one bit above 0.00625, which makes 70 % of 10 steps 7, not 6), within the tap range; the next
  round samples anew. A reversible control arms a change of direction at ``revdelay``;
- a **CapControl** asks as in time mode; it arms a switching at ``delay`` (closing, longer within
  ``deadtime`` of its last opening; OpenDSS creates every control as opened 300 s before time 0,
  its default dead time, whatever the file's, and the reader sets no mode that would reset it) or
  ``delayoff`` (opening), and the action switches the capacitor when it is still in the state the
  control sampled;
- a **SwtControl** whose switch state differs from its action arms the operation at its
  ``delay``; unless locked, the operation opens or closes the switched line (openg2g switches a
  line as a whole: the file's other terminal is never open, :func:`unsupported_swtcontrol`).

Actions due at the same time are carried out in OpenDSS's order: a new action goes ahead of those
queued at its time, and controls sample in the file's order within their class. Not modelled: a
SwtControl's lock or unlock command, which OpenDSS queues once as an action of its own and which
changes nothing, so OpenDSS may count one control iteration more; and the state the controls of a
file carry over from a ``Solve`` in the file (armed actions, reverse mode, a capacitor's last
opening), which the model does not hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from openg2g.core.errors import FeederError, SimulationError
from openg2g.grid.feeder.capacitors import CapacitorControl, CapacitorControls, unsupported_capcontrol
from openg2g.grid.feeder.model import FeederModel, SwtControlModel
from openg2g.grid.feeder.network import NodeIndex, Switching
from openg2g.grid.feeder.powerflow import Solution
from openg2g.grid.feeder.regulators import RegulatorBank, Regulators, RegulatorUnit, UnitKey, unsupported_regcontrol

__all__ = [
    "OPENDSS_FIRST_OPENING_S",
    "PANDAPOWER_CANNOT_SETTLE",
    "Changes",
    "ControlQueue",
    "StaticControls",
    "unsupported_static_controls",
    "unsupported_swtcontrol",
]

OPENDSS_FIRST_OPENING_S = -300.0
"""When OpenDSS takes a CapControl to have last opened its capacitor before the first solve (s):
minus the default dead time, set as the control is created, before the file's ``deadtime``."""

PANDAPOWER_CANNOT_SETTLE = (
    "the pandapower reference solver makes each regulator bank one transformer at the mean of its taps, so "
    "its controls cannot settle as OpenDSS's do: use the exact solver, or hold the controls (controls off)"
)
"""Why the controls do not settle under ``grid.solver: pandapower``."""

_TAP, _REVERSE, _SWITCH = range(3)
"""Action codes: a tap change, a change of direction, a capacitor or switch operation."""


@dataclass
class Changes:
    """What one action puts in force.

    :param taps: ``(transformer, phase index)`` -> tap step.
    :param capacitors: capacitor name -> closed.
    :param lines: line name -> in service.
    """

    taps: dict[UnitKey, int] = field(default_factory=dict)
    capacitors: dict[str, bool] = field(default_factory=dict)
    lines: dict[str, bool] = field(default_factory=dict)


class _Control(Protocol):
    """A control in static mode: samples a solution, queues and takes back its actions, acts."""

    name: str

    def start(self) -> None:
        """Disarmed, before the first solve of a settle."""

    def sample(self, queue: ControlQueue, t_s: float, v: np.ndarray, switching: Switching) -> None:
        """Sample the solution ``v`` (complex node voltages, V) at ``switching``; queue or take back actions."""

    def act(self, code: int, t_s: float, switching: Switching) -> Changes:
        """Carry out the action ``code`` queued earlier; return what it puts in force."""


@dataclass
class _Action:
    due_s: float
    handle: int
    owner: _Control
    code: int


class ControlQueue:
    """OpenDSS's control queue: actions in order of their due time (s), each with a handle that
    takes it back; a new action goes ahead of those due at the same time."""

    def __init__(self) -> None:
        self._actions: list[_Action] = []
        self._handles = 0

    def __len__(self) -> int:
        return len(self._actions)

    def push(self, due_s: float, owner: _Control, code: int) -> int:
        """Queue action ``code`` of ``owner`` due at ``due_s`` (s); return its handle."""
        self._handles += 1
        at = next((i for i, a in enumerate(self._actions) if due_s <= a.due_s), len(self._actions))
        self._actions.insert(at, _Action(due_s, self._handles, owner, code))
        return self._handles

    def delete(self, handle: int) -> None:
        """Take back the action ``handle`` (nothing when it has been carried out already)."""
        self._actions = [a for a in self._actions if a.handle != handle]

    def pop_nearest(self) -> list[_Action]:
        """Take out the actions due at the earliest due time, in the order they are carried out."""
        first = self._actions[0].due_s
        nearest = [a for a in self._actions if a.due_s <= first]
        self._actions = self._actions[len(nearest) :]
        return nearest


class _Regulator:
    """A regulator unit's RegControl in static mode (a ganged bank's one control moves every phase)."""

    def __init__(self, regulators: Regulators, bank: RegulatorBank, unit: RegulatorUnit) -> None:
        assert unit.control is not None
        self.name = f"regcontrol {unit.control.name}"
        self._regulators, self._bank, self._unit = regulators, bank, unit
        t = regulators.transformer(unit.transformer)
        # OpenDSS's TapIncrement, unrounded: the 70 % truncation depends on its last bit
        self._increment = (t.max_tap_pu - t.min_tap_pu) / t.num_taps
        self.start()

    def start(self) -> None:
        self.pending_pu = 0.0
        self.handle: int | None = None
        self.reverse = False
        self.reverse_handle: int | None = None

    def sample(self, queue: ControlQueue, t_s: float, v: np.ndarray, switching: Switching) -> None:
        rc, u = self._unit.control, self._unit
        assert rc is not None
        if rc.maxtapchange == 0:
            self.pending_pu = 0.0
            return
        if rc.reversible and rc.monitored_bus is None:
            self._sample_direction(queue, t_s, self._regulators.forward_power_w(u, v, switching))
        reading = self._regulators.read(u, v, switching, self.reverse)
        if reading.in_band:
            self.pending_pu = 0.0
            if self.handle is not None:
                queue.delete(self.handle)
                self.handle = None
            return
        pending = round(reading.boost_pu / self._increment) * self._increment
        self.pending_pu = -pending if self.reverse else pending
        movable = self._regulators.can_move(self._bank, u, switching, self.pending_pu)
        if self.pending_pu != 0.0 and self.handle is None and movable:
            self.handle = queue.push(t_s + reading.delay_s, self, _TAP)

    def _sample_direction(self, queue: ControlQueue, t_s: float, forward_w: float) -> None:
        rc = self._unit.control
        assert rc is not None
        threshold_w = rc.revthreshold_kw * 1000.0
        turning = forward_w > threshold_w if self.reverse else forward_w < -threshold_w
        if self.reverse_handle is None and turning:
            self.reverse_handle = queue.push(t_s + rc.revdelay_s, self, _REVERSE)
        elif self.reverse_handle is not None and not turning:
            queue.delete(self.reverse_handle)
            self.reverse_handle = None

    def act(self, code: int, t_s: float, switching: Switching) -> Changes:
        if code == _REVERSE:
            self.reverse = not self.reverse
            self.reverse_handle = None
            return Changes()
        self.handle = None
        if self.pending_pu == 0.0:  # back in band since it was armed
            return Changes()
        rc = self._unit.control
        assert rc is not None
        steps = min(max(math.trunc(0.7 * abs(self.pending_pu) / self._increment), 1), rc.maxtapchange)
        self.pending_pu, direction = 0.0, 1 if self.pending_pu > 0 else -1
        info = self._bank.info
        tap = self._regulators.unit_tap(self._unit, switching)
        new = min(max(tap + direction * steps, info.min_tap), info.max_tap)
        units = self._bank.units if self._bank.ganged else [self._unit]
        return Changes(taps={(x.transformer, x.k): new for x in units})


class _Capacitor:
    """A CapControl in static mode."""

    def __init__(self, control: CapacitorControl) -> None:
        self.name = f"capcontrol {control.model.name}"
        self._control = control
        self.start()

    def start(self) -> None:
        self._control.pending = None
        self._control.last_open_s = OPENDSS_FIRST_OPENING_S
        self.handle: int | None = None
        self.closed = False

    def sample(self, queue: ControlQueue, t_s: float, v: np.ndarray, switching: Switching) -> None:
        c = self._control
        self.closed = switching.capacitors[c.capacitor.name]
        c.pending = c.asks(self.closed, v, switching)
        if c.pending is not None and self.handle is None:
            self.handle = queue.push(t_s + c.delay_s(t_s), self, _SWITCH)
        elif c.pending is None and self.handle is not None:
            queue.delete(self.handle)
            self.handle = None

    def act(self, code: int, t_s: float, switching: Switching) -> Changes:
        c = self._control
        self.handle = None
        # as sampled: the state another control of the same capacitor may have changed since is not read
        if c.pending is None or c.pending == self.closed:
            return Changes()
        if not c.pending:
            c.last_open_s = t_s
        return Changes(capacitors={c.capacitor.name: c.pending})


class _Switch:
    """A SwtControl in static mode."""

    def __init__(self, model: SwtControlModel, line: str) -> None:
        self.name = f"swtcontrol {model.name}"
        self._model, self._line = model, line
        self.start()

    def start(self) -> None:
        self.closed = self._model.state == "closed"
        self.handle: int | None = None

    def sample(self, queue: ControlQueue, t_s: float, v: np.ndarray, switching: Switching) -> None:
        if (self._model.action == "close") != self.closed and self.handle is None:
            self.handle = queue.push(t_s + self._model.delay_s, self, _SWITCH)

    def act(self, code: int, t_s: float, switching: Switching) -> Changes:
        if self._model.locked:  # OpenDSS leaves it armed: it asks no more
            return Changes()
        self.handle = None
        close = self._model.action == "close"
        if close == self.closed:
            return Changes()
        self.closed = close
        return Changes(lines={self._line: close})


def unsupported_swtcontrol(sc: SwtControlModel, model: FeederModel) -> str | None:
    """Why ``sc`` cannot run on ``model``, or None when it can: it must switch a line of the feeder
    at one of its two terminals."""
    kind, _, name = sc.element.partition(".")
    if kind != "line" or not any(ln.name == name for ln in model.lines):
        return f"swtcontrol {sc.name} switches {sc.element!r}; openg2g operates switch controls on the feeder's lines"
    if sc.terminal not in (1, 2):
        return f"swtcontrol {sc.name}: terminal {sc.terminal} of {sc.element} (a line has terminals 1 and 2)"
    return None


def unsupported_static_controls(model: FeederModel, held: Collection[str] = ()) -> list[str]:
    """Why each control of ``model`` that would act in static mode cannot run (empty when all can):
    the RegControls of transformers other than ``held``, every CapControl and SwtControl."""
    transformers = {t.name: t for t in model.transformers}
    problems = [
        why
        for rc in model.regcontrols
        if rc.transformer not in held and (why := unsupported_regcontrol(rc, transformers[rc.transformer]))
    ]
    problems += [why for cc in model.capcontrols if (why := unsupported_capcontrol(cc, model))]
    problems += [why for sc in model.swtcontrols if (why := unsupported_swtcontrol(sc, model))]
    return problems


class StaticControls:
    """Every RegControl, CapControl and SwtControl of a feeder, run as OpenDSS's static mode does
    (see the module docstring).

    :param model: the feeder.
    :param nodes: its node numbering.
    :param regulators: its regulator banks (with the scenario's tap ranges and control overrides).
    :param held: banks whose RegControls do not act (their taps stay).
    :raises FeederError: a control openg2g cannot run (named, with why).
    """

    def __init__(
        self, model: FeederModel, nodes: NodeIndex, regulators: Regulators, held: Collection[str] = ()
    ) -> None:
        held_banks = [regulators.banks[name] for name in held]
        problems = unsupported_static_controls(model, {u.transformer for b in held_banks for u in b.units})
        if problems:
            raise FeederError(f"feeder {model.name}: the controls cannot settle (static mode): {'; '.join(problems)}")
        controls: list[_Control] = [
            _Regulator(regulators, bank, unit)
            for name, bank in regulators.banks.items()
            if name not in held
            for unit in bank.controlled
        ]
        controls.extend(_Capacitor(c) for c in CapacitorControls(model, nodes).controls)
        controls.extend(_Switch(sc, sc.element.partition(".")[2]) for sc in model.swtcontrols)
        self.controls: tuple[_Control, ...] = tuple(controls)
        self.switched_lines = tuple(dict.fromkeys(sc.element.partition(".")[2] for sc in model.swtcontrols))
        """The lines a SwtControl operates."""
        self._feeder = model.name

    def settle(
        self,
        t_s: float,
        switching: Switching,
        solve: Callable[[], Solution],
        put_in_force: Callable[[Changes], None],
        max_iterations: int,
    ) -> tuple[Solution, int]:
        """Solve and let the controls act until none does (see the module docstring).

        :param t_s: the time of the solve (s); the actions' due times count from it.
        :param switching: the switching in force, which ``put_in_force`` updates.
        :param solve: one power flow at the switching in force.
        :param put_in_force: puts an action's changes in force (in ``switching`` and the network).
        :param max_iterations: the most solves (OpenDSS's ``maxcontroliter``).
        :return: the last solution (not converged when a solve fails, which ends the settle) and
            the number of solves (OpenDSS's control iterations).
        :raises SimulationError: the controls still act after ``max_iterations`` solves; the
            message names those that acted last.
        :raises ValueError: ``max_iterations`` below 1.
        """
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        for c in self.controls:
            c.start()
        queue = ControlQueue()
        acted: list[str] = []
        for iteration in range(1, max_iterations + 1):
            sol = solve()
            if not sol.converged or iteration == max_iterations:
                break
            v = sol.v[:, 0]
            for c in self.controls:
                c.sample(queue, t_s, v, switching)
            if not queue:
                return sol, iteration
            acted = []
            for action in queue.pop_nearest():
                changes = action.owner.act(action.code, t_s, switching)
                acted.extend(_described(action.owner.name, changes))
                put_in_force(changes)
        if not sol.converged:
            return sol, iteration
        raise SimulationError(
            f"t={t_s} s, feeder {self._feeder}: the controls have not settled in {max_iterations} control "
            f"iterations (maxcontroliter: the controls sample after every solve but the last, and OpenDSS warns "
            f"'Max Control Iterations Exceeded'); the last round: {', '.join(acted) or 'no change'} "
            "(allow more iterations, or widen a band)"
        )


def _described(owner: str, changes: Changes) -> list[str]:
    """What an action changes, in words."""
    out = [f"{owner} to tap {step}" for step in dict.fromkeys(changes.taps.values())]
    out += [f"{owner} {'closes' if c else 'opens'} capacitor {n}" for n, c in changes.capacitors.items()]
    out += [f"{owner} {'closes' if c else 'opens'} line {n}" for n, c in changes.lines.items()]
    return out
