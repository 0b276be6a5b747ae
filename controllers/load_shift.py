"""Load shifting: move replicas away from a site whose feeder zone is stressed.

Each site has a zone (``zones[site]``, default the site's own bus). A zone's *stress* is
``v_min + trigger_margin_pu - min v`` (> 0: too close to, or below, the lower limit). When the most
stressed site is stressed and another site's zone has at least ``receive_margin_pu`` of headroom
(``min v - v_min``), the controller sends one :class:`ShiftReplicas` of ``replicas_per_shift``
replicas of a model served at both sites (the one with the highest power per replica among
``models``, default all), from the stressed site to the site with the most headroom, ramping over
``ramp_s``. It then waits ``cooldown_s`` before the next shift, so that the grid shows the effect.

The controller never moves more than the active replicas of a model at the source, nor more than
``max_replicas_moved[model]`` in total from the configured counts (a site's GPU capacity is not in
:class:`~openg2g.core.interfaces.SiteInfo`, so it is bounded by this parameter). It does not move
replicas back on its own.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from openg2g.core.commands import Actuator, Command, ShiftReplicas
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ConfiguredController, ControllerConfig
from ._sites import active_replicas, model_actuators, site_models
from ._voltage import zone_indices

__all__ = ["LoadShiftController"]


class LoadShiftController(ConfiguredController):
    """Moves replicas between sites with :class:`ShiftReplicas` when one site's zone is stressed."""

    name = "load_shift"

    class Config(ControllerConfig):
        """Parameters of :class:`LoadShiftController`."""

        sites: list[str] | None = Field(None, description="Sites taking part (at least two); None = all.")
        zones: dict[str, list[str]] = Field(
            default_factory=dict, description="Site -> buses of its zone; a site not listed uses its own bus."
        )
        models: list[str] | None = Field(
            None, description="Models that may move; None = every model served at both ends."
        )
        trigger_margin_pu: float = Field(
            0.005, ge=0, description="A zone is stressed within this distance of v_min (pu)."
        )
        receive_margin_pu: float = Field(0.02, ge=0, description="Headroom a zone needs to receive replicas (pu).")
        replicas_per_shift: int = Field(10, gt=0, description="Replicas moved per command.")
        ramp_s: float = Field(30.0, ge=0, description="Ramp of each move (s).")
        cooldown_s: float = Field(60.0, ge=0, description="Minimum time between two moves (s).")
        max_replicas_moved: dict[str, int] = Field(
            default_factory=dict, description="Model -> largest net number moved into any one site (replicas)."
        )

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        if len(self._sites) < 2:
            raise ControllerError(f"load_shift needs at least two sites, got {self._sites}")
        unknown = [s for s in self.config.zones if s not in self._sites]
        if unknown:
            raise ControllerError(f"load_shift: zones given for sites {unknown} not in {self._sites}")
        self._zones = {
            s: zone_indices(context.bus_phases, self.config.zones.get(s, [context.sites[s].bus])) for s in self._sites
        }
        self._last_shift_s = -math.inf
        self._moved_in: dict[tuple[str, str], int] = {}

    def actuators(self) -> tuple[Actuator, ...]:
        movable = self.config.models
        keys = site_models(self.context, self._sites)
        return model_actuators("replicas", [(s, m) for s, m in keys if movable is None or m in movable])

    def _pick_model(self, src: str, dst: str, observation: Observation) -> str | None:
        src_info, dst_info = self.context.sites[src], self.context.sites[dst]
        candidates = [m for m in src_info.models if m in dst_info.models]
        if self.config.models is not None:
            candidates = [m for m in candidates if m in self.config.models]
        n = self.config.replicas_per_shift
        dc = observation.datacenters.get(src)
        usable = []
        for m in candidates:
            info = src_info.models[m]
            if active_replicas(dc, m, info.replicas) < n:
                continue
            limit = self.config.max_replicas_moved.get(m)
            if limit is not None and self._moved_in.get((dst, m), 0) + n > limit:
                continue
            usable.append((max(info.power_w) if info.power_w else 0.0, m))
        return max(usable)[1] if usable else None

    def step(self, observation: Observation) -> list[Command]:
        cfg = self.config
        if observation.t_s - self._last_shift_s < cfg.cooldown_s - 1e-9:
            return []
        v = observation.grid.v_pu
        headroom = {s: float(np.min(v[idx])) - observation.v_min_pu for s, idx in self._zones.items() if idx.size}
        if len(headroom) < 2:
            return []
        src = min(headroom, key=headroom.__getitem__)
        if headroom[src] > cfg.trigger_margin_pu:
            return []
        dst = max(headroom, key=headroom.__getitem__)
        if dst == src or headroom[dst] < cfg.receive_margin_pu:
            return []
        model = self._pick_model(src, dst, observation)
        if model is None:
            return []
        n = cfg.replicas_per_shift
        self._moved_in[(dst, model)] = self._moved_in.get((dst, model), 0) + n
        self._moved_in[(src, model)] = self._moved_in.get((src, model), 0) - n
        self._last_shift_s = observation.t_s
        return [ShiftReplicas(site=src, model=model, replicas=n, to_site=dst, ramp_s=cfg.ramp_s)]
