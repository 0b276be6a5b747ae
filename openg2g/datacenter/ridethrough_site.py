"""A site backend with a ride-through: any site (the replay, :class:`openg2g.testing.ToySite`)
whose load leaves the grid and returns as its blocks' curves, UPS and return say.

:class:`RideThroughSite` wraps the inner site and the state machine
(:class:`~openg2g.datacenter.ridethrough_machine.RideThrough`). The engine calls, in time order,
:meth:`RideThroughSite.observe_grid` after every grid solve (the site bus's phase voltages and
the system frequency) and :meth:`RideThroughSite.step_block` for the steps up to the next
solve; what a solve decides acts from the next step on. Per step, with the machine's grid draw
fraction ``g``, serving fraction ``s`` and chargers' power ``R`` (W):

- per phase ``p = g p_inner + R / 3`` and ``q = g q_inner + (R / 3) tan(acos(pf))``: the load
  keeps the inner site's reactive ratio, the chargers draw at the site's power factor;
- every model's replicas, GPU power and throughput, and the training job's power, times ``s``;
  the ITL is NaN and no token misses its deadline where ``s`` is 0.

A supply loss (:meth:`RideThroughSite.set_supply`) is 0 pu at the bus for the ride-through (a
UPS block carries its load on, the others serve nothing), not the inner site's blackout: the
inner site runs on unaware, so its commanded state and random draws are those of a run without
the loss. Steps without supply draw nothing and are marked ``supplied`` False.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from openg2g.core.commands import Command, ReleaseBlock
from openg2g.core.errors import CommandError
from openg2g.core.interfaces import DatacenterBackend, RideThroughInfo, SiteInfo
from openg2g.core.state import DatacenterSeries, DatacenterState, ModelSeries, frozen_array
from openg2g.datacenter.ridethrough import RideThroughSpec
from openg2g.datacenter.ridethrough_machine import (
    EnergyTotals,
    RideThrough,
    RideThroughEvent,
    RideThroughState,
    StepFactors,
    Transition,
)

__all__ = ["RideThroughSite"]


class RideThroughSite(DatacenterBackend):
    """``inner`` with the ride-through ``spec`` (see the module docstring).

    :param inner: the site whose load the blocks share; it keeps its name and its facts.
    :param spec: the site's ride-through configuration.
    """

    grid_feedback = True
    """The site's draw follows the grid: the engine is to call :meth:`observe_grid` after every
    solve, before the steps after it (the disturbance engine reads this flag)."""

    def __init__(self, inner: DatacenterBackend, spec: RideThroughSpec):
        self.inner = inner
        self.name = inner.name
        self.spec = spec
        self.machine = RideThrough(spec, inner.name)
        self._q_per_p = math.tan(math.acos(inner.info().power_factor))
        self.supplied = True

    def info(self) -> SiteInfo:
        """The inner site's facts, with its ride-through's."""
        band = self.spec.return_to_service
        blocks = self.spec.blocks
        return replace(
            self.inner.info(),
            ride_through=RideThroughInfo(
                blocks={b.name: b.fraction for b in blocks},
                actions={b.name: b.action for b in blocks},
                return_mode=band.mode,
                ramp_s=band.ramp_s,
            ),
        )

    def reset(self, seed: int) -> None:
        """Reset the inner site (with ``seed``) and the ride-through: every block online, every
        UPS full, supplied."""
        self.inner.reset(seed)
        self.machine.reset()
        self.supplied = True

    def set_supply(self, supplied: bool, t_s: float) -> None:
        """The bus lost or regained supply at ``t_s``: 0 pu for the ride-through from the next
        solve on, and no draw from the next step on; the inner site is not told."""
        self.supplied = supplied

    def observe_grid(self, t_s: float, dt_s: float, v_pu: Sequence[float] | np.ndarray, f_hz: float | None) -> None:
        """A grid solve at ``t_s`` for the step ``(t_s - dt_s, t_s]``: the phase-to-neutral
        voltage magnitudes at the site's bus, a, b, c (pu; read as zeros while the bus has no
        supply), and the system frequency (Hz; ``None`` without a frequency model: the spec's
        ``nominal_hz``). What it decides acts from the next step on; its transitions come with
        :meth:`take_transitions`.

        :raises SimulationError: see :meth:`RideThrough.observe`.
        """
        f = self.spec.nominal_hz if f_hz is None else f_hz
        self.machine.observe(t_s, dt_s, np.zeros(3) if not self.supplied else v_pu, f)

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        """One step ``(t_s - dt_s, t_s]``, as :meth:`step_block` of one."""
        return self.step_block(np.array([t_s]), dt_s).state(0)

    def step_block(self, t_s: np.ndarray, dt_s: float) -> DatacenterSeries:
        """The inner site's steps ending at ``t_s`` with the ride-through applied."""
        inner = self.inner.step_block(t_s, dt_s)
        tokens = np.zeros(len(inner))
        for m in inner.models.values():
            tokens += m.throughput_tok_s * dt_s
        factors = self.machine.advance(inner.t_s, dt_s, inner.power_w, tokens, self.supplied)
        return self._applied(inner, factors)

    def _applied(self, inner: DatacenterSeries, factors: StepFactors) -> DatacenterSeries:
        if factors.steady:
            return inner
        g, s, recharge_w = factors.grid_fraction, factors.serving_fraction, factors.recharge_w
        supplied = frozen_array(np.full(len(inner), self.supplied), bool)
        charger = (recharge_w / 3.0)[:, None]
        idle = s == 0
        models: dict[str, ModelSeries] = {}
        for name, m in inner.models.items():
            models[name] = replace(
                m,
                replicas=m.replicas * s,
                power_w=m.power_w * s,
                throughput_tok_s=m.throughput_tok_s * s,
                itl_s=np.where(idle, np.nan, m.itl_s),
                deadline_miss_fraction=np.where(idle, 0.0, m.deadline_miss_fraction),
            )
        return replace(
            inner,
            p_w=g[:, None] * inner.p_w + charger,
            q_var=g[:, None] * inner.q_var + charger * self._q_per_p,
            models=models,
            training_power_w=inner.training_power_w * s,
            supplied=supplied,
        )

    def apply(self, command: Command, t_s: float) -> None:
        """A :class:`ReleaseBlock` releases one of the blocks (:meth:`RideThrough.release`); every
        other command goes to the inner site.

        :raises CommandError: a release for another site, or one the ride-through refuses.
        """
        if isinstance(command, ReleaseBlock):
            if command.site != self.name:
                raise CommandError(f"ReleaseBlock for site {command.site!r} delivered to site {self.name!r}")
            self.machine.release(command.block, command.ramp_s, t_s)
            return
        self.inner.apply(command, t_s)

    # ------------------------------------------------------------------ what the engine reads

    @property
    def ride_through_state(self) -> RideThroughState:
        """The blocks now, read-only (for controllers' observations)."""
        return self.machine.state()

    def take_records(self) -> dict[str, np.ndarray]:
        """The per-step, per-block records since the last call (:meth:`RideThrough.take_records`)."""
        return self.machine.take_records()

    def take_transitions(self) -> list[Transition]:
        """The transitions since the last call, for the events table."""
        return self.machine.take_transitions()

    def events(self) -> list[RideThroughEvent]:
        """Every event since the reset (:class:`RideThroughEvent`)."""
        return self.machine.events()

    @property
    def totals(self) -> EnergyTotals:
        """The site's energy and tokens since the reset."""
        return self.machine.totals

    def summary(self) -> dict[str, Any]:
        """The figures for a run summary: the events, and the run's totals in kWh and tokens."""
        return {"events": [e.as_dict() for e in self.events()], **self.machine.totals.as_dict()}
