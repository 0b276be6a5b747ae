"""Voltage zones and sensitivities shared by the stock controllers.

A *zone* is a list of buses; its bus-phases are the monitored ``"<bus>.<phase>"`` entries of the
context whose bus is in the list (case-insensitive). Violation measures are those of the engine
(:func:`openg2g.record.metrics.violation_pu`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openg2g.core.errors import ControllerError
from openg2g.core.state import Observation

__all__ = ["SensitivityCache", "bus_of", "grid_share", "zone_indices"]


def bus_of(bus_phase: str) -> str:
    """The bus part of ``"<bus>.<phase>"`` (lower case)."""
    return bus_phase.rsplit(".", 1)[0].lower()


def zone_indices(bus_phases: Sequence[str], buses: Sequence[str] | None) -> np.ndarray:
    """Indices into ``bus_phases`` of the zone's bus-phases; ``buses=None`` selects all.

    :raises ControllerError: a listed bus has no monitored phase (the message lists valid buses).
    """
    if buses is None:
        return np.arange(len(bus_phases))
    wanted = [b.lower() for b in buses]
    known = [bus_of(bp) for bp in bus_phases]
    missing = [b for b in wanted if b not in known]
    if missing:
        valid = sorted(set(known))
        raise ControllerError(f"buses {missing} are not monitored; valid buses: {valid}")
    return np.array([i for i, b in enumerate(known) if b in wanted], dtype=int)


def grid_share(observation: Observation, site: str) -> float:
    """The share of the site's load the grid carries now: 1 for a site without a ride-through,
    else its blocks' grid draw fractions weighted by their shares (0 with every block on its UPS)."""
    state = observation.ride_through.get(site)
    if state is None:
        return 1.0
    blocks = state.blocks.values()
    return sum(b.fraction * b.grid_fraction for b in blocks) / sum(b.fraction for b in blocks)


class SensitivityCache:
    """Zone rows of ``observation.voltage_sensitivity(site)``, refreshed every ``every_steps`` steps.

    :param zone: bus-phase indices to keep (see :func:`zone_indices`).
    :param every_steps: refresh period in control steps (1 = every step).
    """

    def __init__(self, zone: np.ndarray, every_steps: int = 1) -> None:
        if every_steps < 1:
            raise ValueError(f"every_steps must be >= 1, got {every_steps}")
        self.zone = zone
        self.every_steps = every_steps
        self._cache: dict[str, tuple[int, np.ndarray]] = {}

    def get(self, observation: Observation, site: str, step: int) -> np.ndarray:
        """The ``(len(zone), 3)`` sensitivity of the zone to the site's per-phase power (pu/W),
        times the share of that power the grid sees (:func:`grid_share`: a block on its UPS
        moves no grid power when its batch sizes change)."""
        cached = self._cache.get(site)
        due = step % self.every_steps == 0
        if cached is None or (due and cached[0] != step):
            h = np.asarray(self._matrix(observation, site), dtype=float)[self.zone]
            self._cache[site] = (step, h)
        else:
            h = cached[1]
        share = grid_share(observation, site)
        return h if share == 1.0 else h * share

    def _matrix(self, observation: Observation, site: str) -> np.ndarray:
        """The whole sensitivity matrix the zone's rows are taken from."""
        return observation.voltage_sensitivity(site)
