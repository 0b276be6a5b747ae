"""A datacenter site that draws a constant power: the smallest backend of one's own.

Registered as the ``constant`` datacenter plug-in (entry-point group ``openg2g.datacenters``), so a
scenario can place one without measured traces::

    datacenters:
      - {kind: constant, name: dc, bus: "671", params: {kw_per_phase: 500}}
"""

from __future__ import annotations

import math

import numpy as np

from openg2g.core.commands import Command
from openg2g.core.errors import CommandError
from openg2g.core.interfaces import DatacenterBackend, SiteInfo
from openg2g.core.state import DatacenterState

__all__ = ["ConstantSite"]


class ConstantSite(DatacenterBackend):
    """Draws ``kw_per_phase`` on each of phases a, b and c at ``power_factor`` (lagging), serves no
    model and takes no command.

    :param name: the site's name.
    :param bus: its three-phase bus.
    :param kw_per_phase: active power per phase (kW, >= 0).
    :param power_factor: (0, 1].
    """

    def __init__(self, name: str, bus: str, kw_per_phase: float = 100.0, power_factor: float = 0.95):
        if not (math.isfinite(kw_per_phase) and kw_per_phase >= 0):
            raise ValueError(f"kw_per_phase must be a finite number >= 0 kW, got {kw_per_phase}")
        if not 0 < power_factor <= 1:
            raise ValueError(f"power_factor must be in (0, 1], got {power_factor}")
        self.name = name
        self.bus = bus
        self.power_factor = power_factor
        self._p_w = np.full(3, kw_per_phase * 1e3)
        self._q_var = self._p_w * math.tan(math.acos(power_factor))

    def info(self) -> SiteInfo:
        return SiteInfo(self.name, self.bus, {}, self.power_factor, 1.0)

    def reset(self, seed: int) -> None:
        """Nothing to reset: the site has no state."""

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        return DatacenterState(self.name, t_s, self._p_w, self._q_var, {})

    def apply(self, command: Command, t_s: float) -> None:
        raise CommandError(f"site {self.name!r} draws a constant power and takes no command ({command})")
