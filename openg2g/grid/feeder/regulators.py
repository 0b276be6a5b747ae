"""Voltage regulators: banks, their units, tap positions, and the automatic band control.

A bank is one regulator as the feeder names it (``reg1``); it regulates one or more phases, each
a *unit* (a single-phase transformer, or one phase of a three-phase one) with its own OpenDSS
``RegControl``. A ganged bank (one three-phase transformer) has one tap for all its phases.

Tap positions are integer *tap steps*; the ratio in force, in pu, lives in the network's
:class:`~openg2g.grid.feeder.network.Switching` (``1 + step * step_pu``), which the grid backend owns
because a tap change also updates the compiled network. This module decides steps; the backend
puts them in force.

Automatic control (``mode: auto``): a unit compares its line-drop-compensated voltage with its
band (RegControl vreg/band/ptratio/ctprim/R/X from the feeder file, vreg/band overridable in the
scenario) and moves one step after the voltage has been outside the band for its delay (the
RegControl ``delay`` of the feeder file, unless the scenario sets ``delay_s``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from openg2g.core.errors import CommandError, FeederError
from openg2g.core.interfaces import RegulatorInfo
from openg2g.grid.config import RegulatorSpec
from openg2g.grid.feeder.library import Feeder
from openg2g.grid.feeder.model import RegControlModel, TransformerModel
from openg2g.grid.feeder.network import NodeIndex, Switching, transformer_winding_admittance, winding_voltage
from openg2g.grid.feeder.powerflow import Solution

__all__ = ["RegulatorBank", "RegulatorUnit", "Regulators", "UnitKey"]

UnitKey = tuple[str, int]
"""A regulated phase: ``(transformer name, phase index within the transformer)``."""

_TIMER_TOL_S = 1e-9
"""Slack on the delay comparison, so a delay that is a whole number of steps is not missed by rounding (s)."""


@dataclass
class RegulatorUnit:
    """One regulated phase: transformer, its phase index, its control, and the time spent outside the band."""

    transformer: str
    k: int
    control: RegControlModel | None
    timer_s: float = 0.0


@dataclass
class RegulatorBank:
    """One regulator bank: its facts, its units, and the scenario's settings (None = the feeder's)."""

    info: RegulatorInfo
    units: list[RegulatorUnit]
    mode: str = "fixed"
    vreg_v: float | None = None
    band_v: float | None = None
    delay_s: float | None = None
    ganged: bool = False
    initial_taps: tuple[int, ...] = field(default_factory=tuple)
    initial_mode: str = "fixed"

    def reset_timers(self) -> None:
        """Forget the time spent outside the band (a mode switch or a reset starts the count anew)."""
        for u in self.units:
            u.timer_s = 0.0


class Regulators:
    """The regulator banks of a feeder with the scenario's initial settings.

    :param feeder: the feeder.
    :param specs: the scenario's ``grid.regulators`` (bank name, any case -> settings).
    :raises FeederError: a bank's initial taps lie outside the scenario's tap range.
    """

    def __init__(self, feeder: Feeder, specs: Mapping[str, RegulatorSpec]) -> None:
        model = feeder.model
        controls = {rc.transformer: rc for rc in model.regcontrols}
        self._transformers = {t.name: t for t in model.transformers}
        taps0 = Switching.initial(model).taps_pu
        self.banks: dict[str, RegulatorBank] = {}
        for name, info in feeder.regulators.items():
            units = [RegulatorUnit(t, k, controls.get(t)) for t, k in feeder.bank_units[name]]
            bank = RegulatorBank(info=info, units=units, ganged=feeder.is_ganged(name))
            taps = tuple(self.tap_step(u.transformer, float(taps0[u.transformer][u.k])) for u in units)
            spec = specs.get(name) or next((v for k, v in specs.items() if k.lower() == name), None)
            if spec is not None:
                taps = self._configure(bank, spec, taps)
            bank.initial_taps = taps
            self.banks[name] = bank

    @staticmethod
    def _configure(bank: RegulatorBank, spec: RegulatorSpec, taps: tuple[int, ...]) -> tuple[int, ...]:
        """Apply a bank's scenario settings; return its initial taps."""
        if spec.taps is not None:
            taps = tuple(spec.taps)
        bank.initial_mode = spec.mode
        bank.vreg_v, bank.band_v, bank.delay_s = spec.vreg_v, spec.band_v, spec.delay_s
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
        return {
            name: tuple(self.tap_step(u.transformer, float(switching.taps_pu[u.transformer][u.k])) for u in b.units)
            for name, b in self.banks.items()
        }

    def info(self) -> dict[str, RegulatorInfo]:
        """Bank name -> its facts (phases, tap range after the scenario's overrides)."""
        return {name: b.info for name, b in self.banks.items()}

    def all_fixed(self) -> bool:
        """True when no bank is in auto mode (steps of a run are then independent)."""
        return all(b.mode == "fixed" for b in self.banks.values())

    def reset(self) -> dict[UnitKey, int]:
        """Initial modes, timers at zero; return the initial tap step of every unit."""
        steps: dict[UnitKey, int] = {}
        for bank in self.banks.values():
            bank.mode = bank.initial_mode
            bank.reset_timers()
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
    def regulate(self, sol: Solution, dt_s: float, switching: Switching, nodes: NodeIndex) -> dict[UnitKey, int]:
        """Advance the band timers of the banks in auto mode by ``dt_s`` (s) after the solve ``sol``
        and return the tap moves due (unit -> new tap step; empty when none)."""
        moves: dict[UnitKey, int] = {}
        for bank in self.banks.values():
            if bank.mode != "auto":
                continue
            for u in bank.units[:1] if bank.ganged else bank.units:
                rc = u.control
                if rc is None:
                    continue
                step = self._unit_move(bank, u, rc, self._control_voltage(u, rc, sol, switching, nodes), dt_s)
                if step == 0:
                    continue
                for tu in bank.units if bank.ganged else [u]:
                    cur = self.tap_step(tu.transformer, float(switching.taps_pu[tu.transformer][tu.k]))
                    moves[(tu.transformer, tu.k)] = min(max(cur + step, bank.info.min_tap), bank.info.max_tap)
        return moves

    @staticmethod
    def _unit_move(bank: RegulatorBank, u: RegulatorUnit, rc: RegControlModel, v120: float, dt_s: float) -> int:
        """+1 or -1 when the unit's delay outside the band has run out, else 0 (and update its timer)."""
        vreg = bank.vreg_v if bank.vreg_v is not None else rc.vreg_v
        band = bank.band_v if bank.band_v is not None else rc.band_v
        delay = bank.delay_s if bank.delay_s is not None else rc.delay_s
        if abs(v120 - vreg) <= band / 2.0:
            u.timer_s = 0.0
            return 0
        u.timer_s += dt_s
        if u.timer_s + _TIMER_TOL_S < delay:
            return 0
        u.timer_s = 0.0
        return 1 if v120 < vreg else -1

    def _control_voltage(
        self, u: RegulatorUnit, rc: RegControlModel, sol: Solution, switching: Switching, nodes: NodeIndex
    ) -> float:
        """Line-drop-compensated regulator voltage on the 120 V base (V)."""
        t = self._transformers[u.transformer]
        k = u.k if not (t.n_phases > 1) else int(rc.ptphase) - 1
        v1, v2 = (winding_voltage(t, w, k, sol.v[:, 0], nodes) for w in (0, 1))
        y, a = transformer_winding_admittance(t, float(switching.taps_pu[t.name][k]))
        i_line = y * (v1 / a - v2)
        v_ctrl = v2 / rc.ptratio - complex(rc.r_v, rc.x_v) * i_line / rc.ctprim_a
        return float(abs(v_ctrl))
