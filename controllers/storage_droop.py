"""Battery volt-watt / volt-var droop from the local voltage, within what the state of charge allows.

With ``v`` the local voltage (mean or minimum of the phases of ``buses``) and ``d`` its distance
outside the deadband ``[v_ref - deadband, v_ref + deadband]`` (negative below, positive above,
0 inside)::

    p_kw   = clip(-droop_kw_per_pu   * d, -p_max_kw,   p_max_kw)     (> 0 discharges into the grid)
    q_kvar = clip(-droop_kvar_per_pu * d, -q_max_kvar, q_max_kvar)   (> 0 injects reactive power)

so low voltage discharges and injects vars, high voltage charges and absorbs vars. The saturation
at ``p_max_kw``/``q_max_kvar`` is part of the droop curve (set them within the battery rating:
the grid backend rejects a setpoint beyond it rather than clamping).

With ``soc_limits`` (default) the active power is then held to what the battery's state of charge
(``observation.grid.storage``) can sustain until the next control step, ``T`` seconds away (the
controller's period), by the grid's energy model (:mod:`openg2g.grid.feeder.storage`)::

    discharge_kw = (soc - soc_min) capacity_kwh efficiency / (T / 3600)
    charge_kw    = (soc_max - soc) capacity_kwh / efficiency / (T / 3600)
    p_kw         = clip(p_kw, -charge_kw, discharge_kw)

so the battery reaches a limit exactly at a control step instead of being stopped there by the
grid while its setpoint stands; a headroom below ``resolution_kw`` counts as none, so a battery at
its limit is sent 0 once rather than a train of vanishing setpoints. Without ``soc_limits`` the
curve is sent as it is and the grid stops the battery at a limit (its ``StorageState.limit``).
A command delay (``delay_s``) keeps the previous setpoint in force that much longer than planned;
the grid still stops it at the limit.

A new setpoint is sent when it moves by more than ``resolution_kw`` / ``resolution_kvar``, or when
the one in force asks more than the state of charge allows.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from openg2g.core.commands import Actuator, Command, SetStoragePower
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation, StorageState

from ._base import ConfiguredController, ControllerConfig

__all__ = ["StorageDroopController", "droop_setpoint", "soc_headroom_kw"]


def droop_setpoint(v_pu: float, v_ref_pu: float, deadband_pu: float, gain_per_pu: float, limit: float) -> float:
    """One droop curve: ``clip(-gain * d, -limit, limit)`` with ``d`` the deadband excursion of ``v``."""
    if v_pu < v_ref_pu - deadband_pu:
        d = v_pu - (v_ref_pu - deadband_pu)
    elif v_pu > v_ref_pu + deadband_pu:
        d = v_pu - (v_ref_pu + deadband_pu)
    else:
        d = 0.0
    return float(np.clip(-gain_per_pu * d, -limit, limit))


def soc_headroom_kw(state: StorageState, period_s: float) -> tuple[float, float]:
    """``(charge_kw, discharge_kw)``: the largest constant charging and discharging power (kW, both
    >= 0) that keeps the battery within ``[soc_min, soc_max]`` for the next ``period_s`` seconds."""
    unit, hours = state.unit, period_s / 3600.0
    charge = max(unit.soc_max - state.soc, 0.0) * unit.capacity_kwh / unit.efficiency / hours
    discharge = max(state.soc - unit.soc_min, 0.0) * unit.capacity_kwh * unit.efficiency / hours
    return charge, discharge


class StorageDroopController(ConfiguredController):
    """Sets one battery's P and Q from the voltage at its bus, within its state of charge."""

    name = "storage_droop"
    requires = "params storage and buses"

    class Config(ControllerConfig):
        """Parameters of :class:`StorageDroopController`."""

        storage: str = Field(description="Battery name (grid.storage[].name).")
        buses: list[str] = Field(min_length=1, description="Local bus(es) whose voltage drives the droop.")
        measure: Literal["mean", "min"] = Field("mean", description="Local voltage: mean or minimum over phases.")
        v_ref_pu: float = Field(1.0, gt=0, description="Centre of the deadband (pu).")
        deadband_pu: float = Field(0.01, ge=0, description="Half-width of the deadband (pu).")
        droop_kw_per_pu: float = Field(0.0, ge=0, description="Active power per pu outside the deadband (kW/pu).")
        droop_kvar_per_pu: float = Field(0.0, ge=0, description="Reactive power per pu outside the deadband (kvar/pu).")
        p_max_kw: float = Field(0.0, ge=0, description="Largest |P| the curve asks for (kW).")
        q_max_kvar: float = Field(0.0, ge=0, description="Largest |Q| the curve asks for (kvar).")
        resolution_kw: float = Field(1.0, ge=0, description="Smallest change of P worth a new setpoint (kW).")
        resolution_kvar: float = Field(1.0, ge=0, description="Smallest change of Q worth a new setpoint (kvar).")
        soc_limits: bool = Field(
            True,
            description=(
                "Hold P to what the state of charge sustains until the next control step; false sends the "
                "curve as it is and the grid stops the battery at a limit."
            ),
        )

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        if self.config.storage not in context.storages:
            raise ControllerError(
                f"storage_droop: unknown storage {self.config.storage!r}; valid: {list(context.storages)}"
            )
        self._sent: tuple[float, float] | None = None

    def setpoint(self, v_pu: float) -> tuple[float, float]:
        """``(p_kw, q_kvar)`` the droop curves give at local voltage ``v_pu``."""
        c = self.config
        p = droop_setpoint(v_pu, c.v_ref_pu, c.deadband_pu, c.droop_kw_per_pu, c.p_max_kw)
        q = droop_setpoint(v_pu, c.v_ref_pu, c.deadband_pu, c.droop_kvar_per_pu, c.q_max_kvar)
        return p, q

    def actuators(self) -> tuple[Actuator, ...]:
        return (Actuator("storage", (self.config.storage,)),)

    def _p_range_kw(self, observation: Observation) -> tuple[float, float]:
        """The active power (kW) the battery may be sent now: ``(-charge_kw, discharge_kw)``.

        :raises ControllerError: ``soc_limits`` is on and the grid reports no state for the battery.
        """
        if not self.config.soc_limits:
            return -np.inf, np.inf
        state = observation.grid.storage.get(self.config.storage)
        if state is None:
            raise ControllerError(
                f"storage_droop: the grid state reports no state of charge for battery {self.config.storage!r} "
                "(set soc_limits: false to run the droop without it)"
            )
        charge, discharge = soc_headroom_kw(state, self.context.dt_s)
        floor = self.config.resolution_kw
        return -(charge if charge > floor else 0.0), (discharge if discharge > floor else 0.0)

    def step(self, observation: Observation) -> list[Command]:
        v = observation.grid.v_pu[self._zone]
        v_local = float(v.mean() if self.config.measure == "mean" else v.min())
        p, q = self.setpoint(v_local)
        low, high = self._p_range_kw(observation)
        p = min(max(p, low), high)
        if self._sent is not None and low <= self._sent[0] <= high:
            dp, dq = abs(p - self._sent[0]), abs(q - self._sent[1])
            if dp <= self.config.resolution_kw and dq <= self.config.resolution_kvar:
                return []
        self._sent = (p, q)
        # the droop curves are set in kW and kvar; the command takes W and var
        return [SetStoragePower(name=self.config.storage, p_w=p * 1000.0, q_var=q * 1000.0)]
