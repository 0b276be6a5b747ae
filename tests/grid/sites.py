"""The grid's view of a datacenter site, for grid tests that build a backend without a scenario."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Site:
    """What a grid backend reads of a site (:class:`openg2g.grid.config.GridSite`)."""

    name: str
    bus: str
    power_factor: float = 0.95
    load_model: Literal["constant_power", "opendss"] = "constant_power"
    vminpu: float = 0.95
    vmaxpu: float = 1.05
