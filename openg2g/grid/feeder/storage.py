"""Batteries on the feeder: power rating, state of charge and its limits, and how a setpoint moves it.

A battery draws its setpoint as a constant-PQ wye injection (``p_w > 0`` discharges into the
grid) until the command changes it or the state of charge reaches a limit, which stops it
(the setpoint returns to zero; the controller must send a new one). Losses are a one-way
efficiency: discharging takes ``p / efficiency`` from the cells, charging stores
``p * efficiency``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from openg2g.core.errors import CommandError
from openg2g.grid.config import StorageSpec

__all__ = ["Battery"]

_RATING_TOL = 1e-9
"""Relative slack on the rating check, so a setpoint at the rating computed in kW and sent in W passes."""


@dataclass
class Battery:
    """One battery and its present state.

    :param name: battery name, as in the scenario.
    :param rating_w: charge and discharge rating, a limit on ``|P + jQ|`` (W, VA).
    :param capacity_wh: energy capacity (Wh).
    :param soc0: initial state of charge (fraction of the capacity).
    :param soc_min: lowest state of charge; discharging stops there.
    :param soc_max: highest state of charge; charging stops there.
    :param efficiency: one-way efficiency (fraction).
    :param soc: present state of charge (fraction).
    :param p_w: present active power setpoint (W, > 0 discharges into the grid).
    :param q_var: present reactive power setpoint (var, > 0 injects into the grid).
    """

    name: str
    rating_w: float
    capacity_wh: float
    soc0: float
    soc_min: float
    soc_max: float
    efficiency: float
    soc: float = 0.0
    p_w: float = 0.0
    q_var: float = 0.0

    @classmethod
    def from_spec(cls, spec: StorageSpec) -> Battery:
        """The battery of a scenario's ``grid.storage`` entry, at its initial state of charge."""
        return cls(
            spec.name,
            spec.kw * 1000.0,
            spec.kwh * 1000.0,
            spec.soc0,
            spec.soc_min,
            spec.soc_max,
            spec.efficiency,
            soc=spec.soc0,
        )

    def reset(self) -> None:
        """Initial state of charge, no setpoint."""
        self.soc, self.p_w, self.q_var = self.soc0, 0.0, 0.0

    def set_power(self, p_w: float, q_var: float) -> None:
        """Hold the setpoint ``p_w`` (W) and ``q_var`` (var) from now on.

        :raises CommandError: ``|p_w + j q_var|`` exceeds the rating.
        """
        if math.hypot(p_w, q_var) > self.rating_w * (1 + _RATING_TOL):
            raise CommandError(
                f"set_storage_power {self.name}: |{p_w} W + j{q_var} var| exceeds the {self.rating_w:g} W rating"
            )
        self.p_w, self.q_var = float(p_w), float(q_var)

    def advance(self, dt_s: float) -> None:
        """Move the state of charge by ``dt_s`` (s) at the setpoint; at a limit, stop (setpoint 0)."""
        if self.p_w == 0.0 or dt_s <= 0:
            return
        if self.p_w > 0:  # discharging: the cells give more than the grid receives
            d_soc = -self.p_w * dt_s / 3600.0 / self.efficiency / self.capacity_wh
        else:
            d_soc = -self.p_w * dt_s / 3600.0 * self.efficiency / self.capacity_wh
        self.soc = min(max(self.soc + d_soc, self.soc_min), self.soc_max)
        if (self.p_w > 0 and self.soc <= self.soc_min) or (self.p_w < 0 and self.soc >= self.soc_max):
            self.p_w = 0.0
