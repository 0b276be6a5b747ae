"""Battery volt-watt / volt-var droop from the local voltage.

With ``v`` the local voltage (mean or minimum of the phases of ``buses``) and ``d`` its distance
outside the deadband ``[v_ref - deadband, v_ref + deadband]`` (negative below, positive above,
0 inside)::

    p_kw   = clip(-droop_kw_per_pu   * d, -p_max_kw,   p_max_kw)     (> 0 discharges into the grid)
    q_kvar = clip(-droop_kvar_per_pu * d, -q_max_kvar, q_max_kvar)   (> 0 injects reactive power)

so low voltage discharges and injects vars, high voltage charges and absorbs vars. The saturation
at ``p_max_kw``/``q_max_kvar`` is part of the droop curve (set them within the battery rating:
the grid backend rejects a setpoint beyond it rather than clamping). A new setpoint is sent only
when it moves by more than ``resolution_kw`` / ``resolution_kvar``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from openg2g.controllers._base import ConfiguredController, ControllerConfig
from openg2g.core.commands import Actuator, Command, SetStoragePower
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

__all__ = ["StorageDroopController", "droop_setpoint"]


def droop_setpoint(v_pu: float, v_ref_pu: float, deadband_pu: float, gain_per_pu: float, limit: float) -> float:
    """One droop curve: ``clip(-gain * d, -limit, limit)`` with ``d`` the deadband excursion of ``v``."""
    if v_pu < v_ref_pu - deadband_pu:
        d = v_pu - (v_ref_pu - deadband_pu)
    elif v_pu > v_ref_pu + deadband_pu:
        d = v_pu - (v_ref_pu + deadband_pu)
    else:
        d = 0.0
    return float(np.clip(-gain_per_pu * d, -limit, limit))


class StorageDroopController(ConfiguredController):
    """Sets one battery's P and Q from the voltage at its bus."""

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

    def step(self, observation: Observation) -> list[Command]:
        v = observation.grid.v_pu[self._zone]
        v_local = float(v.mean() if self.config.measure == "mean" else v.min())
        p, q = self.setpoint(v_local)
        if self._sent is not None:
            dp, dq = abs(p - self._sent[0]), abs(q - self._sent[1])
            if dp <= self.config.resolution_kw and dq <= self.config.resolution_kvar:
                return []
        self._sent = (p, q)
        # the droop curves are set in kW and kvar; the command takes W and var
        return [SetStoragePower(name=self.config.storage, p_w=p * 1000.0, q_var=q * 1000.0)]
