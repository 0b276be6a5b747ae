"""Batteries on the feeder: power rating, state of charge and its limits, and how a setpoint moves it.

A battery draws its setpoint as a constant-PQ wye injection (``p_w > 0`` discharges into the
grid). At each solve its state of charge first moves by the active power in force over the time
since the previous solve (:meth:`Battery.advance`); reaching ``soc_min`` while discharging or
``soc_max`` while charging stops it: the active power delivered drops to 0 from that solve on,
while the setpoint stays what was commanded and the state reports the limit
(:class:`~openg2g.core.state.StorageState`), until a new command. Reactive power is held at any
state of charge. Losses are a one-way efficiency: discharging takes ``p / efficiency`` from the
cells, charging stores ``p * efficiency``, so over ``dt`` seconds at ``p`` W::

    soc -= p dt / (3600 efficiency capacity_wh)     (discharging, p > 0)
    soc -= p dt efficiency / (3600 capacity_wh)     (charging, p < 0)

clamped to ``[soc_min, soc_max]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from openg2g.core.errors import CommandError
from openg2g.core.state import StorageLimit, StorageState, StorageUnit
from openg2g.grid.config import StorageSpec

__all__ = ["Battery"]

_RATING_TOL = 1e-9
"""Relative slack on the rating check, so a setpoint at the rating computed in kW and sent in W passes."""


@dataclass
class Battery:
    """One battery and its present state.

    :param unit: its fixed facts (name, bus, rating, capacity, limits, efficiency).
    :param soc0: initial state of charge (fraction of the capacity).
    :param soc: present state of charge (fraction).
    :param p_w: active power delivered (W, > 0 discharges into the grid): the setpoint, or 0
        once a state-of-charge limit stopped it.
    :param q_var: reactive power setpoint (var, > 0 injects into the grid).
    :param p_set_w: active power setpoint last commanded (W).
    :param limit: the limit that stopped the active power, ``None`` while it follows the setpoint.
    """

    unit: StorageUnit
    soc0: float
    soc: float = 0.0
    p_w: float = 0.0
    q_var: float = 0.0
    p_set_w: float = 0.0
    limit: StorageLimit | None = None
    _capacity_wh: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._capacity_wh = self.unit.capacity_kwh * 1000.0

    @classmethod
    def from_spec(cls, spec: StorageSpec) -> Battery:
        """The battery of a scenario's ``grid.storage`` entry, at its initial state of charge."""
        unit = StorageUnit(spec.name, spec.bus, spec.kw * 1000.0, spec.kwh, spec.soc_min, spec.soc_max, spec.efficiency)
        return cls(unit, spec.soc0, soc=spec.soc0)

    def reset(self) -> None:
        """Initial state of charge, no setpoint."""
        self.soc, self.p_w, self.q_var, self.p_set_w, self.limit = self.soc0, 0.0, 0.0, 0.0, None

    def set_power(self, p_w: float, q_var: float) -> None:
        """Hold the setpoint ``p_w`` (W) and ``q_var`` (var) from now on.

        :raises CommandError: ``|p_w + j q_var|`` exceeds the rating.
        """
        if math.hypot(p_w, q_var) > self.unit.rating_va * (1 + _RATING_TOL):
            raise CommandError(
                f"set_storage_power {self.unit.name}: |{p_w} W + j{q_var} var| exceeds the "
                f"{self.unit.rating_va:g} W rating"
            )
        self.p_w, self.q_var = float(p_w), float(q_var)
        self.p_set_w, self.limit = self.p_w, None

    def advance(self, dt_s: float) -> None:
        """Move the state of charge by ``dt_s`` (s) at the power in force; at a limit, stop (P 0)."""
        if self.p_w == 0.0 or dt_s <= 0:
            return
        u = self.unit
        if self.p_w > 0:  # discharging: the cells give more than the grid receives
            d_soc = -self.p_w * dt_s / 3600.0 / u.efficiency / self._capacity_wh
        else:
            d_soc = -self.p_w * dt_s / 3600.0 * u.efficiency / self._capacity_wh
        self.soc = min(max(self.soc + d_soc, u.soc_min), u.soc_max)
        if self.p_w > 0 and self.soc <= u.soc_min:
            self.p_w, self.limit = 0.0, "soc_min"
        elif self.p_w < 0 and self.soc >= u.soc_max:
            self.p_w, self.limit = 0.0, "soc_max"

    def state(self) -> StorageState:
        """The battery as a grid state reports it."""
        return StorageState(self.unit, self.p_w, self.q_var, self.p_set_w, self.soc, self.limit)
