"""Bring datacenter load back after a disturbance: one block at a time, within a ramp limit, once
the grid has settled.

After a fault, blocks of a site's ride-through (``datacenters[*].ride_through``, return mode
``commanded``) wait off the grid until released. Released all at once, every campus of a region
would return in the same minute and ramp the bulk system and the feeder as hard as it lost them.
This controller releases them one at a time:

- a block is **ready** when its site reports it ``waiting_return`` (its supply back inside the
  return band for the band's ``delay_s``) and no release for it is pending;
- the grid is **settled** when, for the last ``settle_s`` seconds, every monitored voltage has
  stayed inside the scenario's limits, no regulator tap has moved (the feeder's regulators have
  finished answering the last change) and, with a frequency model, the frequency has stayed within
  ``frequency_band_hz`` of nominal;
- while the grid is settled and no released block is still ramping, the first ready block (sites
  in the order of ``sites``, blocks in their listed order) is released with the ramp that keeps the
  returning load's rise at ``max_ramp_mw_per_min``: ``ramp_s = 60 * block_mw / max_ramp_mw_per_min``
  (at least ``min_ramp_s``), ``block_mw`` being the block's share of the site's draw at the last
  control step with every block online (its pre-disturbance load). The next release waits for the
  ramp's end plus ``stagger_s``, and for the grid to settle again.

A block's UPS recharge starts when its ramp ends and adds its charger's load; the settling wait
that follows lets the grid absorb it before the next block.

A grid that never settles (a feeder whose voltages stay outside the limits with the load back)
must not hold the blocks off until their UPS run out: a ready block whose UPS has fallen to
``release_below_soc`` of its energy, or that has waited ``max_wait_s`` since it became ready, is
released without waiting for the grid to settle (still one at a time, within the ramp limit).
"""

from __future__ import annotations

import math

from pydantic import Field

from openg2g.core.commands import Actuator, Command, ReleaseBlock
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ConfiguredController, ControllerConfig

__all__ = ["ReturnCoordinator"]


class ReturnCoordinator(ConfiguredController):
    """Releases ride-through blocks one at a time within a ramp limit, after the grid has settled."""

    name = "return_coordinator"

    class Config(ControllerConfig):
        """Parameters of :class:`ReturnCoordinator`."""

        sites: list[str] | None = Field(
            None,
            description="Sites whose blocks it releases, in priority order; None: every site with a commanded return.",
        )
        max_ramp_mw_per_min: float = Field(
            30.0, gt=0, le=1e5, description="Rise of the returning load, all sites together (MW per minute)."
        )
        settle_s: float = Field(
            30.0,
            ge=0,
            le=86_400,
            description="Time the voltages (and frequency) must stay in band and the taps still before a release (s).",
        )
        stagger_s: float = Field(
            0.0, ge=0, le=86_400, description="Wait after a ramp's end before the next release (s)."
        )
        min_ramp_s: float = Field(1.0, gt=0, le=86_400, description="Shortest ramp it gives a block (s).")
        release_below_soc: float = Field(
            0.25,
            ge=0,
            lt=1,
            description="A ready block whose UPS is below this state of charge goes without waiting to settle.",
        )
        max_wait_s: float = Field(
            600.0,
            gt=0,
            le=86_400,
            description="A ready block that has waited this long goes without waiting to settle (s).",
        )
        frequency_band_hz: float = Field(
            0.1,
            gt=0,
            le=10,
            description="Largest deviation from nominal that counts as settled (Hz), with a frequency model.",
        )

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        commanded = [
            name
            for name, info in context.sites.items()
            if info.ride_through is not None and info.ride_through.return_mode == "commanded"
        ]
        names = list(self.config.sites) if self.config.sites is not None else commanded
        for name in names:
            if name not in context.sites:
                raise ControllerError(f"{self.name}: unknown site {name!r}; sites: {list(context.sites)}")
            if name not in commanded:
                raise ControllerError(
                    f"{self.name}: site {name!r} has no ride-through whose blocks wait to be released "
                    "(datacenters[*].ride_through.return_to_service.mode commanded)"
                )
        if not names:
            raise ControllerError(f"{self.name}: no site has a ride-through with a commanded return")
        self._names = names
        self._site_mw: dict[str, float] = {}
        self._last_taps: object = None
        self._unsettled_s = -math.inf  # the last control step at which the grid was not settled
        self._busy_until_s = -math.inf  # the end of the last release's ramp, plus the stagger

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("ride_through", (name,)) for name in self._names)

    def _settled(self, observation: Observation) -> bool:
        """Whether the grid has been settled for ``settle_s`` (module docstring), updating the watch."""
        t, grid = observation.t_s, observation.grid
        v = grid.v_pu
        taps = dict(grid.taps)
        calm = bool(
            grid.converged
            and v.size
            and float(v.min()) >= observation.v_min_pu
            and float(v.max()) <= observation.v_max_pu
        )
        if self._last_taps is not None and taps != self._last_taps:
            calm = False
        self._last_taps = taps
        f0 = self.context.f0_hz
        if observation.f_hz is not None and f0 is not None:
            calm = calm and abs(observation.f_hz - f0) <= self.config.frequency_band_hz
        if not calm:
            self._unsettled_s = t
        return t - self._unsettled_s >= self.config.settle_s

    def step(self, observation: Observation) -> list[Command]:
        t = observation.t_s
        for name in self._names:
            state = observation.ride_through[name]
            if state.online_fraction == 1.0:  # every block on the grid: the site's draw is its load
                self._site_mw[name] = observation.datacenters[name].power_w / 1e6
        settled = self._settled(observation)
        returning = any(
            b.mode == "returning" for name in self._names for b in observation.ride_through[name].blocks.values()
        )
        if returning or t < self._busy_until_s:
            return []
        for name in self._names:
            for block, status in observation.ride_through[name].blocks.items():
                if status.mode != "waiting_return" or status.release_pending:
                    continue
                low = status.state_of_charge is not None and status.state_of_charge <= self.config.release_below_soc
                if not (settled or low or status.time_in_mode_s >= self.config.max_wait_s):
                    continue
                block_mw = status.fraction * self._site_mw.get(name, 0.0)
                ramp_s = max(self.config.min_ramp_s, 60.0 * block_mw / self.config.max_ramp_mw_per_min)
                self._busy_until_s = t + ramp_s + self.config.stagger_s
                return [ReleaseBlock(site=name, block=block, ramp_s=ramp_s)]
        return []
